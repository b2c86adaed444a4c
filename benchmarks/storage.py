"""Stored / flat and tokens per recall, this tree against a baseline checkout, in one run.

Each memory learns the train episodes of the recorded gold fixtures (``recall_quality.py``'s:
ScienceWorld 12 tasks x 8 variations, TextWorldExpress coin 30 maps) with the default settings,
the trace extractor and auto-consolidation, then answers the held-out queries. Per fixture and
memory:

* **stored / flat** -- what the store keeps live for recall (``stats()["stored_chars"]``:
  node rows, and since issue 48.2 the texts kept once per space) over what a
  one-record-per-episode memory of the same extracted experiences holds (``flat_chars``);
  the trees' rows and the texts separately; **history** -- what the audit log keeps of the
  nodes consolidation retired (not live, not counted as stored);
* **recall** -- ``recall_quality.py``'s plan fidelity and recall precision (the recalled
  procedure comes from the query's own task: recall@1 by task) on the held-out queries, and
  the tokens of the injected block, unbudgeted and at ``--budget``, against the flat top-1
  memory's block (Synapse-style, the same in both runs).

The baseline is another checkout's ``src/`` (default: ``git archive`` of ``--baseline-ref``,
``main``), run in a child process with this script, so both are measured on the same machine
in the same run (``--no-baseline``: this tree alone, as ``make bench`` runs it; stored / flat
is itself a ratio against the flat memory of the same run). Prints a table and one JSON object
(also to ``--json``).

    python benchmarks/storage.py [--embedder minilm] [--baseline-ref main | --baseline-src DIR]
    python benchmarks/storage.py --no-baseline
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))


def measure(embedder_name: str, budget: int) -> dict[str, Any]:
    """This process's deltamem on both fixtures (run with the checkout's ``src`` first on the
    path)."""
    from recall_quality import SCIENCEWORLD, TEXTWORLD, Deltas, Flat, evaluate, load

    import deltamem
    from deltamem.embed import make_embedder

    embedder = make_embedder(embedder_name)
    out: dict[str, Any] = {"deltamem": str(Path(deltamem.__file__).parent.parent)}
    with tempfile.TemporaryDirectory() as tmp:
        for name, path in (("scienceworld", SCIENCEWORLD), ("twx-coin", TEXTWORLD)):
            train, held = load(path)
            deltas = Deltas(train, embedder, Path(tmp) / f"{name}.db")
            stats = deltas.stats()
            history = [e for e in deltas.mem.store.audit_log(deltas.mem.space)
                       if e["action"] == "retire"]
            unbudgeted = evaluate(deltas, held, None)
            budgeted = evaluate(deltas, held, budget)
            flat = evaluate(Flat(train, embedder), held, None)
            texts = stats.get("texts") or {"count": 0, "chars": 0}
            out[name] = {
                "episodes": stats["episodes"], "flat_chars": stats["flat_chars"],
                "stored_chars": stats["stored_chars"],
                "stored_over_flat": round(stats["stored_chars"] / stats["flat_chars"], 3),
                "task_rows": stats["task"].get("stored_chars"),
                "env_rows": stats["env"].get("stored_chars"),
                "texts": texts["count"], "text_chars": texts["chars"],
                "nodes": stats["task"]["nodes"] + stats["env"]["nodes"],
                "consolidated_roots": (stats["task"]["consolidated_roots"]
                                       + stats["env"]["consolidated_roots"]),
                "retired": sum(len(e["detail"]["nodes"]) for e in history),
                "history_chars": sum(len(json.dumps(e["detail"], ensure_ascii=False,
                                                    separators=(",", ":")))
                                     for e in history),
                "plan_fidelity": unbudgeted["plan_fidelity"],
                "recall_precision": unbudgeted["recall_precision"],
                "tokens_per_recall": unbudgeted["tokens_per_recall"],
                f"tokens_at_{budget}": budgeted["tokens_per_recall"],
                "flat_tokens_per_recall": flat["tokens_per_recall"],
                "learn_s": round(deltas.learn_s, 1),
            }
            deltas.mem.close()
    return out


def baseline_src(ref: str, into: Path) -> Path:
    """``src/`` of ``ref`` (``git archive``) unpacked under ``into``."""
    data = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "src"], check=True,
                          capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def run_child(src: Path, embedder: str, budget: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), str(ROOT / "bench" / "src")])}
    done = subprocess.run([sys.executable, __file__, "--child", "--embedder", embedder,
                           "--budget", str(budget)], env=env, check=True, capture_output=True,
                          text=True)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


ROWS = (("stored / flat", "stored_over_flat"), ("stored chars", "stored_chars"),
        ("  task rows", "task_rows"), ("  env rows", "env_rows"),
        ("  texts (chars)", "text_chars"), ("  texts (count)", "texts"),
        ("live nodes", "nodes"), ("consolidated roots", "consolidated_roots"),
        ("retired to history", "retired"), ("history chars (not live)", "history_chars"),
        ("plan fidelity", "plan_fidelity"), ("recall precision (@1)", "recall_precision"),
        ("tokens per recall", "tokens_per_recall"), ("tokens at budget", "tokens_at_budget"),
        ("flat top-1 tokens per recall", "flat_tokens_per_recall"), ("learn s", "learn_s"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedder", default="minilm")
    parser.add_argument("--budget", type=int, default=400)
    parser.add_argument("--baseline-ref", default="main", help="git ref of the baseline")
    parser.add_argument("--baseline-src", type=Path, help="a baseline src/ folder instead")
    parser.add_argument("--no-baseline", action="store_true", help="measure this tree alone")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.embedder, args.budget)))
        return 0
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        if args.no_baseline:
            before = None
        else:
            base = args.baseline_src or baseline_src(args.baseline_ref, Path(tmp))
            before = run_child(base, args.embedder, args.budget)
        after = run_child(ROOT / "src", args.embedder, args.budget)
    label = "none" if before is None else \
        str(args.baseline_src) if args.baseline_src else args.baseline_ref
    for fixture in ("scienceworld", "twx-coin"):
        print(f"\n{fixture} ({args.embedder}; before: {label}, after: this tree)")
        print(f"{'':30}{'before':>10}{'after':>10}")
        for title, key in ROWS:
            key = f"tokens_at_{args.budget}" if key == "tokens_at_budget" else key
            was = "-" if before is None else before[fixture][key]
            print(f"{title:30}{was!s:>10}{after[fixture][key]!s:>10}")
    result = {"benchmark": "storage", "embedder": args.embedder, "budget": args.budget,
              "baseline": label, "machine": platform.platform(), "cpus": os.cpu_count(),
              "load": os.getloadavg(), "wall_s": round(time.perf_counter() - started, 1),
              "before": before, "after": after}
    text = json.dumps(result, indent=1)
    print("\n" + text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
