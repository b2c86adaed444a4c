"""Does the memory make the agent better? The whole paired comparison in one resumable command.

Each entry of a suite is one ``deltamem bench`` run (one environment, one protocol, every arm on
the same episode stream) in its own directory under ``--out``; a rerun skips what is logged and
continues, and a changed configuration is refused. At the end the script prints, per entry, each
arm's progress and success and the paired difference against no memory (95% bootstrap interval,
exact McNemar p), as a table and as JSON (``<out>/suite.json``).

Suites:
    full   - what issue 10 asks for: 40 held-out episodes per arm on TextWorld Commonsense,
             ScienceWorld (ten tasks) and generated ALFWorld (six task types), 120 on Coin
             Collector (no memory wins most of its first 40), warm start, every arm; the
             DeltaMem ablations on Commonsense; an online run there over 120 episodes (the
             memory starts empty and learns on the evaluation stream; no memory, DeltaMem,
             Synapse, long context). Entries run in this order, each resumable on its own.
    heldout - the held-out protocol (docs/evaluation-protocol.md): warm and online on
             TextWorld Commonsense, Coin Collector, ScienceWorld and generated ALFWorld, every
             arm (DeltaMem with the trace and with the LLM extractor), 40 evaluation episodes
             each, one ScienceWorld focus rule for every arm. Played through a registration:
             ``benchmarks/register.py`` first, then ``--registration FILE``.
    smoke  - one Coin Collector game per arm, to check the whole path in seconds.
    quick  - the subset that fits about half an hour on a 2-core machine: TextWorld Commonsense
             (no memory, DeltaMem, Synapse, long context, and DeltaMem env-only, task-only and
             flat), Coin Collector and four ScienceWorld tasks (no memory, DeltaMem, Synapse,
             long context). AWM and ReasoningBank, which call the model to write, only in full.

``full`` and ``quick`` are the suites docs/results.md reports (their seed-0 test streams are in
the registry; ScienceWorld keeps the focus rule of those runs). They no longer replay those
numbers exactly: Synapse's key, the plan's reading of workflow variables and of the cut block
changed on 2026-12-04 (docs/evaluation-protocol.md). ``--seed`` draws other streams;
``--fresh`` only episodes no registered run has evaluated (``results/registry.jsonl``).

Usage:
    .venv/bin/python benchmarks/register.py --name heldout-1 --suite heldout --seed 1 --fresh
    .venv/bin/python benchmarks/agent_success.py --registration \
        results/heldout-1/registration.json --out runs/heldout-1
    .venv/bin/python benchmarks/rederive.py results/heldout-1
    .venv/bin/python benchmarks/agent_success.py --suite heldout --eval-split dev --out runs/dev
    .venv/bin/python benchmarks/agent_success.py --suite heldout --eval-split dev --seed 1 \
        --only alfworld-warm --arms none,deltamem --out runs/dev-alfworld
    .venv/bin/python benchmarks/agent_success.py --suite quick --out runs/suite-quick
    .venv/bin/python benchmarks/agent_success.py --suite full --out runs/suite
    .venv/bin/python benchmarks/agent_success.py --suite full --out runs/suite --only alfworld-warm
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from deltamem.errors import DeltaMemError
from deltamem_bench.artifacts import pack
from deltamem_bench.cli import run_bench_command
from deltamem_bench.registration import family_of, load_registration, primary_test_of
from deltamem_bench.report import endpoints

ARMS = "none,deltamem,synapse,awm,reasoningbank,long-context"
# The arms that do not call the model to write (AWM and ReasoningBank do, at training time).
CORE = "none,deltamem,synapse,long-context"
SW_TASKS = ("find-living-thing,find-plant,find-animal,find-non-living-thing,"
            "lifespan-longest-lived,lifespan-shortest-lived,identify-life-stages-1,"
            "power-component,test-conductivity,chemistry-mix")
TWC = "numLocations=1,numItemsToPutAway=2,includeDoors=0"
SW_QUICK = "find-living-thing,find-plant,lifespan-longest-lived,power-component"

SUITES: dict[str, list[dict[str, Any]]] = {
    "full": [
        {"name": "twx-twc-warm", "env": "twx-twc", "memory": ARMS, "ablations": True,
         "episodes": 40, "train_episodes": 40, "protocol": "warm", "max_steps": 10,
         "game_params": TWC},
        {"name": "twx-coin-warm", "env": "twx-coin", "memory": ARMS, "episodes": 120,
         "train_episodes": 10, "protocol": "warm", "max_steps": 12,
         "game_params": "numLocations=4,includeDoors=0,numDistractorItems=0"},
        # (v7 also ran `deltamem-successes` here; it did worse on test, docs/results.md.)
        {"name": "twx-twc-online", "env": "twx-twc", "memory": CORE, "episodes": 120,
         "protocol": "online", "max_steps": 10, "game_params": TWC},
        {"name": "scienceworld-warm", "env": "scienceworld", "families": SW_TASKS,
         "memory": ARMS, "episodes": 40, "train_episodes": 40,
         "protocol": "warm", "max_steps": 12, "focus_guard": "task-or-plan"},
        {"name": "alfworld-warm", "env": "alfworld-generated", "memory": ARMS, "episodes": 40,
         "train_episodes": 24, "protocol": "warm", "max_steps": 20},
    ],
    "quick": [
        {"name": "twx-twc-warm", "env": "twx-twc",
         "memory": "none,deltamem,synapse,long-context,deltamem-env,deltamem-task,deltamem-flat",
         "episodes": 16, "train_episodes": 10, "protocol": "warm", "max_steps": 10,
         "game_params": TWC},
        {"name": "twx-coin-warm", "env": "twx-coin", "memory": CORE,
         "episodes": 16, "train_episodes": 4, "protocol": "warm", "max_steps": 8,
         "game_params": "numLocations=2,includeDoors=0,numDistractorItems=0"},
        {"name": "scienceworld-warm", "env": "scienceworld", "families": SW_QUICK,
         "memory": CORE, "episodes": 12,
         "train_episodes": 16, "protocol": "warm", "max_steps": 12,
         "focus_guard": "task-or-plan"},
    ],
}

# The held-out protocol (issue 33, docs/evaluation-protocol.md): warm and online on every
# environment, every arm (DeltaMem with both write paths), 40 evaluation episodes each, one focus
# rule for every arm. Played only through a registration (benchmarks/register.py) on a fresh
# stream.
HELDOUT_ARMS = "none,deltamem,deltamem-llm,synapse,awm,reasoningbank,long-context"
COIN = "numLocations=4,includeDoors=0,numDistractorItems=0"
SUITES["heldout"] = [
    {"name": "twx-twc-warm", "env": "twx-twc", "memory": HELDOUT_ARMS, "episodes": 40,
     "train_episodes": 40, "protocol": "warm", "max_steps": 10, "game_params": TWC},
    {"name": "twx-twc-online", "env": "twx-twc", "memory": HELDOUT_ARMS, "episodes": 40,
     "protocol": "online", "max_steps": 10, "game_params": TWC},
    {"name": "twx-coin-warm", "env": "twx-coin", "memory": HELDOUT_ARMS, "episodes": 40,
     "train_episodes": 10, "protocol": "warm", "max_steps": 12, "game_params": COIN},
    {"name": "twx-coin-online", "env": "twx-coin", "memory": HELDOUT_ARMS, "episodes": 40,
     "protocol": "online", "max_steps": 12, "game_params": COIN},
    {"name": "scienceworld-warm", "env": "scienceworld", "families": SW_TASKS,
     "memory": HELDOUT_ARMS, "episodes": 40, "train_episodes": 40, "protocol": "warm",
     "max_steps": 12, "focus_guard": "open"},
    {"name": "scienceworld-online", "env": "scienceworld", "families": SW_TASKS,
     "memory": HELDOUT_ARMS, "episodes": 40, "protocol": "online", "max_steps": 12,
     "focus_guard": "open"},
    {"name": "alfworld-warm", "env": "alfworld-generated", "memory": HELDOUT_ARMS,
     "episodes": 40, "train_episodes": 24, "protocol": "warm", "max_steps": 20},
    {"name": "alfworld-online", "env": "alfworld-generated", "memory": HELDOUT_ARMS,
     "episodes": 40, "protocol": "online", "max_steps": 20},
]
# heldout-2 (issue 47; results/heldout-2/): the powered second held-out run. ALFWorld warm at
# 300 and ScienceWorld warm at 200 episodes with a placebo arm (another family's DeltaMem
# recall, same length and render), and replications of the two online "above zero" entries of
# heldout-1 at 150. Registered by benchmarks/register.py --suite heldout-2 --test sign-flip.
HELDOUT2_ARMS = "none,deltamem,synapse,long-context,placebo"
# Commonsense and Coin Collector have one task family: a placebo has no other family to show.
HELDOUT2_REPLICATION_ARMS = "none,deltamem,synapse,long-context"
# The agent rules per entry, frozen for every arm: for the warm entries, what
# benchmarks/select_agent_rules.py chose on dev by the no-memory arm alone
# (results/select-rules/selection.json); the replications keep heldout-1's agent as it was (no
# rule), since what they replicate is heldout-1's result and the selection did not play them.
HELDOUT2_AGENT_RULES = {"alfworld-warm": "examine_penalty,unvisited_bonus",
                        "scienceworld-warm": "unvisited_bonus,look_before_focus",
                        "twx-twc-online": "", "twx-coin-online": ""}
SUITES["heldout-2"] = [
    {"name": "alfworld-warm", "env": "alfworld-generated", "memory": HELDOUT2_ARMS,
     "episodes": 300, "train_episodes": 24, "protocol": "warm", "max_steps": 20,
     "agent_rules": HELDOUT2_AGENT_RULES["alfworld-warm"]},
    {"name": "scienceworld-warm", "env": "scienceworld", "families": SW_TASKS,
     "memory": HELDOUT2_ARMS, "episodes": 200, "train_episodes": 40, "protocol": "warm",
     "max_steps": 12, "focus_guard": "open",
     "agent_rules": HELDOUT2_AGENT_RULES["scienceworld-warm"]},
    {"name": "twx-twc-online", "env": "twx-twc", "memory": HELDOUT2_REPLICATION_ARMS,
     "episodes": 150, "protocol": "online", "max_steps": 10, "game_params": TWC,
     "agent_rules": HELDOUT2_AGENT_RULES["twx-twc-online"]},
    {"name": "twx-coin-online", "env": "twx-coin", "memory": HELDOUT2_REPLICATION_ARMS,
     "episodes": 150, "protocol": "online", "max_steps": 12, "game_params": COIN,
     "agent_rules": HELDOUT2_AGENT_RULES["twx-coin-online"]},
]
# A seconds-long suite on the smallest games, to check the whole path (registration, run,
# artifacts, re-derivation) with the real model: `--suite smoke`.
SUITES["smoke"] = [
    {"name": "twx-coin-online", "env": "twx-coin", "memory": "none,deltamem", "episodes": 1,
     "protocol": "online", "max_steps": 3,
     "game_params": "numLocations=1,includeDoors=0,numDistractorItems=0"},
]

# The suites whose seed-0 test streams docs/results.md reports (agents v1-v8): their streams are
# in the registry of evaluated episodes (benchmarks/backfill_registry.py), so a fresh stream
# never plays them again.
DOCUMENTED: dict[str, list[dict[str, Any]]] = {
    "full": [dict(e) for e in SUITES["full"]], "quick": [dict(e) for e in SUITES["quick"]]}


def run_suite(name: str, out: Path, console: Console, only: list[str] | None = None, *,
              seed: int = 0, fresh: bool = False, registry: Path | None = None,
              eval_split: str | None = None,
              arms: list[str] | None = None) -> list[dict[str, Any]]:
    """Run (or resume) every entry of suite ``name`` (or the ``only`` ones) on the episode
    stream of ``seed`` (``fresh``: only episodes ``registry`` does not hold); return one
    summary per entry. ``arms`` keeps only those of each entry's arms (a dev pass that looks
    at a few of them); an entry holding none of them is refused."""
    results = []
    for entry in SUITES[name]:
        if only and entry["name"] not in only:
            continue
        options = {"llm": "local", "extractor": "trace",
                   **{k: v for k, v in entry.items() if k != "name"}}
        if arms:
            kept = [a for a in str(options["memory"]).split(",") if a in arms]
            if not kept:
                raise DeltaMemError(f"entry {entry['name']!r} has none of the arms {arms}")
            options["memory"] = ",".join(kept)
        started = time.perf_counter()
        console.print(f"[bold]{entry['name']}[/bold] -> {out / entry['name']}")
        if eval_split:
            options["eval_split"] = eval_split
        summary = run_bench_command(out=out / entry["name"], console=console, seed=seed,
                                    fresh=fresh, registry=registry, **options)
        summary["name"] = entry["name"]
        summary["wall_s"] = round(time.perf_counter() - started, 1)
        results.append(summary)
    return results


def run_registered(path: Path, out: Path, console: Console,
                   only: list[str] | None = None) -> list[dict[str, Any]]:
    """Play the entries of the registration at ``path`` (or the ``only`` ones) into
    ``out/<entry>``, each refused unless the code and options are the registered ones, and
    store each finished entry's artifacts next to the registration (``<entry>.tar.gz``)."""
    registration = load_registration(path)
    results = []
    for entry in registration["entries"]:
        if only and entry["name"] not in only:
            continue
        started = time.perf_counter()
        console.print(f"[bold]{entry['name']}[/bold] ({registration['name']}) -> "
                      f"{out / entry['name']}")
        summary = run_bench_command(out=out / entry["name"], console=console,
                                    registration=path, entry=entry["name"], **entry["options"])
        summary["name"] = entry["name"]
        summary["wall_s"] = round(time.perf_counter() - started, 1)
        results.append(summary)
        pack(out / entry["name"], path.parent / f"{entry['name']}.tar.gz")
    return results


