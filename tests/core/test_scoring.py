"""The failure-penalised scan: the reference semantics every store must match."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from deltamem.core.scoring import penalised, similarities, top_k


def unit(*xs):
    v = np.array(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


def arrays(vectors, failures=None, depths=None):
    m = np.stack(vectors).astype(np.float32)
    n = len(vectors)
    f = np.array(failures or [False] * n)
    d = np.array(depths or [1] * n, dtype=np.int32)
    return m, f, d


def test_failure_penalty_demotes_a_failure():
    """A failure node loses to a slightly less similar success once penalised."""
    q = unit(1, 0)
    m, f, d = arrays([unit(1, 0.01), unit(1, 0.2)], failures=[True, False])
    best = top_k(m, f, d, q, penalty=0.05)[0]
    assert best.position == 1
    assert best.score == best.similarity


def test_penalised_ties_exactly_with_a_scanned_failure():
    """A node re-scored as a failure gets the very score the scan gives a failure of its vector."""
    q = unit(3, 1, 2)
    m, f, d = arrays([unit(1, 2, 2), unit(1, 2, 2)], failures=[True, False])
    failure, success = sorted(top_k(m, f, d, q, penalty=0.05, k=2), key=lambda s: s.position)
    assert penalised(success.similarity, 0.05) == failure.score


def test_ties_prefer_shallower_then_newer():
    """Equal scores go to the shallower node, then to the newer one."""
    q = unit(1, 0)
    m, f, d = arrays([unit(1, 0)] * 3, depths=[3, 1, 1])
    assert top_k(m, f, d, q, penalty=0.05)[0].position == 2
    assert [s.position for s in top_k(m, f, d, q, penalty=0.05, k=3)] == [2, 1, 0]


def test_empty_index_returns_nothing():
    """Scanning an empty tree finds nothing."""
    m = np.zeros((0, 2), dtype=np.float32)
    assert top_k(m, np.zeros(0, bool), np.zeros(0, np.int32), unit(1, 0), penalty=0.1) == []


@given(st.integers(1, 40), st.integers(1, 6), st.integers(0, 2**31 - 1),
       st.floats(0, 0.5))
def test_top_k_matches_brute_force(n, k, seed, penalty):
    """top_k equals sorting every node by (score desc, depth asc, position desc)."""
    rng = np.random.default_rng(seed)
    m = rng.normal(size=(n, 8)).astype(np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    m[rng.integers(0, n, size=n // 3)] = m[0]  # force ties
    f = rng.random(n) < 0.3
    d = rng.integers(1, 6, size=n).astype(np.int32)
    q = m[rng.integers(0, n)]
    got = [s.position for s in top_k(m, f, d, q, penalty=penalty, k=k)]
    scores = similarities(m, q) - np.float32(penalty) * f.astype(np.float32)
    expected = sorted(range(n), key=lambda i: (-scores[i], d[i], -i))[:k]
    assert got == expected


def test_identical_rows_tie_wherever_they_sit():
    """Two nodes with the same vector tie exactly at any positions, so the tie rule decides.

    A BLAS matrix-vector product gave such rows different last bits on OpenBLAS's Haswell kernel.
    """
    rng = np.random.default_rng(7)
    for n in (6, 37, 131, 515):
        m = rng.normal(size=(n, 384)).astype(np.float32)
        m /= np.linalg.norm(m, axis=1, keepdims=True)
        f, d = np.zeros(n, bool), np.ones(n, np.int32)
        for j in range(0, n - 1, max(1, n // 9)):
            m[n - 1] = m[j]
            q = (m[j] + 0.01 * rng.normal(size=384)).astype(np.float32)
            first, second = top_k(m, f, d, q, penalty=0.0, k=2)
            assert (first.position, second.position) == (n - 1, j)
            assert first.score == second.score
