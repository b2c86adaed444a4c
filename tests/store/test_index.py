"""The quantized exact scan returns exactly the plain float32 scan's answer (core.scoring.top_k)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from deltamem.core.scoring import similarities, top_k
from deltamem.store.index import VectorIndex


def build(matrix, failures, depths, *, quantize_from=0):
    index = VectorIndex(matrix.shape[1], capacity=1, quantize_from=quantize_from)
    index.extend((f"n{i}", bool(failures[i]), int(depths[i]), matrix[i])
                 for i in range(matrix.shape[0]))
    return index


def reference(matrix, failures, depths, query, penalty, k):
    return [(f"n{h.position}", h.similarity, h.failure, int(depths[h.position]), h.score)
            for h in top_k(matrix, failures, depths, query, penalty=penalty, k=k)]


def scanned(index, query, penalty, k):
    return [(c.id, c.similarity, c.failure, c.depth, c.score)
            for c in index.scan(query, penalty=penalty, k=k)]


def dataset(seed, n, dim, spread, unit):
    """Clustered vectors with exact duplicates, near-duplicates, zero rows and varied norms."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(max(1, n // 16), dim))
    m = centres[rng.integers(0, len(centres), size=n)] + spread * rng.normal(size=(n, dim))
    if unit:
        m /= np.linalg.norm(m, axis=1, keepdims=True)
    else:
        m *= rng.uniform(0.1, 3.0, size=(n, 1))
    m = m.astype(np.float32)
    m[rng.integers(0, n, size=n // 4)] = m[rng.integers(0, n)]  # ties: same key, same vector
    m[rng.integers(0, n, size=max(1, n // 50))] = 0.0
    failures = rng.random(n) < 0.3
    depths = rng.integers(0, 5, size=n).astype(np.int32)
    return rng, m, failures, depths


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 600), dim=st.sampled_from([3, 16, 384]),
       spread=st.sampled_from([1e-4, 1e-2, 0.3, 3.0]), unit=st.booleans(),
       penalty=st.sampled_from([0.0, 0.05, 0.2, 1e-5]), k=st.integers(1, 8),
       query_kind=st.sampled_from(["row", "near", "random", "scaled"]))
def test_quantized_scan_equals_float32_scan(seed, n, dim, spread, unit, penalty, k, query_kind):
    """Same nodes, similarities, scores and order as top_k over every row, ties included."""
    rng, m, failures, depths = dataset(seed, n, dim, spread, unit)
    row = m[rng.integers(0, n)]
    query = {"row": row, "near": row + 1e-3 * rng.normal(size=dim),
             "random": rng.normal(size=dim), "scaled": 7.0 * row}[query_kind]
    query = np.asarray(query, dtype=np.float32)
    index = build(m, failures, depths)
    assert scanned(index, query, penalty, k) == reference(m, failures, depths, query, penalty, k)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), gap=st.sampled_from([1e-7, 1e-6, 1e-5, 1e-3]),
       k=st.integers(1, 4))
def test_near_ties_inside_the_quantization_error(seed, gap, k):
    """Rows whose exact scores differ by less than the int8 error still come out exactly right."""
    rng = np.random.default_rng(seed)
    base = rng.normal(size=384)
    base /= np.linalg.norm(base)
    m = base + gap * rng.normal(size=(300, 384))
    m = np.vstack([m, rng.normal(size=(700, 384))]).astype(np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    failures = rng.random(1000) < 0.2
    depths = rng.integers(0, 3, size=1000).astype(np.int32)
    query = base.astype(np.float32)
    index = build(m, failures, depths)
    assert scanned(index, query, 0.05, k) == reference(m, failures, depths, query, 0.05, k)


def test_quantized_path_rescoring_few_rows():
    """On spread-out unit vectors the bound leaves a handful of rows to re-score."""
    rng = np.random.default_rng(0)
    m = rng.normal(size=(5000, 384)).astype(np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    index = build(m, np.zeros(5000, bool), np.zeros(5000, np.int32))
    query = m[17] + np.float32(0.5) * m[18]
    rows = index._candidates(query / np.linalg.norm(query), 0.05, 1)
    assert rows is not None and 1 <= len(rows) < 100 and 17 in rows


def test_small_and_large_indexes_agree_after_appends():
    """Rows appended over several extends (with buffer growth) scan the same either way."""
    rng, m, failures, depths = dataset(3, 3000, 384, 0.3, True)
    quantized = VectorIndex(384, capacity=1, quantize_from=0)
    plain = VectorIndex(384, capacity=1, quantize_from=10**9)
    for lo, hi in ((0, 1), (1, 700), (700, 2999), (2999, 3000)):
        for index in (quantized, plain):
            index.extend((f"n{i}", bool(failures[i]), int(depths[i]), m[i])
                         for i in range(lo, hi))
        q = rng.normal(size=384).astype(np.float32)
        assert scanned(quantized, q, 0.05, 5) == scanned(plain, q, 0.05, 5)


def test_zero_query_falls_back_to_the_exact_scan():
    rng, m, failures, depths = dataset(4, 200, 16, 0.3, True)
    q = np.zeros(16, dtype=np.float32)
    assert scanned(build(m, failures, depths), q, 0.05, 3) == reference(m, failures, depths, q,
                                                                         0.05, 3)


def test_similarity_of_a_row_does_not_depend_on_the_other_rows():
    """The property re-scoring relies on; a BLAS matrix-vector product breaks it (and ties)."""
    rng = np.random.default_rng(5)
    for n in (5, 33, 130, 1001):
        m = rng.normal(size=(n, 384)).astype(np.float32)
        q = rng.normal(size=384).astype(np.float32)
        full = similarities(m, q)
        subset = np.sort(rng.choice(n, size=max(1, n // 3), replace=False))
        assert np.array_equal(similarities(m[subset], q), full[subset])
        for j in range(0, n - 1, max(1, n // 7)):
            m[n - 1] = m[j]  # an identical row at another position scores identically
            assert similarities(m, q)[n - 1] == similarities(m, q)[j]
