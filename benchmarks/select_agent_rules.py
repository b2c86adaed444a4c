"""Choose the memory-neutral agent rules (issue 47) on dev, by the no-memory arm's score alone.

The rules (:data:`deltamem_bench.choice.AGENT_RULES`: no put-back, examine penalty, unvisited
bonus, look before focus) change the agent, not the memory. So that none can be chosen because
it helps a memory, they are chosen with the ``none`` arm only, on dev episodes, and then frozen
for every arm of a registration. The protocol, fixed before any result:

1. For each entry of the suite (default: the draft ``heldout-2``'s ALFWorld and ScienceWorld
   warm entries), play the ``none`` arm on ``--episodes`` dev episodes (``--seed``; the dev
   split, never a test stream) with no rule: the baseline.
2. Play the same stream once per rule, that rule alone on.
3. Keep each rule whose mean progress beats the baseline by more than ``--min-gain``
   (default 0: any gain on the same paired episodes; a rule that never fires ties and is not
   kept). A rule that only leaves out or demotes an action after a kind of action was played
   (``no_put_back`` after a ``take X from Y``, ``examine_penalty`` after an ``examine``:
   ``deltamem_bench.choice.RULE_TRIGGERS``) is not played where no baseline episode played
   that kind of action: at every step of every episode it changes no candidate, so (the play
   being deterministic) its play would be the baseline's, step for step. It ties, is recorded
   as ``inert`` and is not kept. (Added after ScienceWorld's ``no_put_back`` play had
   reproduced the baseline's trajectories in 39 of 39 episodes, to save two 30-minute plays.)
4. With two or more kept, play them together once. The choice is the combination when its
   mean is at least the best single rule's, else the best single rule.
5. Write the choice per entry (``selection.json`` under ``--out``) and print the table and the
   JSON. The lead copies the choice into ``HELDOUT2_AGENT_RULES`` (or per entry) of
   benchmarks/agent_success.py before registering; nothing here writes to the suite.

This runs the local model (about 17 s an ALFWorld episode, 10 s a ScienceWorld one on the
2-core machine: 80 ALFWorld dev episodes x 6 plays ≈ 2.3 h, 80 ScienceWorld ≈ 1.3 h).

``--count ARCHIVE`` plays nothing: it counts, over the played actions of an archived run's arms,
how often each rule would have acted (a put-back left out, a repeated ``examine`` demoted, a
``go to`` an earlier step already took, a ``focus on`` before any look or move), to see on dev
logs that a rule has something to act on before spending model time on it.

Usage:
    .venv/bin/python benchmarks/select_agent_rules.py --count results/dev-2/alfworld-warm.tar.gz
    .venv/bin/python benchmarks/select_agent_rules.py --out runs/select-rules
    .venv/bin/python benchmarks/select_agent_rules.py --only alfworld-warm --episodes 40 \\
        --out runs/select-rules
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from statistics import mean
from typing import Any

from deltamem.errors import DeltaMemError
from deltamem_bench.choice import AGENT_RULES, RULE_TRIGGERS, has_looked_or_moved, puts_back

HERE = Path(__file__).resolve().parent
DEFAULT_ENTRIES = ("alfworld-warm", "scienceworld-warm")
# Plays one variant: (entry, rules) -> per-episode progress of the none arm, in stream order.
Play = Callable[[dict[str, Any], Sequence[str]], list[float]]
# The played actions of an entry's baseline (no-rule) play, one list per episode.
Actions = Callable[[dict[str, Any]], list[list[str]]]


def choose(baseline: Sequence[float], singles: dict[str, Sequence[float]],
           combine: Callable[[Sequence[str]], Sequence[float]],
           min_gain: float = 0.0) -> dict[str, Any]:
    """Steps 3-4 of the protocol on scores already played (``combine`` plays the combination
    of the kept rules only when two or more are kept)."""
    base = mean(baseline)
    gains = {rule: mean(scores) - base for rule, scores in singles.items()}
    kept = [rule for rule, gain in gains.items() if gain > min_gain]
    chosen: list[str] = []
    combined: float | None = None
    if len(kept) == 1:
        chosen = kept
    elif kept:
        best = max(kept, key=lambda r: (gains[r], -list(singles).index(r)))
        combined = mean(combine(kept)) - base
        chosen = kept if combined >= gains[best] else [best]
    return {"baseline": round(base, 4), "gains": {r: round(g, 4) for r, g in gains.items()},
            "kept": kept, "combined_gain": None if combined is None else round(combined, 4),
            "agent_rules": ",".join(chosen)}


def firings(episodes: Sequence[Sequence[str]]) -> dict[str, int]:
    """How often each rule would have acted on these played action sequences."""
    counts = {"episodes": len(episodes), "steps": 0, "no_put_back": 0, "examine_penalty": 0,
              "unvisited_bonus (revisits)": 0, "look_before_focus": 0}
    for actions in episodes:
        for i, action in enumerate(actions):
            before = actions[:i]
            counts["steps"] += 1
            counts["no_put_back"] += puts_back(action, before)
            counts["examine_penalty"] += action.startswith("examine ") and action in before
            counts["unvisited_bonus (revisits)"] += action.startswith("go to ") and \
                action in before
            counts["look_before_focus"] += action.startswith("focus on ") and \
                not has_looked_or_moved(before)
    return counts


def count_archive(archive: Path) -> dict[str, dict[str, int]]:
    """:func:`firings` per arm of an archived run (its evaluation episodes)."""
    import tarfile

    out = {}
    with tarfile.open(archive, "r:gz") as tar:
        for member in sorted(tar.getmembers(), key=lambda m: m.name):
            handle = tar.extractfile(member) if member.name.endswith("/episodes.jsonl") else None
            if handle is None:
                continue
            records = [json.loads(line) for line in handle.read().decode().splitlines()
                       if line.strip()]
            out[member.name.split("/")[0]] = firings(
                [[s["action"] for s in r["trajectory"]] for r in records
                 if r["phase"] == "eval"])
    return out


def suite_entries(suite: str) -> list[dict[str, Any]]:
    spec = importlib.util.spec_from_file_location("agent_success", HERE / "agent_success.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("agent_success", module)
    spec.loader.exec_module(module)
    entries: list[dict[str, Any]] = module.SUITES[suite]
    return entries


def inert(rule: str, baseline_actions: Sequence[Sequence[str]]) -> bool:
    """Whether ``rule`` cannot change the baseline's play: it is a demoting rule that waits for
    a kind of action (``RULE_TRIGGERS``) no baseline episode played (protocol, step 3)."""
    trigger = RULE_TRIGGERS.get(rule)
    return trigger is not None and not any(trigger(action) for actions in baseline_actions
                                           for action in actions)


def real_play(out: Path, episodes: int, seed: int) -> tuple[Play, Actions]:
    """Plays the none arm with the local model (``deltamem_bench.cli.run_bench_command``);
    and reads an entry's baseline play's actions back from its log."""
    from deltamem_bench.cli import run_bench_command
    from deltamem_bench.runner import GOLD_NAME, read_log

    def run_dir(entry: dict[str, Any], rules: Sequence[str]) -> Path:
        return out / str(entry["name"]) / ("+".join(rules) or "no-rule")

    def records(entry: dict[str, Any], rules: Sequence[str]) -> list[dict[str, Any]]:
        return sorted((r for r in read_log(run_dir(entry, rules) / "none" / "episodes.jsonl")
                       if r["phase"] == "eval"), key=lambda r: r["index"])

    def play(entry: dict[str, Any], rules: Sequence[str]) -> list[float]:
        options = {"llm": "local", "extractor": "trace",
                   **{k: v for k, v in entry.items() if k != "name"},
                   "memory": "none", "episodes": episodes, "eval_split": "dev", "seed": seed,
                   "fresh": False, "agent_rules": ",".join(rules)}
        folder, baseline_gold = run_dir(entry, rules), run_dir(entry, []) / GOLD_NAME
        if rules and baseline_gold.exists() and not (folder / GOLD_NAME).exists():
            # The warm start's gold paths are the baseline's: the none arm learns nothing from
            # them, and replaying them (a fresh ScienceWorld JVM each) took ~15 min a play.
            folder.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(baseline_gold, folder / GOLD_NAME)
        run_bench_command(out=folder, **options)
        return [float(r["score"] or 0.0) for r in records(entry, rules)]

    def actions(entry: dict[str, Any]) -> list[list[str]]:
        return [[step["action"] for step in r["trajectory"]] for r in records(entry, [])]

    return play, actions


def select(entries: Sequence[dict[str, Any]], play: Play, *, actions: Actions | None = None,
           min_gain: float = 0.0) -> dict[str, dict[str, Any]]:
    """The whole protocol over ``entries`` with ``play``; with ``actions`` (the baseline play's
    actions), a rule :func:`inert` on them takes the baseline's scores without being played."""
    chosen: dict[str, dict[str, Any]] = {}
    for entry in entries:
        baseline = play(entry, [])
        played = actions(entry) if actions is not None else None
        skipped = [rule for rule in AGENT_RULES if played is not None and inert(rule, played)]
        singles: dict[str, Sequence[float]] = {
            rule: list(baseline) if rule in skipped else play(entry, [rule])
            for rule in AGENT_RULES}

        def combine(kept: Sequence[str], entry: dict[str, Any] = entry) -> list[float]:
            return play(entry, kept)

        chosen[entry["name"]] = choose(baseline, singles, combine, min_gain) | {"inert": skipped}
    return chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--suite", default="heldout-2")
    parser.add_argument("--only", help="comma list of entries (default: "
                        f"{','.join(DEFAULT_ENTRIES)})")
    parser.add_argument("--episodes", type=int, default=80)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--min-gain", type=float, default=0.0)
    parser.add_argument("--out", type=Path, default=Path("runs/select-rules"))
    parser.add_argument("--count", type=Path, metavar="ARCHIVE",
                        help="play nothing: count the rules' firings on an archived run")
    args = parser.parse_args(argv)
    if args.count is not None:
        counted = count_archive(args.count)
        heads = list(next(iter(counted.values()), {}))
        print("| arm | " + " | ".join(heads) + " |")
        print("|---|" + "---|" * len(heads))
        for arm, row in counted.items():
            print(f"| {arm} | " + " | ".join(str(row[h]) for h in heads) + " |")
        print(json.dumps({"archive": str(args.count), "arms": counted}, indent=2))
        return 0
    names = args.only.split(",") if args.only else list(DEFAULT_ENTRIES)
    entries = [e for e in suite_entries(args.suite) if e["name"] in names]
    if not entries:
        parser.error(f"no entry {names} in suite {args.suite}")
    try:
        play, actions = real_play(args.out, args.episodes, args.seed)
        chosen = select(entries, play, actions=actions, min_gain=args.min_gain)
    except DeltaMemError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print("| entry | none, no rule | " + " | ".join(AGENT_RULES) + " | combined | chosen |")
    print("|---|---|" + "---|" * len(AGENT_RULES) + "---|---|")
    for name, result in chosen.items():
        gains = " | ".join(f"{result['gains'][r]:+.3f}" for r in AGENT_RULES)
        combined = ("-" if result["combined_gain"] is None
                    else f"{result['combined_gain']:+.3f}")
        print(f"| {name} | {result['baseline']:.3f} | {gains} | {combined} | "
              f"{result['agent_rules'] or '(none)'} |")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "selection.json").write_text(json.dumps(chosen, indent=2), encoding="utf-8")
    print(json.dumps(chosen, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
