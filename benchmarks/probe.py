"""The memory-quality probe at scale: each memory learns gold train games, then a deterministic
executor plays what it recalls on dev games (no model; see ``deltamem_bench.probe``).

Prints one table row per memory (shares in %: recalled kind right/wrong/none, the adapted
procedure's appliance/destination/order right, executable manipulations, executor success,
first search hint right, DeltaMem's environment tree matched) and one JSON object; ``--out``
also writes the JSON with every per-game row. The no-memory row (the scripted explorer) is
the baseline, measured in the same run on the same games.

    python benchmarks/probe.py --env alfworld --games 1000 --train 120 [--memories none,deltamem]
    (--memories may add deltamem-cosine: DeltaMem with recall by the cosine alone, and
    deltamem-align: its skill adapted by the probe's word alignment, not the memory's roles)
    python benchmarks/probe.py --env scienceworld --games 60 --train 60
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from deltamem.embed import make_embedder
from deltamem_bench.probe import (
    PROBE_ABLATIONS,
    PROBE_KINDS,
    load_gold,
    probe_env,
    probe_streams,
    run_probe,
    save_gold,
    table,
)

ENVS = {"alfworld": "alfworld-generated", "scienceworld": "scienceworld"}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--env", choices=sorted(ENVS), default="alfworld")
    parser.add_argument("--games", type=int, default=60, help="dev games probed")
    parser.add_argument("--train", type=int, default=60, help="gold train games learned")
    parser.add_argument("--memories", default=",".join(PROBE_KINDS))
    parser.add_argument("--families", default="", help="comma list of task families")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--embedder", default="", help="embedder spec (default: the library's)")
    parser.add_argument("--out", type=Path, default=None, help="write the full JSON here")
    parser.add_argument("--templated", type=Path, default=None,
                        help="templated tasks (benchmarks/probe_tasks/templated.json): report "
                             "the kind DeltaMem and Synapse recall for each, dev and test")
    parser.add_argument("--splits", default="dev",
                        help="which splits of --templated to report (dev; dev,test)")
    parser.add_argument("--gold-cache", type=Path, default=None,
                        help="gold train episodes kept here and reused when present")
    args = parser.parse_args()
    kinds = [k.strip() for k in args.memories.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in PROBE_KINDS + PROBE_ABLATIONS]
    if unknown:
        sys.exit(f"unknown memories {unknown}; choose from {PROBE_KINDS + PROBE_ABLATIONS}")
    name = ENVS[args.env]
    families = [f for f in args.families.split(",") if f] or None
    started = time.perf_counter()
    env = probe_env(name)
    try:
        cached = args.gold_cache is not None and args.gold_cache.exists()
        train, games = probe_streams(env, name, 0 if cached else args.train, args.games,
                                     args.seed, families)
        if cached:
            train = load_gold(args.gold_cache)
        elif args.gold_cache is not None:
            save_gold(args.gold_cache, train)
        templated = None
        if args.templated is not None:
            sets = json.loads(args.templated.read_text(encoding="utf-8"))
            templated = {split: [t for t in sets[split] if ENVS[t["env"]] == name]
                         for split in args.splits.split(",")}
        embedder = make_embedder(args.embedder) if args.embedder else make_embedder()
        with tempfile.TemporaryDirectory(prefix="probe-") as tmp:
            result = run_probe(env, name, train, games, kinds, Path(tmp), embedder,
                               templated=templated)
    finally:
        env.close()
    result["seconds"]["total"] = round(time.perf_counter() - started, 1)
    print(f"memory-quality probe: {name}, {result['train']} gold train episodes, "
          f"{result['games']} dev games")
    print(table(result))
    for kind, splits in result.get("templated", {}).items():
        for split, found in splits.items():
            print(f"templated tasks, {kind}, {split}: right {100 * found['right']:.1f}%, "
                  f"wrong {100 * found['wrong']:.1f}%, none {100 * found['none']:.1f}% "
                  f"of {found['tasks']}")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1), encoding="utf-8")
    summary = {k: v for k, v in result.items() if k != "rows"}
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
