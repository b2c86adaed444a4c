"""Agent success with each memory: runs ``deltamem bench`` for one config, prints table + JSON.

The JSON carries, per memory kind, the success rate with its 95% Wilson interval and the SR
difference against the no-memory baseline measured in the same run (same episodes, same order).

Usage:
    .venv/bin/python benchmarks/agent_success.py --env twx-coin --episodes 10 \
        --memory none,deltamem,synapse,awm,reasoningbank --protocol online --out runs/agent
    (any other ``deltamem bench`` option can be given: see ``--help``)
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from deltamem_bench.cli import run_bench_command
from deltamem_bench.report import table


def with_baseline(summary: dict[str, Any]) -> dict[str, Any]:
    """Add each kind's SR difference against ``none`` (when it was run)."""
    rows = {r["kind"]: r for r in summary["kinds"]}
    base = rows.get("none")
    for row in summary["kinds"]:
        row["sr_minus_none"] = (round(row["success_rate"] - base["success_rate"], 4)
                                if base else None)
    return summary


def main() -> None:
    p = argparse.ArgumentParser(description="agent success per memory kind")
    p.add_argument("--env", default="twx-coin")
    p.add_argument("--memory", default="none,deltamem,synapse,awm,reasoningbank")
    p.add_argument("--ablations", action="store_true")
    p.add_argument("--llm", default="local")
    p.add_argument("--base-url")
    p.add_argument("--model")
    p.add_argument("--episodes", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--protocol", default="online", choices=("online", "warm"))
    p.add_argument("--train-episodes", type=int, default=5)
    p.add_argument("--extractor", default="llm", choices=("llm", "trace"))
    p.add_argument("--max-steps", type=int)
    p.add_argument("--game-params")
    p.add_argument("--families")
    p.add_argument("--out", type=Path, default=Path("runs/agent_success"))
    a = p.parse_args()
    started = time.perf_counter()
    summary = run_bench_command(
        env=a.env, memory=a.memory, ablations=a.ablations, llm=a.llm, base_url=a.base_url,
        model=a.model, episodes=a.episodes, seed=a.seed, protocol=a.protocol, out=a.out,
        train_episodes=a.train_episodes, extractor=a.extractor, max_steps=a.max_steps,
        game_params=a.game_params, families=a.families)
    summary = with_baseline(summary)
    summary["wall_s"] = round(time.perf_counter() - started, 1)
    Console().print(table(summary))
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
