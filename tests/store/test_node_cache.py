"""Reads reuse what did not change: no store state query per scan, decoded nodes cached.

SQLite: ``PRAGMA data_version`` on a thread's reader connection tells whether any other
connection (this process's writer, another process) committed since its last look; only then is
the remembered space state asked again. Every backend: a node read comes from the node cache
when the database says, in the same read, that the row still has the cached ``seq``, with the
counters it gives then (the conformance suite pins the results; these pin the statements).
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from deltamem.core.model import Node, NodeKind, Outcome, Skill, Tree
from deltamem.store import sql
from deltamem.store.cache import NodeCache
from deltamem.store.sqlite import SQLiteStore
from deltamem.testing.conformance import make_delta, make_root, vec

SPACE = "s"


@pytest.fixture
def store(tmp_path: Path):
    s = SQLiteStore(tmp_path / "mem.db")
    s.ensure_space(SPACE, "test", 8)
    root = make_root("r")
    with s.write(SPACE):
        s.add_node(SPACE, root, vec(1))
        s.add_node(SPACE, make_delta("d", root, root.content, root.content), vec(2))
    yield s
    s.close()


def _statements(store: SQLiteStore) -> list[str]:
    """What this thread's reader connection runs from now on."""
    store.get_node(SPACE, "r")  # opens it
    seen: list[str] = []
    store._local.conn.set_trace_callback(seen.append)
    return seen


def test_an_unchanged_store_scans_without_a_state_query_and_decodes_no_node_twice(
        store, monkeypatch):
    store.scan(SPACE, Tree.TASK, vec(1), penalty=0.0)
    store.chains(SPACE, ["d"])
    seen = _statements(store)
    decoded: list[str] = []
    real = sql.node_from_row
    monkeypatch.setattr(sql, "node_from_row", lambda row: decoded.append(row["id"]) or real(row))
    assert store.scan(SPACE, Tree.TASK, vec(1), penalty=0.0)[0].id == "r"
    assert [n.id for n in store.chain(SPACE, "d")] == ["r", "d"]
    assert store.get_node(SPACE, "d").id == "d"  # type: ignore[union-attr]
    assert set(store.get_nodes(SPACE, ["r", "d"])) == {"r", "d"}
    assert "PRAGMA data_version" in seen
    assert not any("SELECT generation" in s for s in seen), seen
    assert decoded == []
    store.bump(SPACE, "d", hits=1)  # counters change: the cached decoding is reused
    assert store.get_node(SPACE, "d").hits == 1  # type: ignore[union-attr]
    assert decoded == []


def test_a_commit_makes_the_next_scan_ask_again(store):
    store.scan(SPACE, Tree.TASK, vec(1), penalty=0.0)
    seen = _statements(store)
    with store.write(SPACE):
        store.add_node(SPACE, make_root("new"), vec(3))
    assert store.scan(SPACE, Tree.TASK, vec(3), penalty=0.0)[0].id == "new"
    assert any("SELECT generation" in s for s in seen)


def test_another_process_bumping_or_deleting_is_seen(store, tmp_path):
    assert store.get_node(SPACE, "r").hits == 0  # type: ignore[union-attr]
    assert [n.hits for n in store.chain(SPACE, "d")] == [0, 0]

    def other_process(code: str) -> None:
        script = textwrap.dedent(f"""
            from deltamem.store.sqlite import SQLiteStore
            s = SQLiteStore({str(tmp_path / "mem.db")!r})
            {code}
            s.close()
            """)
        subprocess.run([sys.executable, "-c", script], check=True, timeout=120)

    other_process(f"s.bump({SPACE!r}, 'r', hits=5, failures=1)")
    assert store.get_node(SPACE, "r").hits == 5  # type: ignore[union-attr]
    assert [(n.hits, n.failures) for n in store.chain(SPACE, "d")] == [(5, 1), (0, 0)]
    other_process(f"s.mark_consolidated({SPACE!r}, 'd')")
    assert store.chains(SPACE, ["d"])["d"][1].consolidated
    other_process(f"with s.write({SPACE!r}):\n                s.delete_subtree({SPACE!r}, 'r')")
    assert store.get_node(SPACE, "d") is None
    assert store.chain(SPACE, "d") == []
    assert store.scan(SPACE, Tree.TASK, vec(1), penalty=0.0) == []


def test_a_node_deleted_and_added_again_or_edited_outside_is_read_afresh(store, tmp_path):
    """Same id, another row: the cached decoding of the old one is not used."""
    assert store.get_node(SPACE, "d").key == "key d"  # type: ignore[union-attr]
    with store.write(SPACE):
        store.delete_subtree(SPACE, "d")
        store.add_node(SPACE, Node("d", Tree.TASK, NodeKind.ROOT, Outcome.SUCCESS, "again",
                                   content=Skill("other")), vec(2))
    assert store.get_node(SPACE, "d").key == "again"  # type: ignore[union-attr]
    assert store.chain(SPACE, "d")[0].content == Skill("other")
    raw = sqlite3.connect(tmp_path / "mem.db")
    with raw:
        raw.execute("UPDATE nodes SET key = 'edited' WHERE id = 'd'")
    raw.close()
    assert store.get_node(SPACE, "d").key == "edited"  # type: ignore[union-attr]
    assert store.chains(SPACE, ["d"])["d"][0].key == "edited"


def test_a_write_block_reads_its_own_uncommitted_counters_and_caches_nothing_of_them(store):
    store.get_node(SPACE, "r")
    try:
        with store.write(SPACE):
            store.bump(SPACE, "r", hits=7)
            assert store.get_node(SPACE, "r").hits == 7  # type: ignore[union-attr]
            raise RuntimeError("roll back")
    except RuntimeError:
        pass
    assert store.get_node(SPACE, "r").hits == 0  # type: ignore[union-attr]
    assert [n.hits for n in store.chain(SPACE, "d")] == [0, 0]


def test_the_node_cache_is_bounded_and_refuses_nodes_read_before_a_clear():
    cache = NodeCache(size=2)
    nodes = [make_root(f"n{i}") for i in range(3)]
    cache.put(SPACE, enumerate(nodes), cache.epoch)
    assert len(cache) == 2 and cache.get(SPACE, "n0") is None  # least recently used went
    epoch = cache.epoch
    cache.clear()  # a deletion while a reader was fetching
    cache.put(SPACE, [(0, nodes[0])], epoch)
    assert cache.get(SPACE, "n0") is None
    cache.put(SPACE, [(0, nodes[0])], cache.epoch)
    assert isinstance(cache.get(SPACE, "n0")[1], Node)  # type: ignore[index]
    cache.discard(SPACE, "n0")
    assert cache.get(SPACE, "n0") is None
