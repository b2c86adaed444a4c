"""``scan_vectors``: a scan with its nodes' vectors from the same pass equals ``scan`` then
``vectors``, on every path a scan takes (float32, int8 quantized, IVF candidates, a write
block's own rows merged with the committed ones, a block that deleted)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from deltamem.core.model import Node, NodeKind, Outcome, Skill, Tree
from deltamem.store.base import Store
from deltamem.store.index import VectorIndex
from deltamem.store.memory import InMemoryStore
from deltamem.store.sqlite import SQLiteStore

DIM = 16
SPACE = "s"


def _node(i: int, failure: bool) -> Node:
    return Node(f"n{i}", Tree.TASK, NodeKind.ROOT,
                Outcome.FAILURE if failure else Outcome.SUCCESS, f"task {i}",
                content=Skill("s"))


def _fill(store: Store, rows: int, rng: np.random.Generator) -> None:
    store.ensure_space(SPACE, "test", DIM)
    with store.write(SPACE):
        for i in range(rows):
            v = rng.normal(size=DIM).astype(np.float32)
            store.add_node(SPACE, _node(i, i % 5 == 4), v / np.linalg.norm(v))


def _same(store: Store, query: np.ndarray, k: int, approximate_from: int = 0) -> int:
    found, vectors = store.scan_vectors(SPACE, Tree.TASK, query, penalty=0.05, k=k,
                                        approximate_from=approximate_from)
    assert found == store.scan(SPACE, Tree.TASK, query, penalty=0.05, k=k,
                               approximate_from=approximate_from)
    reference = store.vectors(SPACE, [c.id for c in found])
    assert list(vectors) == [c.id for c in found] and vectors.keys() == reference.keys()
    for node_id, vector in vectors.items():
        assert vector.dtype == np.float32 and np.array_equal(vector, reference[node_id])
    return len(found)


@pytest.mark.parametrize("backend", ["sqlite", "memory"])
def test_scan_vectors_equals_scan_then_vectors(tmp_path: Path, backend: str) -> None:
    rng = np.random.default_rng(7)
    store: Store = SQLiteStore(tmp_path / "v.db") if backend == "sqlite" else InMemoryStore()
    _fill(store, 300, rng)
    for _ in range(5):
        query = rng.normal(size=DIM).astype(np.float32)
        assert _same(store, query / np.linalg.norm(query), 32) == 32
        assert _same(store, query / np.linalg.norm(query), 1) == 1
    with store.write(SPACE):  # a block's own rows, merged with the committed ones
        v = rng.normal(size=DIM).astype(np.float32)
        store.add_node(SPACE, _node(1000, False), v / np.linalg.norm(v))
        assert _same(store, v / np.linalg.norm(v), 32) == 32
        store.delete_subtree(SPACE, "n3")  # a block that deleted scans a private index
        assert _same(store, v / np.linalg.norm(v), 32) == 32
    store.close()


def test_the_int8_and_ivf_paths_return_the_rows_they_scored(tmp_path: Path) -> None:
    """The quantized exact path (over QUANTIZE_FROM rows) and the IVF path (over
    ``approximate_from``) both re-score a subset of rows; the vectors are those rows'."""
    rng = np.random.default_rng(11)
    store = SQLiteStore(tmp_path / "big.db")
    _fill(store, 2600, rng)
    for _ in range(3):
        query = rng.normal(size=DIM).astype(np.float32)
        query /= np.linalg.norm(query)
        assert _same(store, query, 32) == 32  # int8 candidates, then exact re-scoring
        assert _same(store, query, 32, approximate_from=500) == 32  # IVF (or exact w/o faiss)
    store.close()
    index = VectorIndex(DIM, quantize_from=0)
    matrix = rng.normal(size=(600, DIM)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    index.extend((f"r{i}", False, 0, row) for i, row in enumerate(matrix))
    found, vectors = index.scan_vectors(matrix[5], penalty=0.0, k=8)
    assert found == index.scan(matrix[5], penalty=0.0, k=8) and found[0].id == "r5"
    assert all(np.array_equal(vectors[c.id], matrix[int(c.id[1:])]) for c in found)
