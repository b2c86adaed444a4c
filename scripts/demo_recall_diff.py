#!/usr/bin/env python
"""Would other thresholds change what `make demo`'s memories hand the agent? (no model needed)

Rebuilds each memory arm of ``scripts/demo.py`` from a demo run's own files -- ``gold.jsonl``
(its warm-start gold episodes) and ``stream.json`` (its evaluation games), both written before
the first evaluation episode -- under two pairs of thresholds, with the harness's own factory
(trace extractor, MiniLM, the 2,400-character budget). Then it recalls for every evaluation game
as the runner does (the task and scene of the reset game) and compares the memory texts. Recall
happens once per episode and the warm memory is frozen while the agent plays at temperature 0,
so identical texts for every game mean identical plays: the demo's figures do not move.

Usage::

    .venv/bin/python scripts/demo_recall_diff.py runs/demo --old 0.52,0.86 --new 0.95,0.88
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from deltamem.config import Settings
from deltamem.embed import make_embedder
from deltamem.formats.episodes import episode_from_dict
from deltamem_bench.envs import make_env
from deltamem_bench.envs.base import EpisodeSpec
from deltamem_bench.factory import make_memory

ENV = "twx-twc"
GAME_PARAMS = "numLocations=1,numItemsToPutAway=2,includeDoors=0"


def pair(text: str) -> tuple[float, float]:
    task, env = (float(x) for x in text.split(","))
    return task, env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("run", type=Path, help="a demo --out folder (gold.jsonl, stream.json)")
    parser.add_argument("--old", type=pair, required=True, help="tau_task,tau_env")
    parser.add_argument("--new", type=pair, required=True, help="tau_task,tau_env")
    parser.add_argument("--memory", default="deltamem,deltamem-env")
    parser.add_argument("--max-steps", type=int, default=10)
    args = parser.parse_args(argv)

    gold = [episode_from_dict(json.loads(line)["episode"])
            for line in (args.run / "gold.jsonl").open(encoding="utf-8") if line.strip()]
    stream = json.loads((args.run / "stream.json").read_text(encoding="utf-8"))
    specs = [EpisodeSpec(s["task_name"], s["variation"], s["split"]) for s in stream["eval"]]
    env = make_env(ENV, max_steps=args.max_steps, game_params=GAME_PARAMS)
    resets = []
    for spec in specs:
        env.load(spec)
        reset = env.reset()
        resets.append((spec, reset.task, reset.scene))
    embedder = make_embedder("minilm")
    changed = 0
    for kind in args.memory.split(","):
        texts: dict[str, list[str]] = {}
        for label, (tau_task, tau_env) in (("old", args.old), ("new", args.new)):
            with tempfile.TemporaryDirectory() as folder:
                memory = make_memory(kind, Path(folder), embedder=embedder, llm=None,
                                     extractor="trace", budget_chars=2400,
                                     settings=Settings(tau_task=tau_task, tau_env=tau_env))
                for episode in gold:
                    memory.update(episode, {})
                texts[label] = [memory.context(task, scene, family=spec.task_name)[0]
                                for spec, task, scene in resets]
                memory.close()
        differ = [spec.variation for spec, a, b in zip(specs, texts["old"], texts["new"],
                                                       strict=True) if a != b]
        changed += len(differ)
        print(f"{kind}: {len(gold)} gold episodes learned; the memory text differs in "
              f"{len(differ)} of {len(specs)} games{': ' + str(differ) if differ else ''}")
    print("same plays: the figures stand" if not changed else "the plays may differ: rerun")
    return 0 if not changed else 1


if __name__ == "__main__":
    sys.exit(main())
