#!/usr/bin/env python
"""Record TextWorldExpress gold-path episodes across map seeds as deltamem episode JSON Lines.

Each line is one winning episode played with the real ``textworld_express`` engine by following
its gold path; the seed picks the map, so every seed is another layout of rooms::

    {"task": taskDescription, "env": first observation, "success": true, "score": 1.0,
     "steps": [{"action": ..., "observation": ...}, ...],
     "meta": {"task_name": game, "variation": seed, "split": fold, "game_params": ...}}

Observations are kept verbatim; a gold path that does not win aborts the recording (exit 1). An
``--out`` path ending in ``.gz`` is written gzip-compressed.

Usage::

    .venv/bin/python scripts/record_textworld_express.py \\
        --out tests/fixtures/twx_coin_gold.jsonl.gz --game coin --train 30 --test 10
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

from deltamem_bench.agent import gold_record
from deltamem_bench.envs.textworld_express import TextWorldExpressEnvironment, episode_specs


def main(argv: list[str] | None = None) -> int:
    """Record ``--train`` train-fold and ``--test`` test-fold seeds of one game."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--game", default="coin")
    parser.add_argument("--game-params", default="")
    parser.add_argument("--train", type=int, default=30, help="train-fold seeds")
    parser.add_argument("--test", type=int, default=10, help="test-fold seeds")
    args = parser.parse_args(argv)

    env = TextWorldExpressEnvironment(args.game, game_params=args.game_params, max_steps=200)
    lines: list[str] = []
    try:
        for fold, count in (("train", args.train), ("test", args.test)):
            for spec in episode_specs(env, fold, count=count):
                episode = gold_record(env, spec, game_params=env.game_params)
                lines.append(json.dumps(episode, ensure_ascii=False))
                print(f"{args.game} {fold:5s} seed {spec.variation:5d} "
                      f"steps {len(episode['steps']):3d}", file=sys.stderr)
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        env.close()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    data = ("\n".join(lines) + "\n").encode("utf-8")
    args.out.write_bytes(gzip.compress(data, mtime=0) if args.out.suffix == ".gz" else data)
    print(f"wrote {len(lines)} episodes, {args.out.stat().st_size} bytes, to {args.out}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
