"""Recall latency with the template rule on the memory-quality probe's memory, before and after,
in one run; and whether both answer the same.

Two worker processes each build the probe's DeltaMem memory (``deltamem_bench.probe``'s
``make_probe_memory``: MiniLM, the trace extractor, the text-game scene plug-in) from the same
gold train episodes (``benchmarks/probe.py --gold-cache FILE`` writes them): one imports this
tree, the other the tree under ``--before`` (e.g. ``git archive <commit> src bench | tar -x -C
DIR``). Queries: the dev split of the templated tasks (no scene), the dev games' tasks of a
probe run's JSON (``--games-json``, no scene) and the gold episodes' own tasks with their
scenes. Each worker first recalls every query once (top 3, with every scoring term) and the
two answers must be equal (usage fields aside, node ids named by insertion order); the
embedding cache is then warm, as in the turn-6 measurement. Then each round times one recall
per query on each side, in chunks of 20 queries with the sides taking turns (their order
rotated each round), so that a change of the machine's load falls on all sides alike; p50 /
p95 over all rounds. ``kind_weight`` 0 (the cosine alone) is timed the same way
in the "after" worker as the floor. Prints a table and one JSON object.

    python benchmarks/probe.py --env alfworld --games 60 --train 120 --memories deltamem \\
        --gold-cache /tmp/gold120.jsonl --out /tmp/probe.json
    git archive <before> src bench | tar -x -C /tmp/before
    python benchmarks/recall_slots.py --gold /tmp/gold120.jsonl --before /tmp/before \\
        --templated benchmarks/probe_tasks/templated.json --games-json /tmp/probe.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent
CHUNK = 20  # queries timed on one side before the next side's turn


def worker(gold: Path, queries: list[list[str]]) -> None:
    """Serve one memory over stdin/stdout: ``answers``, ``time <weight>``, ``quit``."""
    from deltamem.embed import make_embedder
    from deltamem_bench.probe import load_gold, make_probe_memory

    with tempfile.TemporaryDirectory(prefix="recall-slots-") as tmp:
        memory = make_probe_memory("deltamem", Path(tmp), make_embedder())
        assert memory.deltamem is not None
        mem = memory.deltamem.mem
        for episode in load_gold(gold):
            memory.learn(episode)
        # Node ids are random: name each by its place in the store's insertion order.
        names = {node.id: f"node-{i}" for i, node in enumerate(mem.store.nodes(mem.space))}
        print(json.dumps({"ready": True}), flush=True)
        for line in sys.stdin:
            command = line.split()
            if command[0] == "answers":
                out = []
                for task, scene in queries:
                    answer = mem.recall(task, scene, top_k=3, explain=True).to_dict(explain=True)
                    answer.pop("usage", None)
                    out.append(_named(answer, names))
                print(json.dumps({"answers": out}), flush=True)
            elif command[0] == "time":
                mem.reader.kind_weight = float(command[1])
                times = []
                for task, scene in queries[int(command[2]):int(command[3])]:
                    started = time.perf_counter()
                    mem.recall(task, scene)
                    times.append((time.perf_counter() - started) * 1000)
                mem.reader.kind_weight = 8.0
                print(json.dumps({"times": times}), flush=True)
            else:
                break
        memory.close()


def _named(value: Any, names: dict[str, str]) -> Any:
    """``value`` with node ids replaced by their names, and times (``*_at``) left out."""
    if isinstance(value, dict):
        return {k: _named(v, names) for k, v in value.items() if not k.endswith("_at")}
    if isinstance(value, list):
        return [_named(v, names) for v in value]
    if isinstance(value, str):
        return _ID.sub(lambda m: names.get(m.group(0), m.group(0)), value)
    return value


_ID = re.compile(r"\b[te]-[0-9a-f]{16}\b")  # a node id, also inside the rendered context


def first_difference(a: Any, b: Any, path: str = "") -> str:
    """Where two JSON values first differ (for the report)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if a.get(key) != b.get(key):
                return first_difference(a.get(key), b.get(key), f"{path}.{key}")
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if x != y:
                return first_difference(x, y, f"{path}[{i}]")
    if isinstance(a, str) and isinstance(b, str):
        at = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                  min(len(a), len(b)))
        return f"{path}: ...{a[max(0, at - 40):at + 60]!r} != ...{b[max(0, at - 40):at + 60]!r}"
    return f"{path}: {str(a)[:120]} != {str(b)[:120]}"


