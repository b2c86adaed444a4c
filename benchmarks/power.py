"""Sample sizes for the next registration, from the paired differences of the committed logs,
and the wall time of the draft plan on this machine, from the same logs' timings.

For every archived entry (``results/heldout-1``, ``results/dev-2``; no episode is played) it
takes DeltaMem − none per episode and prints

* the observed mean and SD of the paired progress differences, and the share of discordant
  pairs on success;
* the pairs needed for 80% power of a two-sided test at α = 0.05 and at α = 0.05/m (Holm's
  first step over the draft's family of m entries) for the registered effect sizes: progress
  +0.05 (issue 47) and the entry's own observed mean (``n_for_paired_mean``: the paired
  t-test's exact power, which the exact sign-flip test matches asymptotically), and success
  +0.044 by McNemar (the paper's ALFWorld gap, 84.3% against 79.9%; ``n_for_mcnemar`` at the
  observed discordance, or at 2 × 0.044 where fewer pairs were discordant);
* the power of the draft's own sample size for +0.05 at α = 0.05/m.

Then the wall time of the draft suite ``heldout-2`` (benchmarks/agent_success.py): for each
entry and arm, the mean logged seconds of an evaluation episode (and of a training episode, warm)
of the same environment and protocol in heldout-1 times the draft's counts. The placebo arm is
timed as DeltaMem (it recalls twice and learns the same); heldout-1 ran on this 2-core machine,
one process, the model taking about 95% of the time.

Usage:
    .venv/bin/python benchmarks/power.py [--json]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
import tarfile
from pathlib import Path
from statistics import mean, stdev
from typing import Any

from deltamem_bench.stats import n_for_mcnemar, n_for_paired_mean, paired_t_power

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("results/heldout-1", "results/dev-2")
EFFECT = 0.05  # progress, DeltaMem − none (issue 47)
PAPER_SUCCESS = 0.044  # the paper's ALFWorld unseen gap, 84.3% against 79.9% (spec §7.2)
POWER = 0.8
ALPHA = 0.05
SIMILAR = {"placebo": "deltamem"}  # an arm not in the timing logs is timed as this arm


def _records(archive: Path) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar.getmembers():
            if member.name.endswith("/episodes.jsonl"):
                handle = tar.extractfile(member)
                if handle is not None:
                    out[member.name.split("/")[0]] = [
                        json.loads(line) for line in handle.read().decode().splitlines()
                        if line.strip()]
    return out


def observed(archive: Path) -> dict[str, Any] | None:
    """DeltaMem − none on one archived entry: n, mean, SD, discordant share."""
    logs = _records(archive)
    if "none" not in logs or "deltamem" not in logs:
        return None
    a = {r["index"]: r for r in logs["deltamem"] if r["phase"] == "eval"}
    b = {r["index"]: r for r in logs["none"] if r["phase"] == "eval"}
    shared = sorted(set(a) & set(b))
    diffs = [float(a[i]["score"] or 0) - float(b[i]["score"] or 0) for i in shared]
    discordant = sum(bool(a[i]["success"]) != bool(b[i]["success"]) for i in shared)
    return {"n": len(shared), "mean": mean(diffs), "sd": stdev(diffs),
            "discordant": discordant / len(shared)}


def needed(sd: float, effect: float, alpha: float) -> int | None:
    try:
        return n_for_paired_mean(sd, effect, alpha=alpha, power=POWER)
    except ValueError:
        return None


def timings(archive: Path) -> dict[str, dict[str, float]]:
    """Mean logged seconds per evaluation and per training episode, per arm."""
    out: dict[str, dict[str, float]] = {}
    for arm, records in _records(archive).items():
        row = {}
        for phase in ("eval", "train"):
            times = [float(r["wall_s"]) for r in records if r["phase"] == phase]
            if times:
                row[phase] = mean(times)
        out[arm] = row
    return out


def draft_suite() -> list[dict[str, Any]]:
    spec = importlib.util.spec_from_file_location("agent_success", ROOT / "benchmarks" /
                                                  "agent_success.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("agent_success", module)
    spec.loader.exec_module(module)
    suite: list[dict[str, Any]] = module.SUITES["heldout-2"]
    return suite


def plan_time(suite: list[dict[str, Any]], source: Path) -> list[dict[str, Any]]:
    """Estimated hours of each draft entry from the timings of ``source``'s same entry."""
    rows = []
    for entry in suite:
        archive = source / f"{entry['name']}.tar.gz"
        timed = timings(archive)
        seconds = 0.0
        for arm in entry["memory"].split(","):
            t = timed.get(arm) or timed[SIMILAR[arm]]
            seconds += entry["episodes"] * t["eval"]
            seconds += entry.get("train_episodes", 0) * t.get("train", 0.0) \
                if entry["protocol"] == "warm" else 0.0
        rows.append({"entry": entry["name"], "episodes": entry["episodes"],
                     "arms": entry["memory"], "hours": round(seconds / 3600, 2)})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    suite = draft_suite()
    m = len(suite)
    planned = {e["name"]: e["episodes"] for e in suite}
    rows = []
    for folder in SOURCES:
        for archive in sorted((ROOT / folder).glob("*.tar.gz")):
            seen = observed(archive)
            if seen is None:
                continue
            name = archive.name.removesuffix(".tar.gz")
            success_effect_ok = seen["discordant"] >= PAPER_SUCCESS
            discordance = seen["discordant"] if success_effect_ok else 2 * PAPER_SUCCESS
            row = {"source": f"{Path(folder).name}/{name}", **{k: round(v, 4) if
                   isinstance(v, float) else v for k, v in seen.items()},
                   "n_progress_0.05": needed(seen["sd"], EFFECT, ALPHA),
                   f"n_progress_0.05_alpha/{m}": needed(seen["sd"], EFFECT, ALPHA / m),
                   "n_progress_observed": needed(seen["sd"], seen["mean"], ALPHA)
                   if seen["mean"] > 0 else None,
                   f"n_progress_observed_alpha/{m}": needed(seen["sd"], seen["mean"], ALPHA / m)
                   if seen["mean"] > 0 else None,
                   "n_success_paper": n_for_mcnemar(discordance, PAPER_SUCCESS),
                   f"n_success_paper_alpha/{m}": n_for_mcnemar(discordance, PAPER_SUCCESS,
                                                               alpha=ALPHA / m),
                   "success_discordance_used": round(discordance, 4)}
            if name in planned:
                row["draft_n"] = planned[name]
                row[f"draft_power_0.05_alpha/{m}"] = round(paired_t_power(
                    planned[name], seen["sd"], EFFECT, ALPHA / m), 3)
            rows.append(row)
    hours = plan_time(suite, ROOT / "results" / "heldout-1")
    total = round(sum(r["hours"] for r in hours), 1)
    print(f"Paired DeltaMem − none per archived entry; n for {POWER:.0%} power, two-sided; "
          f"α/{m}: Holm's first step over the draft's {m} entries.\n")
    print(f"| source | n | mean | SD | discordant | n (+0.05) | n (+0.05, α/{m}) | n (observed) "
          f"| n (observed, α/{m}) | n success +0.044 (α, α/{m}) | draft n: power (+0.05, "
          f"α/{m}) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        draft = (f"{r['draft_n']}: {r[f'draft_power_0.05_alpha/{m}']:.2f}"
                 if "draft_n" in r else "-")
        print(f"| {r['source']} | {r['n']} | {r['mean']:+.3f} | {r['sd']:.3f} | "
              f"{r['discordant']:.3f} | {r['n_progress_0.05']} | "
              f"{r[f'n_progress_0.05_alpha/{m}']} | {r['n_progress_observed'] or '-'} | "
              f"{r[f'n_progress_observed_alpha/{m}'] or '-'} | {r['n_success_paper']}, "
              f"{r[f'n_success_paper_alpha/{m}']} | {draft} |")
    print("\nWall time of the draft heldout-2 on this machine (heldout-1's logged seconds per "
          "episode, same environment and protocol; placebo timed as DeltaMem):\n")
    print("| entry | episodes | arms | hours |")
    print("|---|---|---|---|")
    for r in hours:
        print(f"| {r['entry']} | {r['episodes']} | {r['arms']} | {r['hours']:.1f} |")
    print(f"| total | | | {total:.1f} |")
    if args.json:
        print(json.dumps({"power": rows, "wall_time_hours": hours, "total_hours": total,
                          "family_size": m, "sessions_of_10_h": math.ceil(total / 10)},
                         indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
