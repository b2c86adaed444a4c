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
            return ([r.episode_id for r in learned], [r.task.node for r in recalls],
                    {"episodes": stats.episodes})

    episodes, recalled, stats = asyncio.run(scenario())
    assert len(set(episodes)) == 3 and stats == {"episodes": 3}
    with DeltaMem.open(db, embedder="hashing", settings=TEST_SETTINGS) as mem:
        ids = {r.id for r in mem.list_nodes().nodes}
    assert all(node in ids for node in recalled)


def test_every_facade_method_is_offloaded_with_its_signature_and_doc() -> None:
    """Every public method of DeltaMem (correct, learn_many, scrub, add_roots, import_records
    were missing) is a coroutine of AsyncDeltaMem with the same signature and doc."""
    from deltamem.engine.aio import NOT_OFFLOADED

    public = {name for name in vars(DeltaMem) if not name.startswith("_")} - NOT_OFFLOADED
    assert {"correct", "learn_many", "scrub", "add_roots", "import_records"} <= public
    for name in sorted(public):
        wrapped = getattr(AsyncDeltaMem, name)
        assert inspect.iscoroutinefunction(wrapped), name
        assert wrapped.__doc__ == getattr(DeltaMem, name).__doc__, name
        assert inspect.signature(wrapped) == inspect.signature(getattr(DeltaMem, name)), name


def test_correct_and_iter_export_await(tmp_path: Path) -> None:
    async def scenario() -> tuple[str, list[str]]:
        async with await AsyncDeltaMem.open(tmp_path / "c.db", embedder="hashing",
                                            settings=TEST_SETTINGS) as mem:
            learned = await mem.learn(make_episode())
            done = await mem.correct(learned.task.node, wrong=True)
            return done.of, [line async for line in mem.iter_export()]

    of, lines = asyncio.run(scenario())
    assert of.startswith("t-") and len(lines) == 1 + 3 + 1  # header, 2 nodes + correction, 1 ep
