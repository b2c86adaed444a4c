"""The approximate index of very large trees (store/ann.py): exact re-scoring of its candidates,
the threshold that switches it on, and exact scans when faiss is not installed."""

from __future__ import annotations

import logging
import sys

import numpy as np
import pytest
from tests.helpers import make_episode

from deltamem import DeltaMem
from deltamem.config import Settings
from deltamem.core.model import Tree
from deltamem.errors import ConfigError
from deltamem.extract.trace import TraceExtractor
from deltamem.store import ann
from deltamem.store.ann import IvfCandidates
from deltamem.store.index import VectorIndex
from deltamem.testing import HashingEmbedder

DIM = 64


def clustered(seed: int, n: int) -> tuple[np.random.Generator, np.ndarray, np.ndarray, np.ndarray]:
    """Rows near a few dozen centres, with exact duplicates (ties), failures and depths."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(40, DIM))
    m = centres[rng.integers(0, 40, size=n)] + 0.6 * rng.normal(size=(n, DIM))
    m[rng.integers(0, n, size=n // 200)] = m[rng.integers(0, n)]  # 30 copies: exact ties
    m = (m / np.linalg.norm(m, axis=1, keepdims=True)).astype(np.float32)
    return rng, m, rng.random(n) < 0.3, rng.integers(0, 5, size=n).astype(np.int32)


def build(m: np.ndarray, failures: np.ndarray, depths: np.ndarray, lo: int = 0,
          index: VectorIndex | None = None) -> VectorIndex:
    index = index or VectorIndex(m.shape[1], capacity=1)
    index.extend((f"n{i}", bool(failures[i]), int(depths[i]), m[i])
                 for i in range(lo, m.shape[0]))
    return index


def rows(hits: list) -> list[tuple]:
    return [(c.id, c.similarity, c.failure, c.depth, c.score) for c in hits]


@pytest.mark.parametrize("k", [1, 5, 32])
def test_approximate_scan_is_the_exact_scan_when_the_truth_is_among_the_candidates(k):
    _, m, failures, depths = clustered(0, 6000)
    index = build(m, failures, depths)
    rng = np.random.default_rng(1)
    covered = 0
    for i in rng.integers(0, len(m), size=60):
        query = (m[i] + 0.05 * rng.normal(size=DIM)).astype(np.float32)
        exact = index.scan(query, penalty=0.05, k=k)
        approximate = index.scan(query, penalty=0.05, k=k, approximate_from=1000)
        assert index.approximate is not None
        candidates = {f"n{p}" for p in index.approximate.candidates(query, k)}
        # Always: the exact top-k of the candidates, in the exact scan's order and scores.
        assert {c.id for c in approximate} <= candidates
        assert len(approximate) == min(k, len(candidates))
        if {c.id for c in exact} <= candidates:  # the exact answer is among the candidates
            covered += 1
            assert rows(approximate) == rows(exact)
    assert covered >= 54  # near-copies of stored rows: the truth is nearly always a candidate


def test_threshold_switches_the_approximate_index_on_and_keeps_it_in_step(monkeypatch):
    _, m, failures, depths = clustered(2, 3000)
    index = build(m[:1500], failures[:1500], depths[:1500])
    calls = []
    original = IvfCandidates.candidates
    monkeypatch.setattr(IvfCandidates, "candidates",
                        lambda self, q, k: calls.append(k) or original(self, q, k))
    index.scan(m[3], penalty=0.05, k=1, approximate_from=2000)
    assert index.approximate is None and calls == []  # below the threshold: exact, nothing built
    build(m, failures, depths, lo=1500, index=index)
    best = index.scan(m[2500], penalty=0.0, k=1, approximate_from=2000)
    assert index.approximate is not None and calls == [1] and index.approximate.size == 3000
    assert rows(best) == rows(index.scan(m[2500], penalty=0.0, k=1))
    # Rows appended later go into the approximate index too, and are found.
    extra = np.random.default_rng(3).normal(size=DIM).astype(np.float32)
    extra /= np.linalg.norm(extra)
    index.extend([("late", False, 0, extra)])
    assert index.approximate.size == 3001
    assert index.scan(extra, penalty=0.0, k=1, approximate_from=2000)[0].id == "late"
    index.scan(extra, penalty=0.0, k=1)  # approximate_from 0: exact, the index is not asked
    assert calls == [1, 1]


def test_without_faiss_large_trees_are_scanned_exactly_and_it_is_logged_once(monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "faiss", None)  # import faiss raises ImportError
    monkeypatch.setattr(ann, "_faiss", None)
    monkeypatch.setattr(ann, "_reported", False)
    _, m, failures, depths = clustered(4, 2500)
    caplog.set_level(logging.WARNING, logger="deltamem.store")
    for seed in (5, 6):
        index = build(m, failures, depths)
        query = np.random.default_rng(seed).normal(size=DIM).astype(np.float32)
        assert rows(index.scan(query, penalty=0.05, k=3, approximate_from=100)) == \
            rows(index.scan(query, penalty=0.05, k=3))
        assert index.approximate is None
    warnings = [r for r in caplog.records if "deltamem[ann]" in r.getMessage()]
    assert len(warnings) == 1


def test_settings_ann_from():
    assert Settings().ann_from == 400_000
    assert Settings.from_env({"DELTAMEM_ANN_FROM": "1000"}).ann_from == 1000
    with pytest.raises(ConfigError, match="ann_from"):
        Settings(ann_from=-1)


def test_memory_scans_through_the_approximate_index_above_ann_from(tmp_path):
    with DeltaMem.open(tmp_path / "m.db", embedder=HashingEmbedder(), extractor=TraceExtractor(),
                       settings=Settings(ann_from=10)) as mem:
        for i in range(40):
            mem.learn(make_episode(task=f"heat the apple number {i}",
                                   actions=(f"go to counter {i}", "take apple", f"heat {i}")))
        recall = mem.recall("heat the apple number 7", "a kitchen with a fridge")
        index = mem.store._indexes.get((mem.space, Tree.TASK.value))
        assert index is not None and index.size > 32 and index.approximate is not None
        exact = mem.store.scan(mem.space, Tree.TASK, recall.task.query, penalty=0.05, k=1)
        assert recall.task.best is not None and recall.task.best.id == exact[0].id
