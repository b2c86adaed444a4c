"""Recall quality on recorded episodes: DeltaMem against a flat top-1 trajectory memory and an
AWM-style workflow memory, measured in the same run.

Fixtures (real gold-path episodes, recorded with the real engines):

* ScienceWorld: ``tests/fixtures/scienceworld_gold_12x10.jsonl.gz`` (12 tasks x 8 train + 2
  held-out variations; ``scripts/record_scienceworld.py``);
* TextWorldExpress coin: ``tests/fixtures/twx_coin_gold.jsonl.gz`` (30 train + 10 held-out map
  seeds, every seed another layout; ``scripts/record_textworld_express.py``).

Each memory learns the train episodes, then is queried with every held-out episode's task and
first observation (and, for TextWorldExpress, with every train map again: a revisit). Per query:

* **plan fidelity** -- normalised longest common subsequence between the recalled procedure's
  steps and the held-out gold actions: ``LCS / max(len(recalled), len(gold))`` (0 when nothing
  is recalled);
* **recall precision** -- the recalled procedure comes from an episode of the query's own task;
* **contradictions** -- pairs of different facts about one subject in the recalled block
  (``core.knowledge.contradictions``);
* **false facts** -- recalled facts whose subject the held-out episode itself observed with
  another statement (its own facts, by the trace extractor's rules, are the ground truth;
  wording inside parentheses, articles and door states are ignored);
* **tokens** -- the recalled block, counted with ``core.render.estimate_tokens``;
* **stored / flat** -- characters the memory stores over what a one-record-per-episode memory of
  the extracted experiences stores (DeltaMem's ``stats()["flat_chars"]``, the same denominator
  for all three).

The baselines, deterministic so that the run needs no model:

* **flat top-1** -- every train episode kept whole; the query's nearest episode by task
  embedding (scene embedding for facts) is recalled; its steps are its actions verbatim, its
  facts every statement its observations make (the same rules, without supersession), its text
  the harness's flattened trajectory (Synapse-style).
* **AWM-style** -- one workflow per task family (the recorded task name), the longest common
  subsequence of the family's train action sequences; the family of the nearest train episode
  is recalled. No scene facts.

    python benchmarks/recall_quality.py [--embedder minilm] [--budget 400] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from deltamem.config import Settings
from deltamem.core.knowledge import contradictions, fact_subject
from deltamem.core.model import Episode, Knowledge
from deltamem.core.render import estimate_tokens
from deltamem.embed import make_embedder
from deltamem.embed.base import Embedder
from deltamem.engine.memory import DeltaMem
from deltamem.extract.trace import TraceExtractor
from deltamem.formats.episodes import read_episodes
from deltamem_bench.baselines import AWM_HEADER, SYNAPSE_HEADER, flatten_trajectory

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"
SCIENCEWORLD = FIXTURES / "scienceworld_gold_12x10.jsonl.gz"
TEXTWORLD = FIXTURES / "twx_coin_gold.jsonl.gz"
TRACE = TraceExtractor()


def load(path: Path) -> tuple[list[Episode], list[Episode]]:
    episodes = []
    for _, episode in read_episodes(path):
        if isinstance(episode, Exception):
            raise SystemExit(f"error: {episode}")
        episodes.append(episode)
    return ([e for e in episodes if e.meta["split"] == "train"],
            [e for e in episodes if e.meta["split"] != "train"])


def lcs(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence (dynamic programming, O(len(a) * len(b)))."""
    row = [0] * (len(b) + 1)
    for x in a:
        prev = 0
        for j, y in enumerate(b, 1):
            prev, row[j] = row[j], prev + 1 if x == y else max(row[j], row[j - 1])
    return row[-1]


def fidelity(steps: Sequence[str], gold: Sequence[str]) -> float:
    return lcs(steps, gold) / max(len(steps), len(gold)) if steps and gold else 0.0


_PAREN = re.compile(r"\([^)]*\)|\b(?:an?|the|open|opened|closed)\b")


def _norm(statement: str) -> str:
    return " ".join(_PAREN.sub(" ", statement.lower()).split())


def fact_check(facts: Sequence[str], truth_episode: Episode) -> tuple[int, int]:
    """(true, false) among ``facts`` against what ``truth_episode`` itself observed."""
    truth = {fact_subject(f): _norm(f.partition(": ")[2])
             for f in TRACE.knowledge(truth_episode).facts}
    true = false = 0
    for fact in facts:
        subject = fact_subject(fact)
        if subject in truth:
            if truth[subject] == _norm(fact.partition(": ")[2]):
                true += 1
            else:
                false += 1
    return true, false


