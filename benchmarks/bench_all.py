"""`make bench`: one table of ratios, each against its peer or reference measured in the same run.

Runs the benchmarks below one after the other, each in its own process at a size of a minute or
less (``--tiny``: seconds, what the test suite runs), reads the JSON object each prints, and
prints one table: the ratio, what it is measured against (always in the same script run, hence
the same load), the target where the project set one, and the script that measured it. A script
that fails is a row saying so (and the exit status is 1); nothing is skipped silently.

    python benchmarks/bench_all.py            # make bench
    python benchmarks/bench_all.py --tiny
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

Ratio = tuple[str, float | None, str, str]  # name, value, against, target


@dataclass(frozen=True)
class Script:
    name: str
    args: list[str]
    tiny: list[str]
    ratios: Callable[[dict[str, Any]], list[Ratio]]


def _learn(r: dict[str, Any]) -> list[Ratio]:
    return [("learn p50, in recalls", r["learn_over_recall"], "recall p50", "<= 3"),
            ("learn given the recall, in recalls", r["learn_given_recall_over_recall"],
             "recall p50", "")]


def _recall(r: dict[str, Any]) -> list[Ratio]:
    row = r["rows"][-1]
    return [(f"reference code's scan ÷ ours, {row['nodes']:,} nodes", row["speedup_p50"],
             "the reference's per-query numpy scan", "")]


def _placement(r: dict[str, Any]) -> list[Ratio]:
    learn = r["learn"]
    return [("learn episodes/s, pruned ÷ exhaustive placement",
             learn["pruned ÷ exhaustive, episodes/s"], "the exhaustive rule", ">= 1"),
            ("episodes whose writes differ", float(learn["episodes whose writes differ"]),
             "the exhaustive rule", "0")]


def _open(r: dict[str, Any]) -> list[Ratio]:
    row = r["rows"][-1]
    return [(f"open, rebuild ÷ snapshot, {row['nodes']:,} nodes", row["speedup"],
             "rebuilding the index from rows", "> 1")]


def _filtered(r: dict[str, Any]) -> list[Ratio]:
    rare = [row for row in r["rows"] if "rare" in row["case"]]
    return [("filtered recall (1 in 100) ÷ unfiltered", rare[0]["x_baseline"] if rare else None,
             "unfiltered recall", "")]


def _lock(r: dict[str, Any]) -> list[Ratio]:
    return [("write lock, worst crafted ÷ ordinary episode", r["worst_over_ordinary"],
             "an ordinary episode", "")]


def _listing(r: dict[str, Any]) -> list[Ratio]:
    sizes = r["sizes"]
    out: list[Ratio] = [(f"{what} per item, {sizes[-1]:,} ÷ {sizes[0]:,} items", growth,
                         f"itself at {sizes[0]:,}", "~1 (linear)")
                        for what, growth in r["growth"].items() if what != "files_alone"]
    per = r["per_item_us"]
    out.append(("skills export ÷ writing its files alone", per["skills_export"][-1]
                / max(per["files_alone"][-1], 1e-9), "the file system, same files", ""))
    return out


def _write_cost(r: dict[str, Any]) -> list[Ratio]:
    ours = "trace extractor (no model)" if r["llm"] == "none" else "ours"
    return [(f"model calls, {ours} ÷ paper's scheme", r["ours_vs_paper_calls"],
             "the paper's 2 calls/episode", "< 1")]


def _server(r: dict[str, Any]) -> list[Ratio]:
    ratios = r["results"]["sqlite"]["ratio_per_core"]
    per_core, bare = ratios["httptools"], ratios.get("bare", {})
    out: list[Ratio] = [(f"REST ÷ in-process per core (CPU), {op}, SQLite", per_core[op],
                         "in-process calls", ">= 0.8")
                        for op in ("recall", "learn") if per_core[op] is not None]
    if bare.get("recall") is not None:  # the floor: no app at all on the same stack
        out.append(("bare ASGI ÷ in-process per core (CPU), recall, SQLite", bare["recall"],
                    "in-process calls", ""))
    return out


def _cold(r: dict[str, Any]) -> list[Ratio]:
    rows = r["rows"]
    out: list[Ratio] = []
    if "minilm_first_empty_over_kept" in r:
        out.append(("first MiniLM recall, graph built ÷ graph kept",
                    r["minilm_first_empty_over_kept"], "the first process ever", "> 1"))
    for name in ("minilm: first", "static: first"):
        if name in rows:
            out.append((f"{name} recall of a fresh process, ms", rows[name]["p50"],
                        "(absolute: the target is a time)", "<= 300"))
    if "mcp_initialize_over_python" in r:
        out.append(("deltamem mcp initialize ÷ python -c pass", r["mcp_initialize_over_python"],
                    "the interpreter's own start", ""))
    if "mcp_initialize_front_over_sdk" in r:
        out.append(("deltamem mcp initialize, front ÷ SDK server",
                    r["mcp_initialize_front_over_sdk"], "the SDK server answering", "< 1"))
    front = rows.get("deltamem mcp (front): initialize answered")
    if front is not None:
        out.append(("deltamem mcp initialize, ms", front["p50"],
                    "(absolute: the target is a time)", "<= 300"))
    return out


def _storage(r: dict[str, Any]) -> list[Ratio]:
    sw = r["after"]["scienceworld"]
    return [("stored ÷ flat chars, ScienceWorld gold", sw["stored_over_flat"],
             "a one-record-per-episode memory", "<= 0.6"),
            ("tokens per recall ÷ flat top-1's, ScienceWorld", round(
                sw["tokens_per_recall"] / sw["flat_tokens_per_recall"], 3),
             "the flat top-1 memory's block", "")]


SCRIPTS = [
    Script("learn_cost.py", ["--prefill", "1000", "--rounds", "300"], ["--tiny"], _learn),
    Script("recall.py", ["--sizes", "10000", "--queries", "100"],
           ["--sizes", "200", "--queries", "5"], _recall),
    Script("placement.py", ["--prefill", "500", "--learns", "100"],
           ["--prefill", "10", "--learns", "4"], _placement),
    Script("open.py", ["--sizes", "10000", "--repeats", "3"], ["--sizes", "400", "--repeats", "1"],
           _open),
    Script("filtered_recall.py", ["--nodes", "5000", "--queries", "20"],
           ["--nodes", "200", "--queries", "2"], _filtered),
    Script("write_lock.py", ["--steps", "300", "--old-steps", "10"],
           ["--steps", "30", "--old-steps", "5"], _lock),
    Script("scale_listing.py", ["--sizes", "1000,10000"], ["--tiny"], _listing),
    Script("write_cost.py", ["--llm", "none", "--embedder", "static"], ["--tiny"], _write_cost),
    Script("storage.py", ["--no-baseline"], ["--no-baseline", "--embedder", "hashing"],
           _storage),
    Script("cold_start.py", ["--runs", "3"], ["--tiny"], _cold),
    Script("server.py", ["--embedder", "static", "--clients", "4", "--requests", "50"],
           ["--embedder", "hashing", "--clients", "1", "--requests", "2"], _server),
]


def last_json(stdout: str) -> dict[str, Any]:
    """The last JSON object a script printed (it may span lines)."""
    lines = stdout.strip().splitlines()
    for start in range(len(lines) - 1, -1, -1):
        if lines[start].startswith("{"):
            for text in ("\n".join(lines[start:]), lines[start]):
                try:
                    found = json.loads(text)
                except json.JSONDecodeError:
                    continue
                if isinstance(found, dict):
                    return found
    raise ValueError("no JSON object in its output")


def run(script: Script, tiny: bool) -> tuple[list[Ratio], float, str | None]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "bench" / "src"),
                                          os.environ.get("PYTHONPATH", "")])}
    started = time.perf_counter()
    done = subprocess.run([sys.executable, str(HERE / script.name),
                           *(script.tiny if tiny else script.args)],
                          capture_output=True, text=True, env=env, check=False, timeout=1800)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        return [], seconds, f"exit {done.returncode}: {tail[0][:120]}"
    try:
        return script.ratios(last_json(done.stdout)), seconds, None
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        return [], seconds, f"unreadable report: {exc!r}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="seconds per script (the test suite)")
    parser.add_argument("--only", default="", help="comma-separated script names")
    args = parser.parse_args()
    wanted = {n.strip() for n in args.only.split(",") if n.strip()}
    rows: list[dict[str, Any]] = []
    failed = False
    for script in SCRIPTS:
        if wanted and script.name not in wanted:
            continue
        ratios, seconds, error = run(script, args.tiny)
        failed = failed or error is not None
        if error is not None:
            rows.append({"script": script.name, "ratio": "failed", "value": None,
                         "against": error, "target": "", "seconds": round(seconds, 1)})
        for name, value, against, target in ratios:
            rows.append({"script": script.name, "ratio": name,
                         "value": None if value is None else round(float(value), 3),
                         "against": against, "target": target, "seconds": round(seconds, 1)})
    size = "tiny sizes: the figures mean nothing" if args.tiny else "make bench"
    print(f"deltamem benchmarks ({size}"
          f"; {platform.processor() or platform.machine()}, {os.cpu_count()} cpus, "
          f"load {os.getloadavg()[0]:.2f}); every ratio is measured within one script run")
    print(f"{'ratio':<52} {'value':>8} {'target':>12}  {'against':<36} script")
    for row in rows:
        value = "-" if row["value"] is None else f"{row['value']:.2f}"
        print(f"{row['ratio'][:52]:<52} {value:>8} {row['target']:>12}  "
              f"{row['against'][:36]:<36} {row['script']}")
    print(json.dumps({"benchmark": "bench_all", "tiny": args.tiny, "rows": rows,
                      "load": os.getloadavg()[0]}))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
