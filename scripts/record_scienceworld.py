#!/usr/bin/env python
"""Record ScienceWorld gold-path episodes as deltamem episode JSON Lines.

Each line is one winning episode played with the real ``scienceworld`` engine by following its
gold path::

    {"task": taskDesc, "env": first observation, "success": true, "score": 1.0,
     "steps": [{"action": ..., "observation": ...}, ...],
     "meta": {"task_name": ..., "variation": ..., "split": ..., "simplification": "easy"}}

Observations are kept verbatim. A gold path that does not win aborts the recording (exit 1)
rather than writing a mislabelled episode. Re-recording is not byte-identical: for some tasks
(e.g. find-living-thing) the engine's gold path picks one of several valid targets at random.
An ``--out`` path ending in ``.gz`` is written gzip-compressed.

Usage::

    # the calibration fixture (6 tasks x 4 train + 2 test variations)
    .venv/bin/python scripts/record_scienceworld.py --out tests/fixtures/scienceworld_gold.jsonl \
        --tasks find-living-thing find-plant lifespan-longest-lived power-component \
        test-conductivity chemistry-mix --train 4 --test 2
    # the recall-quality fixture (12 tasks x 8 train + 2 test variations)
    .venv/bin/python scripts/record_scienceworld.py \
        --out tests/fixtures/scienceworld_gold_12x10.jsonl.gz
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from pathlib import Path

from deltamem_bench.agent import gold_record
from deltamem_bench.envs.base import EpisodeSpec
from deltamem_bench.envs.scienceworld import ScienceWorldEnvironment, shutdown_jvm

# Short gold paths (<= 30 actions) with compact observations keep the fixture small.
DEFAULT_TASKS = ("find-living-thing", "find-plant", "find-animal", "find-non-living-thing",
                 "lifespan-longest-lived", "lifespan-shortest-lived",
                 "lifespan-longest-lived-then-shortest-lived", "power-component",
                 "power-component-renewable-vs-nonrenewable-energy", "test-conductivity",
                 "chemistry-mix", "chemistry-mix-paint-secondary-color")


def main(argv: list[str] | None = None) -> int:
    """Record the episodes named on the command line; print a per-task summary."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--tasks", nargs="+", default=list(DEFAULT_TASKS))
    parser.add_argument("--train", type=int, default=8, help="train variations per task")
    parser.add_argument("--test", type=int, default=2, help="test variations per task")
    args = parser.parse_args(argv)

    env = ScienceWorldEnvironment(max_steps=200, gold_paths=True)
    lines: list[str] = []
    try:
        for task in args.tasks:
            specs = [EpisodeSpec(task, v, split)
                     for split, n in (("train", args.train), ("test", args.test))
                     for v in env.variations(task, split)[:n]]
            for spec in specs:
                began = time.perf_counter()
                episode = gold_record(env, spec, simplification=env.simplification)
                lines.append(json.dumps(episode, ensure_ascii=False))
                print(f"{task:28s} {spec.split:5s} var {spec.variation:4d} "
                      f"steps {len(episode['steps']):3d} "
                      f"{time.perf_counter() - began:6.2f} s", file=sys.stderr)
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        env.close()
        shutdown_jvm()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    data = ("\n".join(lines) + "\n").encode("utf-8")
    # mtime=0: the same episodes give the same bytes
    args.out.write_bytes(gzip.compress(data, mtime=0) if args.out.suffix == ".gz" else data)
    print(f"wrote {len(lines)} episodes, {args.out.stat().st_size} bytes, to {args.out}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
