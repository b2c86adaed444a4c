"""Store round trips per recall on PostgreSQL: the old per-candidate read path vs today's.

A memory where many episodes share one task and one scene (so their nodes tie exactly, the case
where the ranking rules look at the most candidates): ``--episodes`` episodes of one task in one
scene, each with other actions. Every SQL statement the store sends is counted (one
``execute`` on a connection is one round trip to the server).

* ``old``  -- the read path before the batch fetch, replayed here on the same store: the
  discredited re-scoring, the same-layout ties and the same-scene filter each called
  ``get_node`` once per candidate they looked at;
* ``new``  -- ``DeltaMem.recall`` today (one ``get_nodes`` per ranking round).

Both answer the same nodes (checked). Prints a table and one JSON object.

    python benchmarks/recall_roundtrips.py [--episodes 40] [--url URL]

Without --url (or $DELTAMEM_BENCH_PG_URL) a server is started with scripts/pg.sh and stopped.
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from deltamem._util.usage import Usage
from deltamem.config import Settings
from deltamem.core.knowledge import latest_first, same_layout_first
from deltamem.core.model import Episode, Step, Tree
from deltamem.core.ranking import POOL, Candidate
from deltamem.core.scoring import penalised
from deltamem.core.tree import discredited
from deltamem.embed.hashing import HashingEmbedder
from deltamem.engine.memory import DeltaMem
from deltamem.extract.trace import TraceExtractor
from deltamem.scenes.text_games import layout_signature
from deltamem.store.postgres import PostgresStore

sys.path.insert(0, str(Path(__file__).parent))
from recall_pg import start_server  # noqa: E402

SETTINGS = Settings(tau_task=0.6, tau_env=0.6, embedder="hashing", auto_consolidate=False)
TASK = "put a clean mug in the coffee machine"
SCENE = "You are in the kitchen. To the north you see the hallway. A door to the pantry (open)."


class Counting:
    """A connection proxy that counts the statements sent."""

    def __init__(self, conn: Any, counter: list[int]):
        self._conn, self._counter = conn, counter

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        self._counter[0] += 1
        return self._conn.execute(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


class CountingStore(PostgresStore):
    """PostgreSQL store whose every statement is counted in ``sent``."""

    def __init__(self, url: str):
        super().__init__(url)
        self.sent = [0]

    @contextmanager
    def _read(self) -> Iterator[Any]:
        with super()._read() as conn:
            yield Counting(conn, self.sent)


def old_recall(mem: DeltaMem, task: str, env: str) -> tuple[str | None, str | None]:
    """The read path before the batch fetch (one ``get_node`` per candidate looked at)."""
    q_task, q_env = mem._embed([task, env], Usage())
    ranked = _old_started_here(mem, _old_task_ranked(mem, q_task), env)
    task_best = ranked[0] if ranked and ranked[0].score >= SETTINGS.tau_task else None
    env_ranked = _old_same_scene(mem, q_env, env)
    env_best = env_ranked[0] if env_ranked and env_ranked[0].score >= SETTINGS.tau_env else None
    for best in (task_best, env_best):  # the chain and its vectors, as today
        if best is not None:
            chain = mem.store.chain(mem.space, best.id)
            mem.store.vectors(mem.space, [n.id for n in chain])
    return (task_best.id if task_best else None), (env_best.id if env_best else None)


def _old_task_ranked(mem: DeltaMem, q: Any, need: int = 1) -> list[Candidate]:
    """The old ``_task_ranked``/``_rescored``: the heap bar, a ``get_node`` per candidate."""
    store, space, penalty = mem.store, mem.space, mem.settings.penalty
    k = POOL
    while True:
        found = store.scan(space, Tree.TASK, q, penalty=penalty, k=k)
        kept: list[tuple[Candidate, float]] = []
        best: list[float] = []
        complete = False
        for c in found:
            if len(best) >= need and c.score < best[0]:
                complete = True
                break
            node = store.get_node(space, c.id)
            if node is None:
                continue
            if discredited(node):
                c = replace(c, failure=True, discredited=True,
                            score=penalised(c.similarity, penalty))
            kept.append((c, node.created_at))
            if len(best) < need:
                heapq.heappush(best, c.score)
            else:
                heapq.heappushpop(best, c.score)
        if not any(c.discredited for c, _ in kept):
            return found
        if complete or len(found) < k:
            kept.sort(key=lambda p: (-p[0].score, p[0].depth, -p[1]))
            return [c for c, _ in kept]
        k *= 4


def _old_started_here(mem: DeltaMem, ranked: list[Candidate], env: str) -> list[Candidate]:
    layout = layout_signature(env)
    if not layout or len(ranked) < 2 or ranked[1].score != ranked[0].score:
        return ranked
    layouts = {}
    for c in ranked:
        if c.score != ranked[0].score:
            break
        node = mem.store.get_node(mem.space, c.id)
        layouts[c.id] = str(node.meta.get("layout", "")) if node else ""
    return same_layout_first(ranked, layouts, layout)


def _old_same_scene(mem: DeltaMem, q: Any, env: str) -> list[Candidate]:
    found = mem.store.scan(mem.space, Tree.ENV, q, penalty=mem.settings.penalty, k=POOL)
    want = layout_signature(env)
    kept: list[Candidate] = []
    created: dict[str, float] = {}
    for c in found:
        if kept and c.score != kept[-1].score:
            break
        node = mem.store.get_node(mem.space, c.id)
        if node is not None and layout_signature(node.key) == want:
            kept.append(c)
            created[c.id] = node.created_at
    return latest_first(kept, created)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=40)
    parser.add_argument("--url", default=os.environ.get("DELTAMEM_BENCH_PG_URL"))
    args = parser.parse_args()
    url, stop = (args.url, lambda: None) if args.url else start_server()
    try:
        store = CountingStore(url)
        mem = DeltaMem(store, HashingEmbedder(), TraceExtractor(), space="roundtrips",
                       settings=SETTINGS)
        mem.forget() if mem.exists else None
        for i in range(args.episodes):
            steps = (Step(f"take mug {i}", "ok"), Step("clean mug", "ok"),
                     Step(f"put mug {i} in coffee machine", "ok"))
            mem.learn(Episode(TASK, SCENE, steps, success=True))
        mem.recall(TASK, SCENE)  # warm both process-local indexes
        rows = []
        for name, run in (("old", lambda: old_recall(mem, TASK, SCENE)),
                          ("new", lambda: _ids(mem.recall(TASK, SCENE)))):
            store.sent[0] = 0
            answer = run()
            rows.append({"path": name, "round_trips": store.sent[0], "answer": answer})
        if rows[0]["answer"] != rows[1]["answer"]:
            raise SystemExit(f"the paths disagree: {rows}")
        mem.forget()
        mem.close()
    finally:
        stop()
    print(f"{'path':6} {'round trips per recall':>24}")
    for r in rows:
        print(f"{r['path']:6} {r['round_trips']:>24}")
    ratio = rows[0]["round_trips"] / max(rows[1]["round_trips"], 1)
    print(f"old / new: {ratio:.1f}x  ({args.episodes} tied episodes)")
    print(json.dumps({"benchmark": "recall_roundtrips", "episodes": args.episodes,
                      "rows": [{k: v for k, v in r.items() if k != "answer"} for r in rows],
                      "old_over_new": round(ratio, 2)}))


def _ids(recall: Any) -> tuple[str | None, str | None]:
    return (recall.task.node, recall.env.node)


if __name__ == "__main__":
    main()
