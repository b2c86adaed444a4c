"""SQLite readers never wait for a writer: not in another process, not in another thread.

Before, opening a store always took the write lock (``BEGIN IMMEDIATE`` to check migrations),
and one lock covered every read of a store, so recall, stats and check waited behind any writer
and died after ``busy_timeout`` with a raw ``sqlite3.OperationalError``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from deltamem.core.model import Tree
from deltamem.embed.hashing import HashingEmbedder
from deltamem.engine.memory import DeltaMem
from deltamem.errors import StoreError
from deltamem.extract.trace import TraceExtractor
from deltamem.store.sqlite import SQLiteStore
from deltamem.testing.conformance import DIM, SPACE, make_root, vec
from helpers import TEST_SETTINGS, make_episode


@contextmanager
def writer_holding_the_lock(store: SQLiteStore) -> Iterator[None]:
    """A thread that opened a write block (with an uncommitted node) and waits inside it."""
    inside, release = threading.Event(), threading.Event()

    def write() -> None:
        with store.write(SPACE):
            store.add_node(SPACE, make_root("uncommitted"), vec(9))
            inside.set()
            release.wait(30)

    thread = threading.Thread(target=write)
    thread.start()
    assert inside.wait(30)
    try:
        yield
    finally:
        release.set()
        thread.join(30)


@pytest.fixture
def store(tmp_path) -> Iterator[SQLiteStore]:
    s = SQLiteStore(tmp_path / "m.db")
    s.ensure_space(SPACE, "test-embedder", DIM)
    with s.write(SPACE):
        s.add_node(SPACE, make_root("committed"), vec(1))
    yield s
    s.close()


def test_another_handle_opens_and_reads_while_a_writer_holds_the_lock(store, tmp_path):
    """Opening (schema up to date) and reading take no write lock, and see committed rows."""
    with writer_holding_the_lock(store):
        other = SQLiteStore(tmp_path / "m.db", busy_timeout=0.5)
        try:
            assert [n.id for n in other.nodes(SPACE)] == ["committed"]
            assert [c.id for c in other.scan(SPACE, Tree.TASK, vec(9), penalty=0.0, k=5)] == \
                ["committed"]
            # a writer waits, then says why
            with pytest.raises(StoreError, match="locked"), other.write(SPACE):
                pass  # pragma: no cover - never reached
        finally:
            other.close()


def test_another_thread_reads_while_this_store_writes(store):
    """In one process (a server), reads on other threads never wait for the write block."""
    seen: list[list[str]] = []
    with writer_holding_the_lock(store):
        reader = threading.Thread(target=lambda: seen.append(
            [c.id for c in store.scan(SPACE, Tree.TASK, vec(9), penalty=0.0, k=5)]
            + [n.id for n in store.nodes(SPACE)]))
        reader.start()
        reader.join(10)
        assert not reader.is_alive(), "the reader waited for the writer"
    assert seen == [["committed", "committed"]]  # the uncommitted node is invisible
    assert {c.id for c in store.scan(SPACE, Tree.TASK, vec(9), penalty=0.0, k=5)} == \
        {"committed", "uncommitted"}


def test_recall_stats_and_check_answer_while_a_writer_holds_the_lock(tmp_path):
    """The facade's read paths run on a second handle during another handle's write block."""
    db = tmp_path / "m.db"
    with DeltaMem(SQLiteStore(db), HashingEmbedder(), TraceExtractor(),
                  settings=TEST_SETTINGS) as writer:
        writer.learn(make_episode())
        with DeltaMem(SQLiteStore(db, busy_timeout=0.5), HashingEmbedder(), TraceExtractor(),
                      settings=TEST_SETTINGS, create=False) as reader:
            started, release = threading.Event(), threading.Event()

            def hold() -> None:
                with writer.transaction():
                    started.set()
                    release.wait(30)

            thread = threading.Thread(target=hold)
            thread.start()
            assert started.wait(30)
            try:
                assert reader.recall("heat the apple").task.matched
                assert reader.stats().episodes == 1
                assert reader.check() == []
            finally:
                release.set()
                thread.join(30)


def test_a_writer_of_the_same_process_waits_at_most_busy_timeout(tmp_path):
    """Another thread of this process holds the write block: a second writer gives up after
    ``busy_timeout`` with a StoreError and writes nothing (it used to queue with no limit,
    filling a server's worker threads), while reads go on; once free, writes work again."""
    store = SQLiteStore(tmp_path / "w.db", busy_timeout=0.3)
    store.ensure_space("s", "e", DIM)
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with store.write("s"):
            store.add_node("s", make_root("held"), vec(1))
            holding.set()
            release.wait(timeout=30)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        holding.wait()
        with pytest.raises(StoreError, match="stayed locked"), store.write("s"):
            store.add_node("s", make_root("lost"), vec(2))  # pragma: no cover
        assert list(store.nodes("s")) == []  # a read does not wait (the block is uncommitted)
    finally:
        release.set()
        holder.join()
    with store.write("s"):
        store.add_node("s", make_root("later"), vec(3))
    assert {n.id for n in store.nodes("s")} == {"held", "later"}
    store.close()
