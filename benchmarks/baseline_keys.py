"""Leave-one-out retrieval of the baselines' keys on warm training streams (no model, no agent).

Synapse and ReasoningBank retrieve one entry by a key. heldout-1 showed the key collapsing:
ReasoningBank (task text only) returned one entry for all 40 Commonsense warm episodes, Synapse
(the task and the first 200 characters of the first observation) one exemplar for all of Coin
Collector. This script measures, on the gold training episodes archived with each warm entry
(``gold.jsonl``: the training stream, never an evaluation episode), for every episode the
nearest *other* episode under each key, and prints

* same family: the share whose nearest episode is of the same task family (ALFWorld task type,
  ScienceWorld task), what a retrieval key should keep high;
* distinct: how many different episodes are ever the nearest, what a constant task text
  collapses to 1-2.

Keys: ``task`` (ReasoningBank before 2026-12-06, the baseline), ``specifier-200`` (Synapse in
heldout-1), and ``task + w * scene`` (:func:`deltamem_bench.baselines.key_score`) for a few
weights, the chosen :data:`~deltamem_bench.baselines.SCENE_WEIGHT` marked.

Usage:
    .venv/bin/python benchmarks/baseline_keys.py [--json] [ARCHIVE ...]
"""

from __future__ import annotations

import argparse
import json
import tarfile
from pathlib import Path
from typing import Any

import numpy as np

from deltamem.embed import make_embedder
from deltamem_bench.baselines import SCENE_WEIGHT, scene_key

ROOT = Path(__file__).resolve().parents[1]
WEIGHTS = (0.05, SCENE_WEIGHT, 0.25, 1.0)


def gold_episodes(archive: Path) -> list[dict[str, Any]]:
    """The gold training records of a run archive (empty for an online entry)."""
    with tarfile.open(archive, "r:gz") as tar:
        try:
            member = tar.extractfile("gold.jsonl")
        except KeyError:
            return []
        if member is None:
            return []
        return [json.loads(line) for line in member.read().decode().splitlines() if line]


def nearest(scores: np.ndarray, families: list[str]) -> dict[str, float | int]:
    """Same-family share and distinct count of each row's nearest other row."""
    scores = scores.copy()
    np.fill_diagonal(scores, -np.inf)
    best = scores.argmax(axis=1)
    same = float(np.mean([families[i] == families[b] for i, b in enumerate(best)]))
    return {"same_family": round(same, 3), "distinct": len(set(best.tolist()))}


def measure(records: list[dict[str, Any]], embed: Any) -> dict[str, dict[str, float | int]]:
    tasks = [r["episode"]["task"].strip() for r in records]
    scenes = [scene_key(r["episode"]["env"]) for r in records]
    families = [r["spec"]["task_name"] for r in records]
    vec = lambda texts: np.asarray(embed(texts), dtype=np.float32)  # noqa: E731
    task, scene = vec(tasks), vec(scenes)
    spec = vec([f"{t}\n{s[:200]}" for t, s in zip(tasks, scenes, strict=True)])
    out = {"task": nearest(task @ task.T, families),
           "specifier-200": nearest(spec @ spec.T, families)}
    for w in WEIGHTS:
        out[f"task + {w} scene"] = nearest(task @ task.T + w * (scene @ scene.T), families)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("archives", nargs="*", type=Path)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    archives = args.archives or sorted((ROOT / "results").glob("*/*-warm.tar.gz"))
    embedder = make_embedder("minilm")
    report: dict[str, Any] = {}
    for archive in archives:
        records = gold_episodes(archive)
        if len(records) > 2:
            report[f"{archive.parent.name}/{archive.name}"] = {
                "episodes": len(records), "families": len({r["spec"]["task_name"]
                                                           for r in records}),
                "keys": measure(records, embedder.embed)}
    print("| training stream | n | families | key | same family | distinct nearest |")
    print("|---|---|---|---|---|---|")
    for name, row in report.items():
        for key, value in row["keys"].items():
            mark = " (chosen)" if key == f"task + {SCENE_WEIGHT} scene" else ""
            print(f"| {name} | {row['episodes']} | {row['families']} | {key}{mark} | "
                  f"{value['same_family']:.3f} | {value['distinct']} |")
    if args.json:
        print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