def raw_facts(episode: Episode) -> list[str]:
    """Every statement an episode's observations make, stale ones included (a transcript)."""
    out: list[str] = []
    for i in range(1, len(episode.steps) + 1):
        prefix = Episode(episode.task, episode.env, episode.steps[:i])
        out += [f for f in TRACE.knowledge(prefix).facts if f not in out]
    return out


class Query:
    """What one memory recalled for one query."""

    def __init__(self, steps: Sequence[str], source_task: str | None, facts: Sequence[str],
                 text: str):
        self.steps, self.source_task, self.facts, self.text = steps, source_task, facts, text


class Flat:
    """Flat top-1 trajectory memory (every episode whole; nearest by embedding)."""

    name = "flat top-1"

    def __init__(self, train: list[Episode], embedder: Embedder):
        self.train, self.embedder = train, embedder
        self.tasks = embedder.embed([e.task for e in train])
        self.scenes = embedder.embed([e.env for e in train])

    def stored(self) -> int:
        return sum(len(flatten_trajectory(e, 10**9)) for e in self.train)

    def nearest(self, matrix: Any, text: str) -> Episode:
        return self.train[int(np.argmax(matrix @ self.embedder.embed([text])[0]))]

    def recall(self, episode: Episode, budget: int | None) -> Query:
        by_task = self.nearest(self.tasks, episode.task)
        by_scene = self.nearest(self.scenes, episode.env)
        text = f"{SYNAPSE_HEADER}\n{flatten_trajectory(by_task)}"
        return Query([s.action for s in by_task.steps], by_task.meta["task_name"],
                     raw_facts(by_scene), _cut(text, budget))


class Workflows:
    """AWM-style: one workflow per task family, the LCS of the family's train actions."""

    name = "AWM-style"

    def __init__(self, train: list[Episode], embedder: Embedder):
        self.train, self.embedder = train, embedder
        self.tasks = embedder.embed([e.task for e in train])
        self.workflows: dict[str, list[str]] = {}
        for episode in train:
            actions = [s.action for s in episode.steps]
            known = self.workflows.get(episode.meta["task_name"])
            self.workflows[episode.meta["task_name"]] = actions if known is None else \
                _common(known, actions)

    def stored(self) -> int:
        return sum(len(json.dumps(w)) for w in self.workflows.values())

    def recall(self, episode: Episode, budget: int | None) -> Query:
        sims = self.tasks @ self.embedder.embed([episode.task])[0]
        family = self.train[int(np.argmax(sims))].meta["task_name"]
        steps = self.workflows[family]
        text = AWM_HEADER + "\n" + "\n".join(f"{i}. {s}" for i, s in enumerate(steps, 1))
        return Query(steps, family, [], _cut(text, budget))


def _common(a: list[str], b: list[str]) -> list[str]:
    """One longest common subsequence of two action lists."""
    table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(len(a) - 1, -1, -1):
        for j in range(len(b) - 1, -1, -1):
            table[i][j] = table[i + 1][j + 1] + 1 if a[i] == b[j] else \
                max(table[i + 1][j], table[i][j + 1])
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        if a[i] == b[j]:
            out.append(a[i])
            i, j = i + 1, j + 1
        elif table[i + 1][j] >= table[i][j + 1]:
            i += 1
        else:
            j += 1
    return out


def _cut(text: str, budget: int | None) -> str:
    """A baseline's text cut to the budget, whole lines first (they have no priorities)."""
    if budget is None:
        return text
    lines, out = text.split("\n"), []
    for line in lines:
        if estimate_tokens("\n".join([*out, line])) > budget:
            break
        out.append(line)
    return "\n".join(out)


class Deltas:
    """DeltaMem with the trace extractor and default settings."""

    name = "deltamem"

    def __init__(self, train: list[Episode], embedder: Embedder, db: Path):
        self.mem = DeltaMem.open(db, embedder=embedder, settings=Settings())
        self.task_of: dict[str, str] = {}
        started = time.perf_counter()
        for episode in train:
            result = self.mem.learn(episode)
            for write in (result.task, result.env):
                if write.node is not None and write.action != "dedup":
                    self.task_of[write.node] = episode.meta["task_name"]
            for done in result.consolidated:
                self.task_of[done.root] = self.task_of.get(done.source, "?")
        self.learn_s = time.perf_counter() - started

    def stats(self) -> dict[str, Any]:
        return self.mem.stats().wire()

    def recall(self, episode: Episode, budget: int | None) -> Query:
        recall = self.mem.recall(episode.task, episode.env, budget_tokens=budget)
        skill = recall.task.to_dict()["skill"]
        knowledge = recall.env.experience
        return Query(skill["steps"] if skill else [],
                     self.task_of.get(recall.task.node) if recall.task.node else None,
                     knowledge.facts if isinstance(knowledge, Knowledge) else [], recall.context)


