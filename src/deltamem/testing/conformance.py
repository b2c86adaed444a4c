"""The store conformance suite: every backend must pass these tests unchanged.

Use it by subclassing :class:`StoreConformance` in a pytest module and providing a
``store_factory`` fixture: a callable that opens a new handle on one fresh, empty database (each
call another handle on the same database; the suite closes what it opens)::

    class TestMyStore(StoreConformance):
        @pytest.fixture
        def store_factory(self, tmp_path):
            return lambda: MyStore(tmp_path / "db")

The tests talk to the store only through the :class:`~deltamem.store.base.Store` contract and
compare ``scan`` against the reference semantics in :mod:`deltamem.core.scoring`. Every behaviour
in which two backends once differed is pinned here: vector widths and values, text a backend
could not hold, writes to another space inside a block, nested blocks, parent cycles in damaged
data, several handles on one database, and the audit log. Beyond those pinned cases, every
backend's reads are diffed against the in-memory reference store (``deltamem.store.memory``)
on random forests. The suite needs ``pytest`` and ``hypothesis`` (the ``dev`` extra).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, cast

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deltamem.core.delta import diff
from deltamem.core.model import Knowledge, Lesson, Node, NodeKind, Outcome, Skill, Tree
from deltamem.core.scoring import top_k
from deltamem.errors import EmbedderMismatch, StoreError
from deltamem.store.base import EpisodeRecord, Footprint, Store
from deltamem.store.memory import InMemoryStore
from deltamem.store.rows import node_to_row
from deltamem.store.transfer import export_records, import_records

DIM = 8
SPACE = "conformance"
_SPACES = itertools.count()  # a fresh space per generated example (the store fixture is shared)

# A random forest: per node, its parent (an earlier node, or none: a root), outcome and vector
# seed (few seeds, so exact ties are common); then a node whose subtree is deleted, or none.
_forests = st.tuples(
    st.lists(st.tuples(st.integers(-1, 30), st.booleans(), st.integers(0, 5),
                       st.sampled_from([Tree.TASK, Tree.ENV])), min_size=1, max_size=24),
    st.integers(-1, 23),
    st.lists(st.tuples(st.integers(0, 8), st.sampled_from([0.0, 0.05, 1.0]),
                       st.integers(1, 6)), min_size=1, max_size=4),
)


def _forest(spec: list[tuple[int, bool, int, Tree]]) -> list[tuple[Node, Any]]:
    """Nodes (parents first) and their vectors for a generated forest."""
    out: list[tuple[Node, Any]] = []
    for i, (parent_at, failed, seed, tree) in enumerate(spec):
        outcome = Outcome.FAILURE if failed else Outcome.SUCCESS
        parent = out[parent_at][0] if 0 <= parent_at < i else None
        if parent is None:
            content = Skill(f"s{i}") if tree is Tree.TASK else Knowledge(f"k{i}")
            node = Node(f"n{i}", tree, NodeKind.ROOT, outcome, f"key {seed}", content=content,
                        created_at=float(i))
        else:
            node = Node(f"n{i}", parent.tree, NodeKind.DELTA, outcome, f"key {seed}",
                        parent_id=parent.id, depth=parent.depth + 1, patch=(),
                        created_at=float(i))
        out.append((node, vec(1000 + seed)))
    return out


def vec(seed: int, dim: int = DIM) -> Any:
    v = np.random.default_rng(seed).normal(size=dim).astype(np.float32)
    return v / np.linalg.norm(v)


def make_root(node_id: str, exp: Any = None, outcome: Outcome = Outcome.SUCCESS,
              tree: Tree = Tree.TASK) -> Node:
    return Node(node_id, tree, NodeKind.ROOT, outcome, f"key {node_id}",
                content=exp or Skill("heat", ("go", "take"), "hot"), created_at=time.time())


def make_delta(node_id: str, parent: Node, before: Any, after: Any,
               outcome: Outcome = Outcome.SUCCESS) -> Node:
    return Node(node_id, parent.tree, NodeKind.DELTA, outcome, f"key {node_id}",
                parent_id=parent.id, depth=parent.depth + 1, patch=diff(before, after),
                created_at=time.time(), meta={"note": "ü"})


class StoreConformance:
    """Contract tests for :class:`~deltamem.store.base.Store` implementations."""

    @pytest.fixture
    def store_factory(self) -> Callable[[], Store]:  # pragma: no cover - every backend's own
        raise NotImplementedError

    @pytest.fixture
    def store(self, store_factory: Callable[[], Store]) -> Iterator[Store]:
        s = store_factory()
        yield s
        s.close()

    @pytest.fixture
    def space(self, store: Store) -> str:
        store.ensure_space(SPACE, "test-embedder", DIM)
        return SPACE

    def test_space_records_its_embedder(self, store: Store) -> None:
        """A space remembers its embedder and refuses another one."""
        info = store.ensure_space("a", "emb-1", DIM)
        assert (info.embedder, info.dim) == ("emb-1", DIM)
        assert store.ensure_space("a", "emb-1", DIM) == info
        with pytest.raises(EmbedderMismatch):
            store.ensure_space("a", "emb-2", DIM)
        assert [s.space for s in store.spaces()] == ["a"]

    def test_nodes_round_trip_exactly(self, store: Store, space: str) -> None:
        """A node comes back equal, with its patch, meta and vector."""
        base = Skill("heat", ("go", "take"), "hot")
        r = make_root("r", base)
        d = make_delta("d", r, base, Skill("heat", ("go", "open", "take"), "hot"))
        with store.write(space):
            store.add_node(space, r, vec(1))
            store.add_node(space, d, vec(2))
        assert store.get_node(space, "d") == d
        assert store.get_node(space, "d").meta == {"note": "ü"}  # type: ignore[union-attr]
        assert store.get_node(space, "missing") is None
        np.testing.assert_array_equal(store.vector(space, "d"), vec(2))
        both = store.vectors(space, ["r", "d", "missing"])
        assert sorted(both) == ["d", "r"]
        np.testing.assert_array_equal(both["r"], vec(1))
        assert store.vectors(space, []) == {}
        assert [n.id for n in store.chain(space, "d")] == ["r", "d"]
        assert [n.id for n in store.children(space, "r")] == ["d"]
        assert store.chain(space, "missing") == []

    def test_nodes_iterate_in_insertion_order_per_tree(self, store: Store, space: str) -> None:
        """nodes() yields parents before children, filtered by tree."""
        with store.write(space):
            for i in range(5):
                tree = Tree.TASK if i % 2 == 0 else Tree.ENV
                exp = Skill(f"s{i}") if tree is Tree.TASK else Knowledge(f"k{i}")
                store.add_node(space, make_root(f"n{i}", exp, tree=tree), vec(i))
        assert [n.id for n in store.nodes(space)] == [f"n{i}" for i in range(5)]
        assert [n.id for n in store.nodes(space, Tree.ENV)] == ["n1", "n3"]

    def test_counters_and_consolidation_flag(self, store: Store, space: str) -> None:
        """bump adds to counters; mark_consolidated sets the flag."""
        with store.write(space):
            store.add_node(space, make_root("r"), vec(1))
            store.bump(space, "r", hits=2, successes=1)
            store.bump(space, "r", hits=1, failures=1)
            store.mark_consolidated(space, "r")
        node = store.get_node(space, "r")
        assert node is not None
        assert (node.hits, node.successes, node.failures, node.consolidated) == (3, 1, 1, True)

    def test_failed_write_block_leaves_nothing(self, store: Store, space: str) -> None:
        """An exception inside write() rolls back every change, including for scans."""
        with store.write(space):
            store.add_node(space, make_root("keep"), vec(1))
        with pytest.raises(RuntimeError), store.write(space):
            store.add_node(space, make_root("gone"), vec(2))
            assert store.scan(space, Tree.TASK, vec(2), penalty=0.0)[0].id == "gone"
            raise RuntimeError("boom")
        assert store.get_node(space, "gone") is None
        assert [c.id for c in store.scan(space, Tree.TASK, vec(2), penalty=0.0, k=5)] == ["keep"]

    def test_duplicate_node_id_is_refused(self, store: Store, space: str) -> None:
        """Adding an existing id raises StoreError and keeps the original."""
        with store.write(space):
            store.add_node(space, make_root("r"), vec(1))
        with pytest.raises(StoreError), store.write(space):
            store.add_node(space, make_root("r", Skill("other")), vec(2))
        assert store.get_node(space, "r").content == Skill("heat", ("go", "take"), "hot")  # type: ignore[union-attr]

    def test_scan_matches_reference(self, store: Store, space: str) -> None:
        """scan() agrees with core.scoring.top_k, ties and failures included."""
        rng = np.random.default_rng(7)
        vectors: list[Any] = []
        failures: list[bool] = []
        depths: list[int] = []
        ids: list[str] = []
        with store.write(space):
            parent = None
            for i in range(60):
                v = vectors[rng.integers(0, i)] if i and i % 7 == 0 else vec(100 + i)
                fail = bool(rng.random() < 0.3)
                outcome = Outcome.FAILURE if fail else Outcome.SUCCESS
                if parent is not None and i % 3 == 0:
                    node = make_delta(f"n{i}", parent, parent.content, Lesson("x"), outcome)
                else:
                    node = make_root(f"n{i}", outcome=outcome)
                    parent = node
                store.add_node(space, node, v)
                vectors.append(v)
                failures.append(fail)
                depths.append(node.depth)
                ids.append(node.id)
        m = np.stack(vectors)
        for q_seed in range(10):
            q = vectors[q_seed * 5] if q_seed % 2 else vec(900 + q_seed)
            want = top_k(m, np.array(failures), np.array(depths, dtype=np.int32), q,
                         penalty=0.05, k=4)
            got = store.scan(space, Tree.TASK, q, penalty=0.05, k=4)
            assert [c.id for c in got] == [ids[w.position] for w in want]
            for c, w in zip(got, want, strict=True):
                assert c.score == pytest.approx(w.score, abs=1e-5)
                assert c.failure == w.failure and c.depth == depths[w.position]
            self._scan_vectors_agree(store, space, q)
        with store.write(space):  # a block's own rows, then a block that deleted
            store.add_node(space, make_root("late"), vec(5))
            self._scan_vectors_agree(store, space, vec(5))
            store.delete_subtree(space, "n1")
            self._scan_vectors_agree(store, space, vec(5))

    @staticmethod
    def _scan_vectors_agree(store: Store, space: str, query: Any) -> None:
        """scan_vectors() answers scan() with the vectors vectors() gives those nodes."""
        found, vectors = store.scan_vectors(space, Tree.TASK, query, penalty=0.05, k=4)
        assert found == store.scan(space, Tree.TASK, query, penalty=0.05, k=4)
        stored = store.vectors(space, [c.id for c in found])
        assert list(vectors) == [c.id for c in found] and vectors.keys() == stored.keys()
        assert all(np.array_equal(vectors[i], stored[i]) for i in stored)

    def test_scan_sees_later_writes(self, store: Store, space: str) -> None:
        """A scan picks up nodes written after the index was first built."""
        with store.write(space):
            store.add_node(space, make_root("a"), vec(1))
        assert store.scan(space, Tree.TASK, vec(2), penalty=0.0)[0].id == "a"
        with store.write(space):
            store.add_node(space, make_root("b"), vec(2))
        assert store.scan(space, Tree.TASK, vec(2), penalty=0.0)[0].id == "b"

    def test_reads_follow_counters_and_deletions_made_since(
            self, store: Store, space: str, store_factory: Callable[[], Store]) -> None:
        """Nodes read before (a backend may keep them decoded) come back with the counters this
        handle or another one changed since, and not at all once another handle deleted them,
        through every read: get_node, get_nodes, chain and chains."""
        base = Skill("heat", ("go", "take"), "hot")
        r = make_root("r", base)
        d = make_delta("d", r, base, Skill("heat", ("go", "open", "take"), "hot"))
        with store.write(space):
            store.add_node(space, r, vec(1))
            store.add_node(space, d, vec(2))
        other = store_factory()

        def counters(node: Node | None) -> tuple[int, int, int, bool] | None:
            return None if node is None else (node.hits, node.successes, node.failures,
                                              node.consolidated)

        def seen(node_id: str) -> set[tuple[int, int, int, bool] | None]:
            """The node's counters through each read (one value when they all agree)."""
            chain = store.chain(space, "d")
            return {counters(store.get_node(space, node_id)),
                    counters(store.get_nodes(space, [node_id, "x"]).get(node_id)),
                    counters(next((n for n in chain if n.id == node_id), None)),
                    counters(next((n for n in store.chains(space, ["d"]).get("d", [])
                                   if n.id == node_id), None))}

        try:
            for _ in range(2):  # read twice: the second read may come from a cache
                assert seen("r") == {(0, 0, 0, False)}
                assert seen("d") == {(0, 0, 0, False)}
            other.bump(space, "r", hits=2, successes=1)
            assert seen("r") == {(2, 1, 0, False)}
            other.mark_consolidated(space, "d")
            assert seen("d") == {(0, 0, 0, True)}
            store.bump(space, "d", failures=3)
            assert seen("d") == {(0, 0, 3, True)}
            with store.write(space):
                store.bump(space, "r", hits=1)
                assert store.get_node(space, "r").hits == 3  # type: ignore[union-attr]
            assert seen("r") == {(3, 1, 0, False)}
            assert counters(other.get_node(space, "r")) == (3, 1, 0, False)
            with other.write(space):
                other.delete_subtree(space, "r")
            assert seen("r") == {None}
            assert seen("d") == {None}
            assert store.get_nodes(space, ["r", "d"]) == {}
            assert store.chains(space, ["r", "d"]) == {}
        finally:
            if other is not store:
                other.close()

    def test_second_handle_catches_up_and_rebuilds_after_deletes(
            self, store: Store, space: str, store_factory: Callable[[], Store]) -> None:
        """Another handle on the same database sees new nodes, and stops seeing deleted ones."""
        other = store_factory()
        try:
            with store.write(space):
                store.add_node(space, make_root("r1"), vec(1))
            assert other.scan(space, Tree.TASK, vec(2), penalty=0.0)[0].id == "r1"
            with store.write(space):
                store.add_node(space, make_root("r2"), vec(2))
            assert other.scan(space, Tree.TASK, vec(2), penalty=0.0)[0].id == "r2"
            with store.write(space):
                assert store.delete_subtree(space, "r2") == ["r2"]
            assert [c.id for c in other.scan(space, Tree.TASK, vec(2), penalty=0.0, k=5)] == \
                ["r1"]
            assert [e["action"] for e in other.audit_log(space)] == ["delete_subtree"]
        finally:
            if other is not store:
                other.close()

    def test_changes_tells_every_addition_and_deletion_of_another_handle(
            self, store: Store, space: str, store_factory: Callable[[], Store]) -> None:
        """``changes`` (when a store can tell) stays equal while nothing is written, and
        differs once another handle added or deleted a node."""
        other = store_factory()
        try:
            with store.write(space):
                store.add_node(space, make_root("r1"), vec(1))
            before = store.changes(space)
            if before is None:
                return
            assert store.changes(space) == before
            with other.write(space):
                other.add_node(space, make_root("r2"), vec(2))
            added = store.changes(space)
            assert added != before
            with other.write(space):
                other.delete_subtree(space, "r2")
            assert store.changes(space) not in (before, added)
        finally:
            if other is not store:
                other.close()

    def test_scan_inside_a_block_sees_own_nodes_and_deletions(self, store: Store,
                                                              space: str) -> None:
        """In a block, scans see the block's own new nodes and not the ones it deleted."""
        with store.write(space):
            store.add_node(space, make_root("old"), vec(1))
        with store.write(space):
            store.add_node(space, make_root("new"), vec(1))  # an exact tie: the newer wins
            assert [c.id for c in store.scan(space, Tree.TASK, vec(1), penalty=0.0, k=2)] == \
                ["new", "old"]
        with store.write(space):
            store.delete_subtree(space, "new")
            assert [c.id for c in store.scan(space, Tree.TASK, vec(1), penalty=0.0, k=2)] == \
                ["old"]

    def test_wrong_vectors_are_refused(self, store: Store, space: str) -> None:
        """A vector of another width, with NaN/infinite values, or neither of unit norm nor
        zero (1e30 would win every scan) is refused; nothing is kept. Zeros are fine."""
        bad = [np.ones(DIM + 1, dtype=np.float32) / np.sqrt(DIM + 1),
               np.full(DIM, np.nan, dtype=np.float32),
               np.full(DIM, np.inf, dtype=np.float32),
               np.full(DIM, 1e30, dtype=np.float32), vec(1) * 2, vec(2) * 0.5]
        for i, v in enumerate(bad):
            with pytest.raises(StoreError), store.write(space):
                store.add_node(space, make_root(f"bad{i}"), v)
        assert list(store.nodes(space)) == []
        with store.write(space):
            store.add_node(space, make_root("zeros"), np.zeros(DIM, dtype=np.float32))
        with store.write(space):
            store.delete_subtree(space, "zeros")
        assert store.scan(space, Tree.TASK, vec(1), penalty=0.0) == []

    @pytest.mark.parametrize("text", ["nul\x00inside", "lone \ud800 surrogate"])
    def test_text_no_backend_can_hold_is_refused(self, store: Store, space: str,
                                                 text: str) -> None:
        """NUL characters and lone surrogates are refused the same way by every backend."""
        with pytest.raises(StoreError), store.write(space):
            store.add_node(space, Node("r", Tree.TASK, NodeKind.ROOT, Outcome.SUCCESS, text,
                                       content=Skill("s")), vec(1))
        with pytest.raises(StoreError), store.write(space):
            store.add_episode(space, EpisodeRecord("e", text, "", True, None, [], {}, {}, 0, 0.0))
        assert list(store.nodes(space)) == [] and store.count_episodes(space) == 0

    def test_json_columns_keep_nul_and_refuse_surrogates(self, store: Store, space: str) -> None:
        """Inside JSON (content, patches, meta) a NUL is escaped and kept; a surrogate is not."""
        with store.write(space):
            store.add_node(space, make_root("r", Skill("a\x00b")), vec(1))
        assert store.get_node(space, "r").content == Skill("a\x00b")  # type: ignore[union-attr]
        with pytest.raises(StoreError), store.write(space):
            store.add_node(space, make_root("s", Skill("\udfff")), vec(2))
        assert store.get_node(space, "s") is None

    def test_writing_another_space_inside_a_block_is_refused(self, store: Store,
                                                             space: str) -> None:
        """A block is scoped to its space: touching another one fails and rolls back."""
        store.ensure_space("other", "test-embedder", DIM)
        with pytest.raises(StoreError), store.write(space):
            store.add_node(space, make_root("mine"), vec(1))
            store.add_node("other", make_root("theirs"), vec(2))
        assert store.get_node(space, "mine") is None
        assert store.get_node("other", "theirs") is None
        assert store.scan("other", Tree.TASK, vec(2), penalty=0.0) == []

    def test_write_blocks_do_not_nest(self, store: Store, space: str) -> None:
        """Opening a block inside a block fails; the outer block rolls back."""
        with pytest.raises(StoreError), store.write(space):
            store.add_node(space, make_root("outer"), vec(1))
            with store.write(space):
                pass  # pragma: no cover - never reached
        assert store.get_node(space, "outer") is None

    def test_parent_cycles_end(self, store: Store, space: str) -> None:
        """Damaged data with a parent cycle never hangs chain or delete_subtree."""
        loop = Node("loop", Tree.TASK, NodeKind.DELTA, Outcome.SUCCESS, "k", parent_id="loop",
                    depth=2, patch=())
        a = Node("a", Tree.TASK, NodeKind.DELTA, Outcome.SUCCESS, "k", parent_id="b", depth=2,
                 patch=())
        b = Node("b", Tree.TASK, NodeKind.DELTA, Outcome.SUCCESS, "k", parent_id="a", depth=3,
                 patch=())
        with store.write(space):
            for i, node in enumerate((loop, a, b)):
                store.add_node(space, node, vec(i))
        assert [n.id for n in store.chain(space, "loop")] == ["loop"]
        assert [n.id for n in store.chain(space, "b")] == ["a", "b"]
        with store.write(space):
            assert store.delete_subtree(space, "loop") == ["loop"]
            assert sorted(store.delete_subtree(space, "a")) == ["a", "b"]

    def test_audit_log_records_deletions(self, store: Store, space: str,
                                         store_factory: Callable[[], Store]) -> None:
        """Deletions are logged oldest first, with a float timestamp, the same on every handle."""
        with store.write(space):
            store.add_node(space, make_root("r"), vec(1))
            store.add_node(space, make_root("s"), vec(2))
        before = time.time()
        with store.write(space):
            store.delete_subtree(space, "r")
        assert store.forget_space(space) == 1
        after = time.time()
        log = store.audit_log(space)
        assert [(e["action"], e["detail"]) for e in log] == [
            ("delete_subtree", {"root": "r", "deleted": ["r"]}), ("forget_space", {"nodes": 1})]
        assert all(type(e["at"]) is float and before - 1 <= e["at"] <= after + 1 for e in log)
        assert log[0]["at"] <= log[1]["at"]
        other = store_factory()
        try:
            assert other.audit_log(space) == log
            assert other.audit_log("never-written") == []
        finally:
            if other is not store:
                other.close()

    def test_a_rolled_back_deletion_is_not_logged(self, store: Store, space: str) -> None:
        """The audit log is part of the write block: a failed block logs nothing."""
        with store.write(space):
            store.add_node(space, make_root("r"), vec(1))
        with pytest.raises(RuntimeError), store.write(space):
            store.delete_subtree(space, "r")
            raise RuntimeError("boom")
        assert store.audit_log(space) == []
        assert store.get_node(space, "r") is not None

    def test_creating_another_space_inside_a_block_is_refused(self, store: Store,
                                                              space: str) -> None:
        """ensure_space is a write like any other: inside a block it may only touch its space."""
        with pytest.raises(StoreError), store.write(space):
            store.add_node(space, make_root("mine"), vec(1))
            store.ensure_space("other", "test-embedder", DIM)
        assert [s.space for s in store.spaces()] == [space]
        assert store.get_node(space, "mine") is None
        with store.write("fresh"):  # a block may create its own space, then write to it
            store.ensure_space("fresh", "test-embedder", DIM)
            store.add_node("fresh", make_root("n"), vec(1))
        assert store.get_node("fresh", "n") is not None

    @pytest.mark.parametrize("name", ["nul\x00space", "lone \ud800 surrogate"])
    def test_space_and_embedder_names_no_backend_can_hold_are_refused(self, store: Store,
                                                                      name: str) -> None:
        """A space or embedder name with NUL or a lone surrogate is a StoreError everywhere."""
        with pytest.raises(StoreError):
            store.ensure_space(name, "test-embedder", DIM)
        with pytest.raises(StoreError):
            store.ensure_space("a", name, DIM)
        assert store.spaces() == []

    @pytest.mark.parametrize("value", [2**31, 2**63, -(2**31) - 1])
    def test_integers_no_backend_can_hold_are_refused(self, store: Store, space: str,
                                                      value: int) -> None:
        """Depths, counters and sizes are 32-bit integers on every backend (PostgreSQL's)."""
        node = Node("r", Tree.TASK, NodeKind.ROOT, Outcome.SUCCESS, "k", content=Skill("s"),
                    hits=value)
        with pytest.raises(StoreError), store.write(space):
            store.add_node(space, node, vec(1))
        with pytest.raises(StoreError), store.write(space):
            store.add_episode(space, EpisodeRecord("e", "t", "", True, None, [], {}, {}, value,
                                                   0.0))
        assert list(store.nodes(space)) == [] and store.count_episodes(space) == 0
        edge = Node("r", Tree.TASK, NodeKind.ROOT, Outcome.SUCCESS, "k", content=Skill("s"),
                    hits=2**31 - 1)
        with store.write(space):
            store.add_node(space, edge, vec(1))
        assert store.get_node(space, "r") == edge

    def test_a_query_of_the_wrong_width_is_refused(self, store: Store, space: str) -> None:
        """Scanning with a vector of another width is a StoreError, empty tree or not."""
        with pytest.raises(StoreError):
            store.scan(space, Tree.TASK, vec(1, dim=DIM + 1), penalty=0.0)
        with store.write(space):
            store.add_node(space, make_root("r"), vec(1))
        for query in (vec(1, dim=DIM - 1), np.ones((1, DIM), dtype=np.float32)):
            with pytest.raises(StoreError):
                store.scan(space, Tree.TASK, query, penalty=0.0)
            with pytest.raises(StoreError), store.write(space):
                store.scan(space, Tree.TASK, query, penalty=0.0)
        assert [c.id for c in store.scan(space, Tree.TASK, vec(1), penalty=0.0)] == ["r"]

    def test_a_failed_nested_block_leaves_the_store_usable(self, store: Store,
                                                           space: str) -> None:
        """After a refused nested block, the next block (and a lone statement) work."""
        with pytest.raises(StoreError), store.write(space), store.write(space):
            pass  # pragma: no cover - never reached
        with store.write(space):
            store.add_node(space, make_root("a"), vec(1))
        store.bump(space, "a", hits=1)  # a statement outside a block is its own block
        node = store.get_node(space, "a")
        assert node is not None and node.hits == 1

    def test_two_handles_see_the_same_rows_and_refuse_the_same_writes(
            self, store: Store, space: str, store_factory: Callable[[], Store]) -> None:
        """Whatever one handle commits, another reads identically; its writes obey one space."""
        other = store_factory()
        try:
            base = Skill("heat", ("go",), "hot")
            r = make_root("r", base)
            with store.write(space):
                store.add_node(space, r, vec(1))
                store.add_node(space, make_delta("d", r, base, Skill("heat", ("go", "x"))),
                               vec(2))
            assert other.chain(space, "d") == store.chain(space, "d")
            got = other.vectors(space, ["r", "d"])
            for node_id, seed in (("r", 1), ("d", 2)):
                np.testing.assert_array_equal(got[node_id], vec(seed))
            assert other.ensure_space(space, "test-embedder", DIM).dim == DIM
            with pytest.raises(EmbedderMismatch):
                other.ensure_space(space, "test-embedder", DIM + 1)
            with pytest.raises(StoreError):
                other.add_node(space, make_root("r"), vec(3))  # the id exists already
            with pytest.raises(StoreError), other.write(space):
                other.add_node(space, make_root("w"), vec(1, dim=DIM + 1))
            with other.write(space):
                other.bump(space, "r", successes=2)
            node = store.get_node(space, "r")
            assert node is not None and node.successes == 2
            assert [n.id for n in store.nodes(space)] == ["r", "d"]
        finally:
            if other is not store:
                other.close()

    def test_spaces_are_isolated(self, store: Store, space: str) -> None:
        """Nodes and episodes of one space are invisible from another."""
        store.ensure_space("other", "test-embedder", DIM)
        with store.write(space):
            store.add_node(space, make_root("r"), vec(1))
        assert store.get_node("other", "r") is None
        assert store.scan("other", Tree.TASK, vec(1), penalty=0.0) == []
        assert list(store.nodes("other")) == []
        with store.write("other"):
            store.add_node("other", make_root("r"), vec(3))  # same id, other space: fine
        assert store.forget_space("other") == 1
        assert store.get_node(space, "r") is not None

    def test_delete_subtree(self, store: Store, space: str) -> None:
        """Deleting a node removes its descendants and their vectors, nothing else."""
        base = Skill("a")
        r = make_root("r", base)
        c1 = make_delta("c1", r, base, Skill("b"))
        c2 = make_delta("c2", c1, Skill("b"), Skill("c"))
        other = make_root("o", Skill("z"))
        with store.write(space):
            for i, n in enumerate((r, c1, c2, other)):
                store.add_node(space, n, vec(i))
        assert store.scan(space, Tree.TASK, vec(2), penalty=0.0)[0].id == "c2"
        with store.write(space):
            assert sorted(store.delete_subtree(space, "c1")) == ["c1", "c2"]
        assert [n.id for n in store.nodes(space)] == ["r", "o"]
        assert {c.id for c in store.scan(space, Tree.TASK, vec(2), penalty=0.0, k=9)} == {"r",
                                                                                         "o"}

    def test_steps_and_facts_are_stored_once(self, store: Store, space: str,
                                              store_factory: Callable[[], Store]) -> None:
        """A step or fact longer than ``store.texts.INTERN_FROM`` is kept once per space
        whatever rows hold it (roots, patches, both trees); every node reads back exactly, in
        a second handle too; ``footprint`` counts the texts once and the rows' references."""
        step = "open the door to the kitchen and look around"
        fact = "kitchen: a fridge (closed), a counter, a sink"
        a = Skill("heat", (step, "take"), "hot")
        b = Skill("cool", ("go", step, "take"), "cold")
        r1, r2 = make_root("r1", a), make_root("r2", b)
        d = make_delta("d", r1, a, Skill("heat", (step, "take", fact), "hot"))
        k = make_root("k", Knowledge("kitchen", (fact, "a sink")), tree=Tree.ENV)
        nodes = (r1, r2, d, k)
        with store.write(space):
            for i, n in enumerate(nodes):
                store.add_node(space, n, vec(i))
        assert list(store.nodes(space)) == list(nodes)
        other = store_factory()
        try:
            assert other.get_nodes(space, ["d", "k"]) == {"d": d, "k": k}
            assert other.chain(space, "d") == [r1, d]
        finally:
            if other is not store:
                other.close()
        footprint = store.footprint(space)
        assert (footprint.text_count, footprint.texts) == (2, len(step) + len(fact))
        inline = sum(len(r["content"] or "") + len(r["patch"] or "")
                     for r in map(node_to_row, nodes))
        # the rows hold none of the four copies (r1, r2: the step; d, k: the fact), each
        # replaced by a number of at most 19 digits
        assert footprint.task + footprint.env <= inline - 2 * (len(step) + len(fact)) + 4 * 19

    def test_deleting_nodes_deletes_the_texts_only_they_held(self, store: Store,
                                                             space: str) -> None:
        """A text goes with the last node that holds it, and with its space; another space
        keeps its own copy."""
        step = "open the door to the kitchen and look around"
        fact = "kitchen: a fridge (closed), a counter, a sink"
        a = Skill("heat", (step,), "hot")
        r = make_root("r", a)
        d = make_delta("d", r, a, Skill("heat", (step, fact), "hot"))
        k = make_root("k", Knowledge("kitchen", (fact,)), tree=Tree.ENV)
        store.ensure_space("other", "test-embedder", DIM)
        o = make_root("o", Skill("x", (fact,)))
        with store.write("other"):
            store.add_node("other", o, vec(9))
        with store.write(space):
            for i, n in enumerate((r, d, k)):
                store.add_node(space, n, vec(i))
        with store.write(space):
            store.delete_subtree(space, "d")
        assert store.footprint(space).text_count == 2  # k still holds the fact
        with store.write(space):
            store.delete_subtree(space, "k")
        assert (store.footprint(space).text_count, store.footprint(space).texts) == (1, len(step))
        assert list(store.nodes(space)) == [r]
        store.forget_space(space)
        assert store.footprint(space) == Footprint()
        assert store.get_node("other", "o") == o
        assert store.footprint("other").text_count == 1

    def test_retire_moves_nodes_to_the_history(self, store: Store, space: str,
                                                store_factory: Callable[[], Store]) -> None:
        """``retire`` takes nodes out of the live tree (reads, scans, a second handle's scans,
        the footprint and the texts only they held), keeps them in the audit log with their
        experiences, and moves the given nodes; deleting the root they went into, or
        forgetting the space, deletes that history."""
        step = "open the door to the kitchen and look around"
        only = "a step that only the retired delta ever held"
        base = Skill("heat", (step,), "hot")
        longer = Skill("heat", (step, only), "hot")
        r = make_root("r", base)
        d = make_delta("d", r, base, longer)
        c = make_delta("c", d, longer, Skill("heat", (step, only, "go"), "hot"))
        new = make_root("R", longer)
        with store.write(space):
            for i, n in enumerate((r, d, c)):
                store.add_node(space, n, vec(i))
        other = store_factory()
        try:
            assert other.scan(space, Tree.TASK, vec(1), penalty=0.0)[0].id == "d"
            moved = Node("c", Tree.TASK, NodeKind.DELTA, Outcome.SUCCESS, "key c",
                         parent_id="R", depth=2, patch=c.patch, created_at=c.created_at,
                         meta=c.meta)
            with store.write(space):
                store.add_node(space, new, vec(1))
                store.retire(space, "R", [(d, longer), (r, base)], [moved])
            for handle in (store, other):
                assert [n.id for n in handle.nodes(space)] == ["c", "R"]
                assert handle.get_nodes(space, ["r", "d"]) == {}
                assert handle.chain(space, "c") == [new, moved]
                assert {x.id for x in handle.scan(space, Tree.TASK, vec(1), penalty=0.0,
                                                  k=9)} == {"R", "c"}
        finally:
            if other is not store:
                other.close()
        assert store.footprint(space).text_count == 2  # R holds both texts now
        entry = [e for e in store.audit_log(space) if e["action"] == "retire"]
        assert [(e["detail"]["into"], [n["id"] for n in e["detail"]["nodes"]])
                for e in entry] == [("R", ["d", "r"])]
        assert entry[0]["detail"]["nodes"][0]["experience"] == {
            "type": "skill", "activation": "heat", "steps": [step, only], "termination": "hot"}
        with store.write(space):
            store.delete_subtree(space, "R")
        assert [e for e in store.audit_log(space) if e["action"] == "retire"] == []
        assert store.footprint(space) == Footprint()
        with store.write(space):
            store.add_node(space, make_root("q", base), vec(4))
            store.retire(space, "q", [(r, base)], [])
        store.forget_space(space)
        assert [e["action"] for e in store.audit_log(space)] == [
            "delete_subtree", "forget_space"]

    def test_episodes(self, store: Store, space: str) -> None:
        """Episodes are stored in order, counted, and refused twice."""
        rec = EpisodeRecord("e1", "task", "env", True, 1.0, [{"action": "a"}], {"m": 1},
                            {"task": {"action": "root"}}, 42, 1.5)
        with store.write(space):
            store.add_episode(space, rec)
        assert list(store.episodes(space)) == [rec]
        assert store.count_episodes(space) == 1
        with pytest.raises(StoreError), store.write(space):
            store.add_episode(space, rec)
        assert store.count_episodes(space) == 1

    def test_export_import_round_trip(self, store: Store, space: str) -> None:
        """Exporting, importing into a fresh space and exporting again gives the same records."""
        base = Skill("heat", ("go",), "hot")
        r = make_root("r", base)
        with store.write(space):
            store.add_node(space, r, vec(1))
            store.add_node(space, make_delta("d", r, base, Lesson("heat", ("go",))), vec(2))
            store.add_episode(space, EpisodeRecord("e", "t", "s", False, None, [], {}, {}, 3, 2.0))
        first = list(export_records(store, space))
        counts = import_records(store, "copy", iter(first))
        assert counts == {"nodes": 2, "episodes": 1}
        second = list(export_records(store, "copy"))
        assert second[1:] == first[1:]
        assert second[0] == {**first[0], "space": "copy"}

    def test_get_nodes_fetches_many_in_one_call(self, store: Store, space: str) -> None:
        """``get_nodes`` answers what ``get_node`` answers for each id, in the order asked,
        each id once, missing ids and other spaces' nodes absent; inside a block it sees the
        block's own nodes."""
        base = Skill("heat", ("go", "take"), "hot")
        r = make_root("r", base)
        d = make_delta("d", r, base, Skill("heat", ("go", "open", "take"), "hot"))
        store.ensure_space("other", "test-embedder", DIM)
        with store.write(space):
            store.add_node(space, r, vec(1))
            store.add_node(space, d, vec(2))
        with store.write("other"):
            store.add_node("other", make_root("x"), vec(3))
        got = store.get_nodes(space, ["d", "missing", "r", "d", "x"])
        assert list(got) == ["d", "r"]
        assert got == {"d": store.get_node(space, "d"), "r": store.get_node(space, "r")}
        assert store.get_nodes(space, []) == {}
        with store.write(space):
            store.add_node(space, make_root("new"), vec(4))
            assert list(store.get_nodes(space, ["new", "r"])) == ["new", "r"]

    def test_metas_fetch_the_meta_of_many_nodes_in_one_call(self, store: Store,
                                                             space: str) -> None:
        """``metas`` answers each node's ``meta`` as ``get_nodes`` would, keyed the same way
        (order asked, each id once, missing ids and other spaces' nodes absent), also for a
        block's own nodes."""
        tagged = Node("m", Tree.TASK, NodeKind.ROOT, Outcome.SUCCESS, "k",
                      content=Skill("heat", ("go",), "hot"),
                      meta={"episode_meta": {"user": "alice", "run": 3}, "trace": "x"})
        store.ensure_space("other", "test-embedder", DIM)
        with store.write(space):
            store.add_node(space, tagged, vec(1))
            store.add_node(space, make_root("plain"), vec(2))
        with store.write("other"):
            store.add_node("other", make_root("x"), vec(3))
        got = store.metas(space, ["plain", "missing", "m", "plain", "x"])
        assert list(got) == ["plain", "m"]
        nodes = store.get_nodes(space, ["plain", "m"])
        assert got == {i: n.meta for i, n in nodes.items()}
        assert got["m"] == {"episode_meta": {"user": "alice", "run": 3}, "trace": "x"}
        assert store.metas(space, []) == {}
        with store.write(space):
            store.add_node(space, make_root("new"), vec(4))
            assert list(store.metas(space, ["new", "m"])) == ["new", "m"]

    def test_chains_fetch_many_paths_in_one_call(self, store: Store, space: str) -> None:
        """``chains`` answers what ``chain`` answers for each id (shared ancestors, roots,
        missing ids absent, damaged parent cycles ending)."""
        base = Skill("heat", ("go", "take"), "hot")
        r = make_root("r", base)
        d = make_delta("d", r, base, Skill("heat", ("go", "open", "take"), "hot"))
        e = make_delta("e", r, base, Skill("heat", ("take",), "hot"))
        f = Node("f", Tree.TASK, NodeKind.DELTA, Outcome.SUCCESS, "k", parent_id="d",
                 depth=d.depth + 1, patch=())
        loop = Node("loop", Tree.TASK, NodeKind.DELTA, Outcome.SUCCESS, "k", parent_id="loop",
                    depth=2, patch=())
        orphan = Node("orphan", Tree.TASK, NodeKind.DELTA, Outcome.SUCCESS, "k",
                      parent_id="gone", depth=1, patch=())
        with store.write(space):
            for i, node in enumerate((r, d, e, f, loop, orphan)):
                store.add_node(space, node, vec(i))
        ids = ["f", "e", "missing", "r", "loop", "orphan", "f"]
        got = store.chains(space, ids)
        assert list(got) == ["f", "e", "r", "loop", "orphan"]
        for node_id, chain in got.items():
            assert chain == store.chain(space, node_id)
        assert [n.id for n in got["f"]] == ["r", "d", "f"]
        assert store.chains(space, []) == {}


    @pytest.mark.parametrize("node_id", ["t-1\x00", "\x00", "t-\ud800"])
    def test_an_id_no_node_can_have_is_not_found(self, store: Store, space: str,
                                                 node_id: str) -> None:
        """An id holding a NUL or a lone surrogate names no node, on every backend alike
        (PostgreSQL used to fail with StoreError, SQLite answered 'not found')."""
        with store.write(space):
            store.add_node(space, make_root("t-1"), vec(1))
        assert store.get_node(space, node_id) is None
        assert store.chain(space, node_id) == [] and store.children(space, node_id) == []
        assert store.vectors(space, [node_id]) == {}
        with store.write(space):
            assert store.delete_subtree(space, node_id) == []
        assert [n.id for n in store.nodes(space)] == ["t-1"]

    def test_an_import_racing_a_delete_leaves_no_orphan(
            self, store: Store, store_factory: Callable[[], Store], space: str) -> None:
        """Import checks and writes under one lock: another handle that deletes the parent an
        imported node hangs under, while the import is checking the space, deletes before the
        import or after it, never in between, so the space never holds an orphan."""
        base = Skill("heat", ("go",), "hot")
        r = make_root("r", base)
        with store.write(space):
            store.add_node(space, r, vec(1))
            store.add_node(space, make_delta("d", r, base, Lesson("heat", ("go",))), vec(2))
        header, root, child = list(export_records(store, space))
        with store.write(space):
            store.delete_subtree(space, "d")  # the space holds r; the file adds d under it
        other = store_factory()
        deleter = threading.Thread(target=lambda: other.delete_subtree(space, "r"))

        class Racing:
            """The importer's store: right after its first read of the space's nodes, the
            delete runs (given up to 2 s: a delete the import's lock holds back waits)."""

            def __getattr__(self, name: str) -> Any:
                return getattr(store, name)

            def nodes(self, *args: Any, **kwargs: Any) -> Any:
                seen = list(store.nodes(*args, **kwargs))
                if deleter.ident is None:
                    deleter.start()
                    deleter.join(timeout=2)
                return iter(seen)

        try:
            import_records(cast(Store, Racing()), space, iter([header, child]))
        finally:
            deleter.join()
            if other is not store:
                other.close()
        left = list(store.nodes(space))
        ids = {n.id for n in left}
        assert [n.id for n in left if n.parent_id and n.parent_id not in ids] == []  # no orphan
        assert ids == set() and root["id"] == "r"  # the import went first, the delete took both

    # Each example writes its own space and a fresh reference store, so the shared fixture and
    # the subclasses running this one method (one per backend) are safe.
    @settings(max_examples=25, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.function_scoped_fixture,
                                     HealthCheck.differing_executors])
    @given(forest=_forests)
    def test_answers_equal_the_reference_store_on_random_trees(
            self, store: Store, forest: tuple[Any, int, Any]) -> None:
        """On random forests (ties, failures, depths, a deleted subtree), every read answers
        what the in-memory reference store (``deltamem.store.memory``) answers."""
        spec, deleted_at, queries = forest
        space = f"diff-{next(_SPACES)}"
        reference = InMemoryStore()
        nodes = _forest(spec)
        for s in (store, reference):
            s.ensure_space(space, "test-embedder", DIM)
            with s.write(space):
                for node, vector in nodes[: len(nodes) // 2]:
                    s.add_node(space, node, vector)
            with s.write(space):
                for node, vector in nodes[len(nodes) // 2:]:
                    s.add_node(space, node, vector)
                s.bump(space, nodes[0][0].id, hits=1, failures=1)
            if 0 <= deleted_at < len(nodes):
                with s.write(space):
                    s.delete_subtree(space, nodes[deleted_at][0].id)
        ids = [n.id for n, _ in nodes] + ["missing"]
        for tree in (Tree.TASK, Tree.ENV):
            assert [n.id for n in store.nodes(space, tree)] == \
                [n.id for n in reference.nodes(space, tree)]
            for seed, penalty, k in queries:
                got = store.scan(space, tree, vec(1000 + seed), penalty=penalty, k=k)
                want = reference.scan(space, tree, vec(1000 + seed), penalty=penalty, k=k)
                assert [(c.id, c.failure, c.depth) for c in got] == \
                    [(c.id, c.failure, c.depth) for c in want]
                assert [c.score for c in got] == pytest.approx([c.score for c in want],
                                                               abs=1e-6)
        assert store.get_nodes(space, ids) == reference.get_nodes(space, ids)
        assert store.chains(space, ids) == reference.chains(space, ids)
        for node_id in ids:
            assert store.chain(space, node_id) == reference.chain(space, node_id)
            assert [n.id for n in store.children(space, node_id)] == \
                [n.id for n in reference.children(space, node_id)]
        store.forget_space(space)
