"""Index snapshots (store/snapshot.py): a new process starts from the saved index only while the
database still says what the snapshot says, and then answers exactly as a rebuilt index."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from deltamem.core.model import Outcome, Tree
from deltamem.store import snapshot
from deltamem.store.cache import TreeIndex
from deltamem.store.sqlite import SQLiteStore
from deltamem.testing.conformance import DIM, SPACE, make_root, vec

EVERY = 10  # rows appended before a snapshot is written (the default is 20,000)


def fill(store: SQLiteStore, start: int, count: int, tree: Tree = Tree.TASK) -> list[str]:
    ids = [f"{tree.value}-{i}" for i in range(start, start + count)]
    with store.write(SPACE):
        for i, node_id in zip(range(start, start + count), ids, strict=True):
            outcome = Outcome.FAILURE if i % 3 == 0 else Outcome.SUCCESS
            store.add_node(SPACE, make_root(node_id, outcome=outcome, tree=tree), vec(i))
    return ids


def answers(store: SQLiteStore, tree: Tree = Tree.TASK) -> list[list[tuple[str, float]]]:
    """Top-5 (id, score) of 20 fixed queries."""
    return [[(c.id, c.score) for c in store.scan(SPACE, tree, vec(1000 + q), penalty=0.05, k=5)]
            for q in range(20)]


def shared_index(store: SQLiteStore, tree: Tree = Tree.TASK) -> TreeIndex:
    index = store._indexes.get((SPACE, tree.value))
    assert index is not None
    return index


@pytest.fixture
def path(tmp_path: Path) -> Path:
    p = tmp_path / "m.db"
    store = SQLiteStore(p, snapshot_every=EVERY)
    store.ensure_space(SPACE, "test-embedder", DIM)
    fill(store, 0, 30)
    answers(store)  # the first scan builds the index from 30 rows and saves it
    store.close()
    return p


def reference(path: Path, tree: Tree = Tree.TASK) -> list[list[tuple[str, float]]]:
    store = SQLiteStore(path, snapshot_every=0)
    try:
        return answers(store, tree)
    finally:
        store.close()


def test_a_new_process_starts_from_the_snapshot_and_answers_as_a_rebuild(path):
    assert (snapshot.folder(str(path), SPACE, "task") / "meta.json").is_file()
    store = SQLiteStore(path, snapshot_every=EVERY)
    got = answers(store)
    index = shared_index(store)
    assert isinstance(index._matrix, np.memmap) and index.size == 30  # loaded, not rebuilt
    assert got == reference(path)
    store.close()


def test_rows_added_after_the_snapshot_are_caught_up_and_appending_copies_the_map(path):
    writer = SQLiteStore(path, snapshot_every=0)
    fill(writer, 30, 5)
    writer.close()
    store = SQLiteStore(path, snapshot_every=EVERY)
    assert answers(store) == reference(path)
    index = shared_index(store)
    assert index.size == 35 and not isinstance(index._matrix, np.memmap)
    fill(store, 35, 3)  # this process appends again: the index grows in memory
    assert answers(store) == reference(path)
    store.close()


def test_a_deletion_makes_the_snapshot_stale(path):
    store = SQLiteStore(path, snapshot_every=0)
    store.delete_subtree(SPACE, "task-4")
    store.close()
    store = SQLiteStore(path, snapshot_every=EVERY)
    got = answers(store)
    assert not isinstance(shared_index(store)._matrix, np.memmap)
    assert all(c[0] != "task-4" for row in got for c in row)
    assert got == reference(path)
    store.close()


def test_another_database_at_the_same_path_never_uses_the_snapshot(path):
    """Same space, same tree, same row count: the ids (and the creation time) differ."""
    index_dir = Path(f"{path}.index")
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    other = SQLiteStore(path, snapshot_every=0)
    other.ensure_space(SPACE, "test-embedder", DIM)
    with other.write(SPACE):
        for i in range(30):
            other.add_node(SPACE, make_root(f"other-{i}"), vec(500 + i))
    other.close()
    assert index_dir.is_dir()
    store = SQLiteStore(path, snapshot_every=EVERY)
    got = answers(store)
    assert not isinstance(shared_index(store)._matrix, np.memmap)
    assert {c[0] for row in got for c in row} <= {f"other-{i}" for i in range(30)}
    assert got == reference(path)
    store.close()


@pytest.mark.parametrize("damage", ["truncate", "meta", "remove"])
def test_a_damaged_snapshot_is_ignored(path, damage):
    where = snapshot.folder(str(path), SPACE, "task")
    if damage == "truncate":
        data = (where / "codes.npy").read_bytes()
        (where / "codes.npy").write_bytes(data[: len(data) // 2])
    elif damage == "meta":
        (where / "meta.json").write_text("{not json", encoding="utf-8")
    else:
        (where / "matrix.npy").unlink()
    store = SQLiteStore(path, snapshot_every=EVERY)
    assert answers(store) == reference(path)
    store.close()


def test_snapshots_are_rewritten_as_the_tree_grows(path):
    store = SQLiteStore(path, snapshot_every=EVERY)
    answers(store)
    fill(store, 30, EVERY)
    answers(store)  # caught up EVERY rows past the loaded snapshot: saved again
    store.close()
    found = snapshot.peek(snapshot.folder(str(path), SPACE, "task"))
    assert found is not None and found[1].rows == 30 + EVERY


def test_off_for_memory_and_when_disabled(tmp_path):
    for store in (SQLiteStore(":memory:", snapshot_every=1),
                  SQLiteStore(tmp_path / "off.db", snapshot_every=0)):
        store.ensure_space(SPACE, "test-embedder", DIM)
        fill(store, 0, 5)
        answers(store)
        store.close()
    assert not Path(f"{tmp_path / 'off.db'}.index").exists()
    assert not list(tmp_path.glob("*.index"))


def test_a_damaged_row_left_out_of_the_index_still_lets_the_snapshot_load(tmp_path):
    """A stored vector the scan leaves out (NaN) counts in the stamp as in the database."""
    import sqlite3

    p = tmp_path / "d.db"
    store = SQLiteStore(p, snapshot_every=0)
    store.ensure_space(SPACE, "test-embedder", DIM)
    fill(store, 0, 30)
    store.close()
    with sqlite3.connect(p) as conn:
        conn.execute("UPDATE nodes SET vector = ? WHERE id = 'task-7'",
                     (np.full(DIM, np.nan, dtype="<f4").tobytes(),))
    store = SQLiteStore(p, snapshot_every=EVERY)
    first = answers(store)  # builds (without task-7) and saves
    store.close()
    store = SQLiteStore(p, snapshot_every=EVERY)
    assert answers(store) == first == reference(p)
    index = shared_index(store)
    assert isinstance(index._matrix, np.memmap) and index.size == 29
    assert all(c[0] != "task-7" for row in first for c in row)
    store.close()
