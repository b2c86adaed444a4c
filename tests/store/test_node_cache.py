"""SQLite reads reuse what did not change: no store state query per scan, decoded nodes cached.

``PRAGMA data_version`` on a thread's reader connection tells whether any other connection
(this process's writer, another process) committed since its last look; only then are the
remembered space state and the node cache dropped.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from deltamem.core.model import Node, Tree
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


def test_an_unchanged_store_answers_scans_and_node_reads_without_queries(store):
    store.scan(SPACE, Tree.TASK, vec(1), penalty=0.0)
    store.chains(SPACE, ["d"])
    seen = _statements(store)
    assert store.scan(SPACE, Tree.TASK, vec(1), penalty=0.0)[0].id == "r"
    assert [n.id for n in store.chain(SPACE, "d")] == ["r", "d"]
    assert store.get_node(SPACE, "d").id == "d"  # type: ignore[union-attr]
    assert set(store.get_nodes(SPACE, ["r", "d"])) == {"r", "d"}
    assert seen and all(s == "PRAGMA data_version" for s in seen), seen


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
    cache.put(SPACE, nodes, cache.epoch)
    assert len(cache) == 2 and cache.get(SPACE, "n0") is None  # least recently used went
    epoch = cache.epoch
    cache.clear()  # a commit was seen while a reader was fetching
    cache.put(SPACE, nodes[:1], epoch)
    assert cache.get(SPACE, "n0") is None
    cache.put(SPACE, nodes[:1], cache.epoch)
    assert isinstance(cache.get(SPACE, "n0"), Node)
    cache.discard(SPACE, "n0")
    assert cache.get(SPACE, "n0") is None
