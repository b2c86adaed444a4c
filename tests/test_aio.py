"""AsyncDeltaMem: the sync facade's results, awaited, with calls overlapping on one loop."""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path

from deltamem import AsyncDeltaMem, DeltaMem, NodeNotFound
from helpers import TEST_SETTINGS, make_episode


def test_async_facade_learns_recalls_and_overlaps(tmp_path: Path) -> None:
    db = tmp_path / "a.db"

    async def scenario() -> tuple[list[str], list[str | None], dict[str, int]]:
        async with await AsyncDeltaMem.open(db, embedder="hashing",
                                            settings=TEST_SETTINGS) as mem:
            learned = await asyncio.gather(*(mem.learn(make_episode(task=f"heat the apple {i}"))
                                             for i in range(3)))
            recalls = await asyncio.gather(*(mem.recall(f"heat the apple {i}") for i in range(3)))
            try:
                await mem.show("t-missing")
            except NodeNotFound as exc:
                assert exc.node_id == "t-missing"
            else:
                raise AssertionError("show of a missing node must raise")
            stats = await mem.stats()
            return ([r.episode_id for r in learned], [r.task.node.id if r.task.node else None
                                                      for r in recalls],
                    {"episodes": stats["episodes"]})

    episodes, recalled, stats = asyncio.run(scenario())
    assert len(set(episodes)) == 3 and stats == {"episodes": 3}
    with DeltaMem.open(db, embedder="hashing", settings=TEST_SETTINGS) as mem:
        ids = {r["id"] for r in mem.list_nodes()}
    assert all(node in ids for node in recalled)


def test_every_method_keeps_the_sync_signature_and_doc() -> None:
    for name in ("recall", "learn", "consolidate", "show", "list_nodes", "stats", "delete",
                 "forget", "export", "import_", "check", "record_outcome"):
        wrapped = getattr(AsyncDeltaMem, name)
        assert inspect.iscoroutinefunction(wrapped), name
        assert wrapped.__doc__ == getattr(DeltaMem, name).__doc__, name
        assert inspect.signature(wrapped) == inspect.signature(getattr(DeltaMem, name)), name
