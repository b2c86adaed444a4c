"""Failure-penalised similarity scan: the read path's one formula.

For a query vector ``q`` and every node ``n`` of one tree::

    score(n) = cos(q, n) - penalty * [n is a failure]

The best node is accepted when ``score >= threshold``. The scan is global and flat over the tree
(as in the paper's final code), not a descent. Exact ties (nodes written with the same key carry
the same vector) go to the shallower node, then to the *newer* one: a consolidated root therefore
wins over the deep node it was compiled from and over an older root with the same key.

Similarities are float32 dot products taken one row at a time (:func:`similarities`), so a node's
similarity is a function of its vector and the query alone. A BLAS matrix-vector product is not:
its kernels sum blocks of rows and the leftover rows in different orders, so the same row scored
at another position (or in a subset) can differ in the last bits -- measured on OpenBLAS's Haswell
kernel, two identical rows of one matrix got different scores and so did not tie. Indexes that
re-score a subset of rows (``store.index``) rely on this to return exactly the reference answer.

This module is the reference every store's ``scan`` must agree with (the conformance suite checks).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]


@dataclass(frozen=True, slots=True)
class Scored:
    """Position of a node in the scanned arrays, with its terms."""

    position: int
    similarity: float
    failure: bool
    score: float


def similarities(matrix: F32, query: F32) -> F32:
    """``cos(query, row)`` of every row (rows and query L2-normalised), in float32.

    One dot product per row (``np.vecdot``): the result for a row does not depend on the other
    rows of ``matrix``, its position among them, or the memory alignment of the copy.
    """
    sims: F32 = np.vecdot(matrix, query.astype(np.float32, copy=False))
    return sims


def top_k(
    matrix: F32,
    failures: npt.NDArray[np.bool_],
    depths: npt.NDArray[np.int32],
    query: F32,
    *,
    penalty: float,
    k: int = 1,
) -> list[Scored]:
    """Best ``k`` rows of ``matrix`` for ``query`` under the penalised score.

    ``matrix`` holds one L2-normalised row per node in insertion order; ``failures`` and ``depths``
    are aligned with it. Returns at most ``k`` entries, best first, with the tie rule above.

    The answer depends only on the rows' own values: scanning any subset that holds every row
    scoring at least the ``k``-th best score gives the same result (positions of the subset,
    which keep the rows' relative order). ``store.index`` uses this to re-score candidates.

    Complexity: O(n*d) for the similarities plus O(n) selection (O(n + k log k) for k > 1).
    """
    n = matrix.shape[0]
    if n == 0 or k <= 0:
        return []
    sims = similarities(matrix, query)
    scores = sims - np.float32(penalty) * failures.astype(np.float32)
    if k == 1:
        best = float(scores.max())
        tied = np.flatnonzero(scores == best)
        order = tied[np.lexsort((-tied, depths[tied]))][:1]
    else:
        k = min(k, n)
        part = np.argpartition(-scores, k - 1)[:k] if k < n else np.arange(n)
        # Widen to every row tied with the k-th score so the tie rule decides, not argpartition.
        kth = float(scores[part].min())
        pool = np.flatnonzero(scores >= kth)
        order = pool[np.lexsort((-pool, depths[pool], -scores[pool]))][:k]
    return [
        Scored(int(i), float(sims[i]), bool(failures[i]), float(scores[i])) for i in order
    ]


def score(similarity: float, failure: bool, penalty: float) -> float:
    """``similarity - penalty * [failure]`` for one node, in the float32 arithmetic of
    :func:`top_k` (which computes the same formula over a whole tree at once), so a score
    computed here equals the one a scan gives the same node."""
    if not failure:
        return float(np.float32(similarity))
    return float(np.float32(similarity) - np.float32(penalty))


def penalised(similarity: float, penalty: float) -> float:
    """The score of a failure with ``similarity`` (:func:`score`), so that a node re-scored as
    a failure ties exactly with a failure node of the same vector."""
    return score(similarity, True, penalty)


def accepts(score: float, threshold: float) -> bool:
    """Whether a best score clears the tree's retrieval threshold."""
    return score >= threshold
