"""An exact in-memory vector index for one (space, tree), kept in step with its store.

Rows are appended in insertion order into capacity-doubling numpy buffers, so learning one node
costs O(d) amortised instead of rebuilding the matrix (the reference code re-stacks every node's
vector at every query). Scans call :func:`deltamem.core.scoring.top_k`, the reference semantics.

Small scans run BLAS on one thread: a matrix-vector product over a few thousand rows takes
~0.1 ms on one core, but a multi-threaded BLAS call waits for its second thread to be scheduled,
and on a busy 2-core machine that wait was measured at ~20 ms (200x). Large scans are memory-
bandwidth bound and keep the library's default threads.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

import numpy as np

from deltamem.core.scoring import top_k
from deltamem.store.base import Candidate, Vector

A = TypeVar("A", bound=np.ndarray[Any, Any])
SINGLE_THREAD_ROWS = 50_000
_blas: Any = None


def _one_blas_thread() -> Any:
    global _blas
    if _blas is None:
        from threadpoolctl import ThreadpoolController

        _blas = ThreadpoolController()
    return _blas.limit(limits=1, user_api="blas")


class VectorIndex:
    """Append-only exact index; ``last_seq`` says how far it has read its store."""

    def __init__(self, dim: int, capacity: int = 1024):
        self.dim = dim
        self.size = 0
        self.last_seq = 0
        self.ids: list[str] = []
        self._matrix = np.zeros((capacity, dim), dtype=np.float32)
        self._failures = np.zeros(capacity, dtype=bool)
        self._depths = np.zeros(capacity, dtype=np.int32)

    def extend(self, rows: Iterable[tuple[int, str, bool, int, Vector]]) -> None:
        """Append ``(seq, id, failure, depth, vector)`` rows in increasing ``seq`` order."""
        for seq, node_id, failure, depth, vector in rows:
            if self.size == self._matrix.shape[0]:
                self._grow()
            self._matrix[self.size] = vector
            self._failures[self.size] = failure
            self._depths[self.size] = depth
            self.ids.append(node_id)
            self.size += 1
            self.last_seq = max(self.last_seq, seq)

    def _grow(self) -> None:
        cap = max(1024, self._matrix.shape[0] * 2)
        self._matrix = _resized(self._matrix, cap)
        self._failures = _resized(self._failures, cap)
        self._depths = _resized(self._depths, cap)

    def scan(self, query: Vector, *, penalty: float, k: int) -> list[Candidate]:
        args = (self._matrix[: self.size], self._failures[: self.size], self._depths[: self.size])
        if self.size < SINGLE_THREAD_ROWS:
            with _one_blas_thread():
                hits = top_k(*args, query, penalty=penalty, k=k)
        else:
            hits = top_k(*args, query, penalty=penalty, k=k)
        return [
            Candidate(self.ids[h.position], h.similarity, h.failure,
                      int(self._depths[h.position]), h.score)
            for h in hits
        ]


def _resized(a: A, rows: int) -> A:
    out: A = np.zeros((rows, *a.shape[1:]), dtype=a.dtype)  # type: ignore[assignment]
    out[: a.shape[0]] = a
    return out


def to_blob(vector: Vector) -> bytes:
    """Vectors are stored as raw little-endian float32 bytes."""
    return np.asarray(vector, dtype="<f4").tobytes()


def from_blob(blob: bytes, dim: int) -> Vector:
    vector = np.frombuffer(blob, dtype="<f4")
    if vector.shape[0] != dim:
        raise ValueError(f"stored vector has {vector.shape[0]} dimensions, expected {dim}")
    return vector.astype(np.float32)
