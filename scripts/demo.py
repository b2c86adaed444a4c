"""DeltaMem demo: does experience memory help a tiny local agent? (the README's main job)

Runs entirely on the embedded defaults - SQLite, the MiniLM embedder and SmolLM2-135M in-process
via llama.cpp - in TextWorldExpress's Coin Collector (two rooms, no doors, no distractors), the
fastest environment we have. Protocol: warm start. Each memory first learns a few GOLD
trajectories of training games (replayed in the engine), then the agent plays held-out test
games with that memory frozen. The same games, in the same order, are played with no memory,
DeltaMem and the three baselines (Synapse, AWM, ReasoningBank), and the script prints the summary
table and writes ``report.html`` (plots inline) to the run directory.

DeltaMem uses the ``trace`` extractor here (experiences read off the trajectory, no model call):
SmolLM2-135M is too small to write useful structured experiences, and it keeps the demo fast.
Pass ``--extractor llm`` to use the model, as in the paper. Rerunning with the same ``--out``
resumes (finished episodes are skipped); use a new directory for a fresh run.

Usage:
    .venv/bin/python scripts/demo.py [--episodes 3] [--train 3] [--out runs/demo]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from rich.console import Console

from deltamem_bench.cli import run_bench_command
from deltamem_bench.report import table

GAME_PARAMS = "numLocations=2,includeDoors=0,numDistractorItems=0"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=3, help="test games per memory")
    parser.add_argument("--train", type=int, default=3, help="gold training games")
    parser.add_argument("--memory", default="none,deltamem,synapse,awm,reasoningbank")
    parser.add_argument("--max-steps", type=int, default=6)
    parser.add_argument("--extractor", default="trace", choices=("trace", "llm"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("runs/demo"))
    args = parser.parse_args()

    console = Console(width=max(Console().width, 130))  # the table has 11 columns
    console.print(f"[bold]DeltaMem demo[/bold]: twx-coin ({GAME_PARAMS}), warm start from "
                  f"{args.train} gold games, {args.episodes} test games per memory, "
                  "SmolLM2-135M on CPU")
    started = time.perf_counter()
    summary = run_bench_command(
        env="twx-coin", memory=args.memory, llm="local", episodes=args.episodes,
        seed=args.seed, protocol="warm", out=args.out, train_episodes=args.train,
        extractor=args.extractor, max_steps=args.max_steps, game_params=GAME_PARAMS,
        n_ctx=2048)
    elapsed = time.perf_counter() - started
    console.print(table(summary))
    console.print(f"report: {args.out / 'report.html'}   ({elapsed:.0f} s)")


if __name__ == "__main__":
    main()