class Worker:
    def __init__(self, src: Path, args: argparse.Namespace, queries: Path):
        env = {**os.environ, "PYTHONPATH": f"{src / 'src'}:{src / 'bench' / 'src'}",
               "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--worker", "--gold", str(args.gold),
             "--queries", str(queries)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=HERE)
        assert json.loads(self.read())["ready"]

    def read(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit("a worker exited early")
        return line

    def ask(self, command: str) -> Any:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return json.loads(self.read())

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("quit\n")
        self.proc.stdin.flush()
        self.proc.wait(timeout=60)


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"p50": round(statistics.median(ordered), 2),
            "p95": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--gold", type=Path, required=True)
    parser.add_argument("--before", type=Path, help="a tree with the 'before' src/ and bench/")
    parser.add_argument("--templated", type=Path,
                        default=HERE / "benchmarks" / "probe_tasks" / "templated.json")
    parser.add_argument("--games-json", type=Path, default=None)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--queries", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.gold, json.loads(args.queries.read_text(encoding="utf-8")))
        return
    if args.before is None:
        parser.error("--before is required")
    sets = json.loads(args.templated.read_text(encoding="utf-8"))
    queries = [[t["task"], ""] for t in sets["dev"] if t["env"] == "alfworld"]
    if args.games_json is not None:
        rows = json.loads(args.games_json.read_text(encoding="utf-8"))["rows"]["deltamem"]
        queries += [[r["task"], ""] for r in rows]
    from deltamem_bench.probe import load_gold

    queries += [[e.task, e.env] for e in load_gold(args.gold)]
    load_before = os.getloadavg()
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(queries, f)
    workers = {"before": Worker(args.before, args, Path(f.name)),
               "after": Worker(HERE, args, Path(f.name))}
    answers = {name: w.ask("answers")["answers"] for name, w in workers.items()}
    differ = [i for i, (a, b) in enumerate(zip(answers["before"], answers["after"], strict=True))
              if a != b]
    times: dict[str, list[float]] = {"before": [], "after": [], "cosine alone": []}
    sides = [("before", workers["before"], 8), ("after", workers["after"], 8),
             ("cosine alone", workers["after"], 0)]
    for turn in range(args.rounds):  # chunks of queries, the sides in turn, their order rotated
        for start in range(0, len(queries), CHUNK):
            for name, w, weight in sides[turn % 3:] + sides[:turn % 3]:
                times[name] += w.ask(f"time {weight} {start} {start + CHUNK}")["times"]
    for w in workers.values():
        w.close()
    os.unlink(f.name)
    stats = {name: percentiles(t) for name, t in times.items()}
    result = {"queries": len(queries), "rounds": args.rounds, "answers_equal": not differ,
              "differing_queries": differ[:20],
              "first_differences": [first_difference(answers["before"][i], answers["after"][i])
                                    for i in differ[:5]],
              "ms": stats,
              "p50_ratio_after_before": round(stats["after"]["p50"] / stats["before"]["p50"], 3),
              "load_before": [round(x, 2) for x in load_before],
              "load_after": [round(x, 2) for x in os.getloadavg()]}
    print(f"recall with the template rule, probe memory ({len(queries)} queries x "
          f"{args.rounds} rounds); answers equal: {not differ}")
    print("| side | p50 ms | p95 ms |\n|---|---|---|")
    for name, s in stats.items():
        print(f"| {name} | {s['p50']} | {s['p95']} |")
    print(json.dumps(result))
    if differ:
        sys.exit(1)


if __name__ == "__main__":
    main()
