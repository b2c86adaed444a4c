"""DeltaMem demo: does experience memory help a tiny local agent? (the README's main job)

Runs entirely on the embedded defaults - SQLite, the MiniLM embedder and SmolLM2-135M in-process
via llama.cpp - with the choice agent (the model ranks the environment's valid actions). Protocol:
warm start. Each memory first learns GOLD trajectories of training variations (replayed in the
engine), then the agent plays held-out test variations of the same tasks with the memory frozen.
No memory, DeltaMem and DeltaMem's environment tree alone play exactly the same episodes, so
the differences are paired; the script prints live progress, then the measured difference of
progress with its 95% bootstrap interval, and where to look (the report, and ``deltamem view``
on the learned memory).

Rerunning with the same ``--out`` resumes (finished episodes are skipped); a changed
configuration is refused, so use a new directory for other settings.

Usage:
    .venv/bin/python scripts/demo.py [--episodes 20] [--out runs/demo]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from rich.console import Console

from deltamem_bench.cli import run_bench_command
from deltamem_bench.report import table, verdict

ENV = "twx-twc"  # TextWorld Commonsense: put each object where it belongs
GAME_PARAMS = "numLocations=1,numItemsToPutAway=2,includeDoors=0"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--episodes", type=int, default=20, help="test episodes per memory")
    parser.add_argument("--train", type=int, default=40, help="gold training episodes")
    parser.add_argument("--memory", default="none,deltamem,deltamem-env")
    parser.add_argument("--max-steps", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("runs/demo"))
    args = parser.parse_args()

    # Progress lines go to stdout, line by line, whether or not it is a terminal.
    console = Console(width=max(Console().width, 120), file=sys.stdout)
    console.print(f"[bold]DeltaMem demo[/bold]: {ENV} ({GAME_PARAMS}), warm start from "
                  f"{args.train} gold episodes, {args.episodes} held-out episodes per memory, "
                  "SmolLM2-135M on CPU (choice agent)")
    started = time.perf_counter()
    summary = run_bench_command(
        env=ENV, memory=args.memory, llm="local", episodes=args.episodes, seed=args.seed,
        protocol="warm", out=args.out, train_episodes=args.train, extractor="trace",
        max_steps=args.max_steps, game_params=GAME_PARAMS, n_ctx=4096, console=console)
    elapsed = time.perf_counter() - started
    console.print(table(summary))
    for line in verdict(summary):
        console.print(line)
    console.print(f"report: {args.out / 'report.html'}   ({elapsed:.0f} s)")
    console.print(f"the learned memory: deltamem view --db {args.out / 'deltamem' / 'memory.db'}"
                  f" --out {args.out / 'tree.html'}")


if __name__ == "__main__":
    main()