def table(results: list[dict[str, Any]]) -> Table:
    """One row per (entry, arm): progress, success, and the paired difference vs none."""
    t = Table(title="Paired comparison against no memory (95% bootstrap CI, exact McNemar)")
    for column in ("run", "memory", "episodes", "progress", "Δ progress vs none", "success",
                   "McNemar p"):
        t.add_column(column, justify="left" if column in ("run", "memory") else "right")
    for summary in results:
        vs_none = summary["paired"].get("vs_none", {})
        for row in summary["kinds"]:
            diff = vs_none.get(row["kind"])
            delta = (f"{diff['progress']['mean']:+.3f} [{diff['progress']['low']:+.3f}, "
                     f"{diff['progress']['high']:+.3f}]") if diff else "-"
            p_value = f"{diff['mcnemar']['p_value']:.3f}" if diff else "-"
            t.add_row(summary["name"], row["kind"], str(row["episodes"]),
                      f"{row['mean_score']:.3f}", delta,
                      f"{row['successes']}/{row['episodes']}", p_value)
    return t


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--suite", choices=sorted(SUITES), default="quick")
    parser.add_argument("--out", type=Path, default=Path("runs/suite"))
    parser.add_argument("--only", help="comma list of entry names to run (default: all)")
    parser.add_argument("--seed", type=int, default=0, help="fixes the episode streams")
    parser.add_argument("--fresh", action="store_true",
                        help="evaluate only episodes no registered run has evaluated")
    parser.add_argument("--registry", type=Path, default=Path("results/registry.jsonl"),
                        help="the registry of evaluated episodes (default: %(default)s)")
    parser.add_argument("--eval-split", choices=("dev",),
                        help="evaluate on the dev split (to tune and check rules; never test)")
    parser.add_argument("--arms", help="comma list: play only these of each entry's arms "
                        "(a dev pass; not with --registration)")
    parser.add_argument("--registration", type=Path,
                        help="play this registration's entries (benchmarks/register.py); "
                        "--suite, --seed and --fresh then come from it")
    args = parser.parse_args()
    only = args.only.split(",") if args.only else None
    arms = args.arms.split(",") if args.arms else None
    if arms and args.registration:
        parser.error("--arms cannot narrow a registration: a registered run plays every arm")
    console = Console(width=140)
    try:
        family: list[str] | None = None
        primary_test = "bootstrap"
        if args.registration:
            registered = load_registration(args.registration)
            primary_test = primary_test_of(registered)
            names = [e["name"] for e in registered["entries"]]
            family = family_of(registered)
            suite = f"registration {args.registration}"
        else:
            names = [e["name"] for e in SUITES[args.suite]]
            suite = args.suite
        unknown = sorted(set(only or ()) - set(names))
        if unknown:
            parser.error(f"no entry {unknown[0]!r} in {suite}")
        started = time.perf_counter()
        if args.registration:
            results = run_registered(args.registration, args.out, console, only)
        else:
            results = run_suite(args.suite, args.out, console, only, seed=args.seed,
                                fresh=args.fresh, registry=args.registry,
                                eval_split=args.eval_split, arms=arms)
    except DeltaMemError as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise SystemExit(2) from exc
    console.print(table(results))
    # A registered run is judged over its whole family, an entry not played here at p = 1;
    # benchmarks/rederive.py judges every committed entry together.
    judged = endpoints({r["name"]: r for r in results}, family=family,
                       primary_test=primary_test)
    report = {"suite": suite, "wall_s": round(time.perf_counter() - started, 1),
              "endpoints": judged,
              "runs": [{"name": r["name"], "config": r["config"], "kinds": r["kinds"],
                        "paired": r["paired"], "wall_s": r["wall_s"]} for r in results]}
    if not only:  # suite.json is the whole suite; a partial run only prints its part
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "suite.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    print(json.dumps({"suite": suite, "wall_s": report["wall_s"], "endpoints": judged},
                     indent=2))


if __name__ == "__main__":
    main()
