"""Whole-space integrity: the tree rules of ``core`` plus what only a store holds (vectors).

``deltamem check`` reports every problem found here, and an import is refused when its records
would create any of them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from deltamem.core.tree import forest_problems
from deltamem.errors import StoreError
from deltamem.store.base import UNIT_TOLERANCE, SpaceInfo, Store

# float32 embeddings normalised in float32 land within ~1e-6 of unit norm; 1e-3 leaves room for
# any embedder while refusing a vector that would dominate (or vanish from) every dot product.
NORM_TOLERANCE = UNIT_TOLERANCE
_BATCH = 500  # vectors read per round trip


def vector_problem(vector: Any, dim: int) -> str | None:
    """Why ``vector`` cannot be stored in a ``dim``-d space (None when it can).

    A stored vector is finite and of unit norm, or all zeros (the vector of an empty key).
    """
    v = np.asarray(vector)
    if v.shape != (dim,):
        return f"vector has shape {v.shape}; the space is {dim}-d"
    if not np.isfinite(v).all():
        return "vector holds NaN or infinite values"
    norm = float(np.linalg.norm(v.astype(np.float64)))
    if norm != 0.0 and abs(norm - 1.0) > NORM_TOLERANCE:
        return f"vector norm is {norm:.6g}, not 1"
    return None


def sound_rows(vectors: Any, dim: int) -> bool:
    """Whether every row of ``vectors`` (``(n, dim)``) is certainly free of a
    :func:`vector_problem`, checked at once: finite, and of a norm within the tolerance less a
    margin (so that a row passing here passes :func:`vector_problem`'s own norm too), or
    zero. ``False`` says only that some row must be checked one by one."""
    v = np.asarray(vectors)
    if v.ndim != 2 or v.shape[1] != dim or not np.isfinite(v).all():
        return False
    norms = np.linalg.norm(v.astype(np.float64), axis=1)
    return bool(((norms == 0.0) | (np.abs(norms - 1.0) <= NORM_TOLERANCE - 1e-9)).all())


def space_info(store: Store, space: str) -> SpaceInfo | None:
    """The space's record, or None when the store has no such space."""
    return next((s for s in store.spaces() if s.space == space), None)


def space_problems(store: Store, space: str, *, max_depth: int) -> list[str]:
    """Every integrity problem of ``space`` as ``"<node id>: <problem>"`` (empty when sound)."""
    info = space_info(store, space)
    if info is None:
        return []
    nodes = list(store.nodes(space))
    problems = [f"{i}: {p}" for i, p in forest_problems(nodes, max_depth=max_depth)]
    for start in range(0, len(nodes), _BATCH):
        ids = [n.id for n in nodes[start : start + _BATCH]]
        for node_id, problem in _vector_problems(store, space, ids, info.dim):
            problems.append(f"{node_id}: {problem}")
    return problems


def _vector_problems(store: Store, space: str, ids: list[str],
                     dim: int) -> list[tuple[str, str]]:
    try:
        vectors = store.vectors(space, ids)
    except StoreError:  # a stored vector of the wrong width: find which, one by one
        found: list[tuple[str, str]] = []
        for node_id in ids:
            try:
                store.vectors(space, [node_id])
            except StoreError as exc:
                found.append((node_id, str(exc)))
        return found
    out = []
    for node_id in ids:
        problem = vector_problem(vectors[node_id], dim) if node_id in vectors else "no vector"
        if problem:
            out.append((node_id, problem))
    return out
