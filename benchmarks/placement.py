"""Learn throughput with pruned placement against the exhaustive rule, in one interleaved run.

Two memories (static embedder by default, trace extractor, SQLite) learn the same generated
episodes (``e2e.py``'s ALFWorld-like ones, whose near-identical tasks fill the candidate pool):
one places with ``core.tree.exhaustive_placement`` (every candidate chain diffed: the rule as it
was), the other with ``core.tree.choose_placement`` (candidates whose patch-size floor cannot
win are not diffed). After ``--prefill`` episodes each, the ``--learns`` timed episodes go to
both, one episode at a time, which memory goes first alternating per episode. With
``--baseline-src`` another checkout's learn (e.g. the previous release's ``src/``) runs in the
same rotation, in a subprocess timing its own learn (``peers.py``'s learner).

Measured per memory: ms per learn (p50 / p95, episodes/s = 1 / mean), ms inside the placer per
learn, the diffs the placer ran against those the exhaustive rule runs (``PlacementStats``), and
how often the shared budget sent the pruned rule back to the exhaustive one. Every episode's
writes are compared between the two memories (action, node, parent, matched node and patch
size, node ids mapped between them as they are written): the decisions must be identical.
Prints a table and one JSON object (also to ``--out``).

    python benchmarks/placement.py [--prefill 1000] [--learns 300] [--embedder static]
    python benchmarks/placement.py --baseline-src /tmp/prev/src   # + the previous release
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from deltamem import DeltaMem
from deltamem.core.model import Experience, Node
from deltamem.core.tree import (
    MAX_DEPTH,
    Placement,
    PlacementStats,
    choose_placement,
    exhaustive_placement,
)
from deltamem.embed import make_embedder
from deltamem.engine.results import LearnResult
from deltamem.extract.trace import TraceExtractor
from deltamem.store.sqlite import SQLiteStore

sys.path.insert(0, str(Path(__file__).parent))
from e2e import episodes  # noqa: E402
from recall import percentiles  # noqa: E402

OLD, NEW, BASE = "exhaustive rule", "pruned rule", "baseline checkout"


class TimedPlacer:
    """A placement rule that counts its diffs and the time spent in it."""

    def __init__(self, rule: Callable[..., tuple[Placement, int | None]]):
        self.rule = rule
        self.stats = PlacementStats()
        self.ms = 0.0

    def __call__(self, new: Experience, chains: Sequence[Sequence[Node]], *,
                 max_depth: int = MAX_DEPTH) -> tuple[Placement, int | None]:
        t0 = time.perf_counter()
        try:
            return self.rule(new, chains, max_depth=max_depth, stats=self.stats)
        finally:
            self.ms += (time.perf_counter() - t0) * 1000


class Twins:
    """Checks that two memories made the same writes, mapping node ids as they are created."""

    def __init__(self) -> None:
        self.ids: dict[str | None, str | None] = {None: None}
        self.episodes = self.differ = 0

    def check(self, old: LearnResult, new: LearnResult) -> None:
        self.episodes += 1
        same = True
        for a, b in ((old.task, new.task), (old.env, new.env)):
            if a.action != b.action or a.patch_ops != b.patch_ops:
                same = False
            if a.node not in self.ids:
                self.ids[a.node] = b.node  # a node written now
            same = same and all(self.ids.get(x, "?") == y for x, y in (
                (a.node, b.node), (a.parent, b.parent), (a.matched, b.matched)))
        for ca, cb in zip(old.consolidated, new.consolidated, strict=False):
            self.ids.setdefault(ca.root, cb.root)
        same = same and len(old.consolidated) == len(new.consolidated)
        self.differ += not same


def run(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    embedder = make_embedder(args.embedder)
    old_placer, new_placer = TimedPlacer(exhaustive_placement), TimedPlacer(choose_placement)
    mems = {}
    for name, placer in ((OLD, old_placer), (NEW, new_placer)):
        mem = DeltaMem(SQLiteStore(tmp / f"{name[:3]}.db", snapshot_every=0), embedder,
                       TraceExtractor())
        mem.placer = placer
        mems[name] = mem
    baseline = None
    if args.baseline_src:
        from peers import Baseline

        baseline = Baseline(args.baseline_src, tmp / "baseline.db")
    twins = Twins()
    for ep in episodes(args.prefill, seed=1):
        twins.check(mems[OLD].learn(ep), mems[NEW].learn(ep))
        if baseline is not None:
            baseline.learn(ep)
    for placer in (old_placer, new_placer):
        placer.stats, placer.ms = PlacementStats(), 0.0
    units: dict[str, Callable[[Any], Any]] = {OLD: mems[OLD].learn, NEW: mems[NEW].learn}
    if baseline is not None:
        units[BASE] = baseline.learn
    names = list(units)
    times: dict[str, list[float]] = {n: [] for n in names}
    for i, ep in enumerate(episodes(args.learns, seed=2)):
        results: dict[str, Any] = {}
        for name in names[i % len(names):] + names[:i % len(names)]:
            t0 = time.perf_counter()
            results[name] = units[name](ep)
            elapsed = (time.perf_counter() - t0) * 1000
            times[name].append(results[name] if name == BASE else elapsed)
        twins.check(results[OLD], results[NEW])
    for mem in mems.values():
        mem.close()
    if baseline is not None:
        baseline.close()
    return _summary(args, times, old_placer, new_placer, twins)


def _summary(args: argparse.Namespace, times: dict[str, list[float]], old_placer: TimedPlacer,
             new_placer: TimedPlacer, twins: Twins) -> dict[str, Any]:
    names = list(times)
    out: dict[str, Any] = {}
    for name in names:
        p50, p95 = percentiles(times[name])
        out[name] = {"p50_ms": round(p50, 3), "p95_ms": round(p95, 3),
                     "episodes_per_s": round(1000 / float(np.mean(times[name])), 1)}
    for name, placer in ((OLD, old_placer), (NEW, new_placer)):
        s = placer.stats
        out[name].update({
            "placement_ms_per_learn": round(placer.ms / args.learns, 3),
            "placements": s.placements, "candidates": s.candidates, "diffs": s.diffs,
            "exhaustive_diffs": s.exhaustive_diffs, "exhaustive_runs": s.exhaustive_runs})
    ratio = out[NEW]["episodes_per_s"] / out[OLD]["episodes_per_s"]
    out["pruned ÷ exhaustive, episodes/s"] = round(ratio, 2)
    out["pruned ÷ exhaustive, p50 learn"] = round(out[OLD]["p50_ms"] / out[NEW]["p50_ms"], 2)
    out["pruned ÷ exhaustive, placement time"] = round(
        old_placer.ms / max(new_placer.ms, 1e-9), 2)
    s = new_placer.stats
    out["diffs skipped"] = f"{s.skipped} of {s.exhaustive_diffs}"
    if BASE in times:
        out["pruned ÷ baseline checkout, episodes/s"] = round(
            out[NEW]["episodes_per_s"] / out[BASE]["episodes_per_s"], 2)
        out["exhaustive ÷ baseline checkout, episodes/s"] = round(
            out[OLD]["episodes_per_s"] / out[BASE]["episodes_per_s"], 2)
    out["episodes compared"] = twins.episodes
    out["episodes whose writes differ"] = twins.differ
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prefill", type=int, default=1000)
    parser.add_argument("--learns", type=int, default=300)
    parser.add_argument("--embedder", default="static")
    parser.add_argument("--baseline-src", default=None,
                        help="another checkout's src/: its learn runs in the same rotation")
    parser.add_argument("--tmp", default=None)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(dir=args.tmp))
    try:
        result: dict[str, Any] = {
            "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cpus",
            "python": platform.python_version(), "load_before": os.getloadavg()[0],
            "embedder": args.embedder, "prefill": args.prefill, "learns": args.learns,
            "learn": run(args, tmp), "load_after": os.getloadavg()[0]}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\nlearn after {args.prefill} episodes, {args.learns} timed, interleaved "
          f"({args.embedder} embedder; load {result['load_before']:.2f} -> "
          f"{result['load_after']:.2f})")
    for name, row in result["learn"].items():
        if isinstance(row, dict):
            extra = (f"  placement {row['placement_ms_per_learn']:7.3f} ms/learn  diffs "
                     f"{row['diffs']} of {row['exhaustive_diffs']}"
                     if "diffs" in row else "")
            print(f"  {name:18} p50 {row['p50_ms']:8.3f} ms  p95 {row['p95_ms']:8.3f} ms  "
                  f"{row['episodes_per_s']:8.1f} episodes/s{extra}")
        else:
            print(f"  {name:40} {row}")
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    if result["learn"]["episodes whose writes differ"]:
        raise SystemExit("the two rules wrote differently")


if __name__ == "__main__":
    main()
