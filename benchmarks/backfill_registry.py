"""Backfill the registry of evaluated episodes with the episodes docs/results.md's runs played.

Nothing is played: each documented entry's seed-0 evaluation stream is re-derived from the
harness's own stream definitions (the engines are asked only for their split lists: TWX seeds,
ScienceWorld variations). Both stream rules that ran are registered: the families dealt in turn
(agent v3 onwards) and the whole-pool shuffle of agents v1-v2 and the quick suite, and the test
episodes of the threshold fixture (``tests/fixtures/scienceworld_gold.jsonl``, which calibrated
τ_task and τ_env). Registering too much only narrows later fresh streams; registering too little
would let a seen episode count as held out.

Usage:
    .venv/bin/python benchmarks/backfill_registry.py [--registry results/registry.jsonl]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import sys
from pathlib import Path
from typing import Any

from deltamem_bench.envs import make_env
from deltamem_bench.envs.base import EpisodeSpec
from deltamem_bench.registry import DEFAULT_REGISTRY, Registry
from deltamem_bench.runner import episode_stream

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "scienceworld_gold.jsonl"


def _suites() -> dict[str, list[dict[str, Any]]]:
    spec = importlib.util.spec_from_file_location("agent_success", ROOT / "benchmarks" /
                                                  "agent_success.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["agent_success"] = module
    spec.loader.exec_module(module)
    suites: dict[str, list[dict[str, Any]]] = module.DOCUMENTED
    return suites


def whole_pool(env: Any, split: str, count: int, seed: int,
               families: list[str] | None) -> list[EpisodeSpec]:
    """The stream of agents v1-v2: the whole pool shuffled by the seed (no family turns)."""
    pool = list(env.specs(split, count=count, families=families))
    random.Random(seed).shuffle(pool)
    return pool[:count]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--registry", type=Path, default=DEFAULT_REGISTRY)
    args = parser.parse_args()
    registry = Registry(args.registry)
    written = 0
    for suite, entries in _suites().items():
        for entry in entries:
            env_options = {"game_params": entry["game_params"]} if "game_params" in entry else {}
            env = make_env(entry["env"], **env_options)
            try:
                split = env.splits[1]
                families = entry["families"].split(",") if "families" in entry else None
                run = f"docs/results.md {suite} {entry['name']} (seed 0)"
                balanced = episode_stream(env, split, entry["episodes"], 0, families)
                written += registry.add(entry["env"], balanced, stream_seed=0, run=run)
                shuffled = whole_pool(env, split, entry["episodes"], 0, families)
                written += registry.add(entry["env"], shuffled, stream_seed=0,
                                        run=run + ", whole-pool shuffle of agents v1-v2")
            finally:
                env.close()
    fixture = [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines()
               if line.strip()]
    gold = [EpisodeSpec(str(r["meta"]["task_name"]), int(r["meta"]["variation"]),
                        str(r["meta"]["split"])) for r in fixture
            if r.get("meta", {}).get("split") == "test"]
    written += registry.add("scienceworld", gold, stream_seed=0,
                            run="tests/fixtures/scienceworld_gold.jsonl (τ calibration)")
    per_env: dict[str, int] = {}
    for key in registry.episodes():
        per_env[f"{key[0]} {key[1]}"] = per_env.get(f"{key[0]} {key[1]}", 0) + 1
    print(json.dumps({"registry": str(args.registry), "lines_written": written,
                      "distinct_episodes": per_env}, indent=2))


if __name__ == "__main__":
    main()