def evaluate(memory: Any, queries: list[Episode], budget: int | None) -> dict[str, Any]:
    rows = []
    for episode in queries:
        got = memory.recall(episode, budget)
        true, false = fact_check(got.facts, episode)
        rows.append({
            "fidelity": fidelity(got.steps, [s.action for s in episode.steps]),
            "own_task": got.source_task == episode.meta["task_name"],
            "contradictions": len(contradictions(got.facts)),
            "facts": len(got.facts), "true_facts": true, "false_facts": false,
            "tokens": estimate_tokens(got.text),
        })
    n = len(rows)
    return {
        "queries": n,
        "plan_fidelity": round(sum(r["fidelity"] for r in rows) / n, 3),
        "recall_precision": round(sum(r["own_task"] for r in rows) / n, 3),
        "contradictions_per_block": round(sum(r["contradictions"] for r in rows) / n, 3),
        "facts_per_block": round(sum(r["facts"] for r in rows) / n, 2),
        "true_facts_per_block": round(sum(r["true_facts"] for r in rows) / n, 2),
        "false_facts_per_block": round(sum(r["false_facts"] for r in rows) / n, 2),
        "tokens_per_recall": round(sum(r["tokens"] for r in rows) / n, 1),
        "max_tokens": max(r["tokens"] for r in rows),
    }


def run_fixture(name: str, path: Path, embedder: Embedder, budget: int, tmp: Path,
                revisit: bool) -> list[dict[str, Any]]:
    train, held = load(path)
    deltas = Deltas(train, embedder, tmp / f"{name}.db")
    flat, awm = Flat(train, embedder), Workflows(train, embedder)
    stats = deltas.stats()
    flat_chars = stats["flat_chars"]
    stored = {deltas.name: stats["stored_chars"], flat.name: flat.stored(),
              awm.name: awm.stored()}
    out = []
    sets = [("held-out", held)] + ([("revisit", train)] if revisit else [])
    for label, queries in sets:
        for memory, cap in ((deltas, None), (deltas, budget), (flat, None), (awm, None)):
            row = {"fixture": name, "queries_from": label,
                   "memory": memory.name + (f" @{cap} tokens" if cap else ""),
                   **evaluate(memory, queries, cap),
                   "stored_chars": stored[memory.name],
                   "stored_over_flat": round(stored[memory.name] / flat_chars, 3)}
            out.append(row)
    out[0]["tree_stats"] = {"task": stats["task"], "env": stats["env"],
                            "episodes": stats["episodes"], "flat_chars": flat_chars,
                            "learn_s": round(deltas.learn_s, 1)}
    deltas.mem.close()
    return out


COLUMNS = (("memory", 22), ("queries_from", 9), ("plan_fidelity", 8), ("recall_precision", 8),
           ("contradictions_per_block", 8), ("false_facts_per_block", 8),
           ("true_facts_per_block", 8), ("tokens_per_recall", 8), ("stored_over_flat", 8))
HEADS = ("memory", "queries", "fidelity", "precision", "contra.", "false", "true", "tokens",
         "stored/flat")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedder", default="minilm")
    parser.add_argument("--budget", type=int, default=400, help="token budget of one row")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    embedder = make_embedder(args.embedder)
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        rows += run_fixture("scienceworld", SCIENCEWORLD, embedder, args.budget, Path(tmp),
                            revisit=False)
        rows += run_fixture("twx-coin", TEXTWORLD, embedder, args.budget, Path(tmp),
                            revisit=True)
    for fixture in ("scienceworld", "twx-coin"):
        print(f"\n{fixture} ({args.embedder})")
        print("  ".join(h.rjust(w) if i else h.ljust(w)
                        for i, (h, (_, w)) in enumerate(zip(HEADS, COLUMNS, strict=True))))
        for row in (r for r in rows if r["fixture"] == fixture):
            print("  ".join(str(row[k]).rjust(w) if i else str(row[k]).ljust(w)
                            for i, (k, w) in enumerate(COLUMNS)))
    result = {"benchmark": "recall_quality", "embedder": args.embedder, "budget": args.budget,
              "wall_s": round(time.perf_counter() - started, 1), "rows": rows}
    text = json.dumps(result, indent=1)
    print("\n" + text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
