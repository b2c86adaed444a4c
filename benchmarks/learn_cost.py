"""What a learn costs, counted in recalls: learn p50 / recall p50, measured in the same run.

One memory (static embedder by default, trace extractor, SQLite) learns ``--prefill`` generated
episodes (``e2e.py``'s ALFWorld-like ones, whose near-identical tasks fill the candidate pool:
the worst case for placement). Then, for each of ``--rounds`` new episodes, in turn:

* ``recall``        -- ``DeltaMem.recall(task, env)`` on the episode's first-time texts;
* ``learn+recall``  -- ``DeltaMem.learn(episode, recall)``: the agent's flow, the recall it made
  handed over (the keys are not embedded again);
* ``learn``         -- ``DeltaMem.learn(episode)`` of a twin episode (same steps, a first-time
  task text) without a recall: learning recalls afresh itself.

which of the three goes first rotates per round. The ratio ``learn p50 / recall p50`` is the
figure (issue 48: at most 3). ``--profile`` adds a cProfile of ``--profile-learns`` further
learns and prints its top functions by own time and by cumulative time.
Prints a table and one JSON object.

    python benchmarks/learn_cost.py [--prefill 1000] [--rounds 300] [--embedder static]
    python benchmarks/learn_cost.py --tiny          # seconds: what the test suite runs
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import platform
import pstats
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from deltamem import DeltaMem
from deltamem.core.model import Episode

sys.path.insert(0, str(Path(__file__).parent))
from e2e import episodes  # noqa: E402
from recall import percentiles  # noqa: E402


def twin(episode: Episode, i: int) -> Episode:
    """The episode under a first-time task text (its own embedding, the same steps)."""
    return replace(episode, task=f"{episode.task} (round {i})")


def measure(mem: DeltaMem, stream: list[Episode]) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {"recall": [], "learn+recall": [], "learn": []}
    for i, episode in enumerate(stream):
        order = ["recall", "learn", "learn+recall"]
        order = order[i % 3:] + order[: i % 3]
        recall = None
        for what in order:
            t0 = time.perf_counter()
            if what == "recall":
                recall = mem.recall(episode.task, episode.env)
            elif what == "learn":
                mem.learn(twin(episode, i))
            else:
                if recall is None:  # its recall comes later this round: make it, untimed
                    recall = mem.recall(episode.task, episode.env)
                    t0 = time.perf_counter()
                mem.learn(episode, recall)
            times[what].append((time.perf_counter() - t0) * 1000)
    return times


def profile(mem: DeltaMem, stream: list[Episode], top: int) -> dict[str, Any]:
    """cProfile of learning ``stream`` (no recall handed over): the top functions."""
    prof = cProfile.Profile()
    prof.enable()
    for i, episode in enumerate(stream):
        mem.learn(twin(episode, -1 - i))
    prof.disable()
    stats = pstats.Stats(prof)
    total = stats.total_tt  # type: ignore[attr-defined]
    rows = []
    for (file, line, name), (_, calls, own, cum, _) in stats.stats.items():  # type: ignore[attr-defined]
        rows.append({"function": f"{Path(file).name}:{line}({name})", "calls": calls,
                     "own_ms": own * 1000, "cum_ms": cum * 1000,
                     "own_share": own / total, "cum_share": cum / total})
    by_own = sorted(rows, key=lambda r: -r["own_ms"])[:top]
    by_cum = sorted(rows, key=lambda r: -r["cum_ms"])[:top]
    return {"learns": len(stream), "total_ms": total * 1000, "by_own": by_own, "by_cum": by_cum}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prefill", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--embedder", default="static")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--profile-learns", type=int, default=200)
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("--tiny", action="store_true", help="a few seconds (the test suite)")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    if args.tiny:
        args.prefill, args.rounds, args.profile_learns, args.top = 20, 6, 5, 5
    with tempfile.TemporaryDirectory() as tmp:
        mem = DeltaMem.open(Path(tmp) / "learn.db", embedder=args.embedder, extractor="trace")
        mem.learn_many(episodes(args.prefill, args.seed))
        stream = episodes(args.rounds + args.profile_learns, args.seed + 1)
        times = measure(mem, stream[: args.rounds])
        prof = profile(mem, stream[args.rounds:], args.top) if args.profile else None
        mem.close()
    p = {what: dict(zip(("p50", "p95"), percentiles(ms), strict=True))
         for what, ms in times.items()}
    ratio = {what: p[what]["p50"] / p["recall"]["p50"] for what in ("learn", "learn+recall")}
    print(f"learn cost, {args.embedder} embedder, after {args.prefill} episodes, "
          f"{args.rounds} rounds ({platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cpus, load {os.getloadavg()[0]:.2f})")
    print(f"{'operation':<16} {'p50 ms':>8} {'p95 ms':>8} {'÷ recall p50':>13}")
    for what in ("recall", "learn+recall", "learn"):
        share = 1.0 if what == "recall" else ratio[what]
        print(f"{what:<16} {p[what]['p50']:>8.3f} {p[what]['p95']:>8.3f} {share:>13.2f}")
    if prof is not None:
        print(f"\ncProfile of {prof['learns']} learns ({prof['total_ms']:.0f} ms), "
              "top by own time:")
        print(f"{'function':<58} {'calls':>7} {'own %':>6} {'cum %':>6}")
        for r in prof["by_own"]:
            print(f"{r['function'][:58]:<58} {r['calls']:>7} {100 * r['own_share']:>6.1f} "
                  f"{100 * r['cum_share']:>6.1f}")
        print("top by cumulative time:")
        for r in prof["by_cum"]:
            print(f"{r['function'][:58]:<58} {r['calls']:>7} {100 * r['own_share']:>6.1f} "
                  f"{100 * r['cum_share']:>6.1f}")
    print(json.dumps({"benchmark": "learn_cost", "embedder": args.embedder,
                      "prefill": args.prefill, "rounds": args.rounds, "percentiles_ms": p,
                      "learn_over_recall": round(ratio["learn"], 3),
                      "learn_given_recall_over_recall": round(ratio["learn+recall"], 3),
                      "profile": prof, "load": os.getloadavg()[0]}))


if __name__ == "__main__":
    main()
