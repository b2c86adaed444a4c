"""An exact in-memory vector index for one (space, tree), kept in step with its store.

Rows are appended in insertion order into capacity-doubling numpy buffers, so learning one node
costs O(d) amortised instead of rebuilding the matrix (the reference code re-stacks every node's
vector at every query).

**Quantized exact scan.** A float32 scan of 100k x 384 streams 154 MB per query and is bound by
memory bandwidth. So each row is also kept as int8 codes ``c`` with a per-row scale ``s``
(``v ~ s*c``, 4x smaller), the query is quantized the same way (``q ~ t*d``), and a scan first
computes the approximate score of every row from the integer dot products ``c . d`` (exact in the
int8 kernel), then re-scores exactly, with :func:`deltamem.core.scoring.top_k`, only the rows that
could reach the answer. The error bound that decides "could": with ``e = v - s*c`` and
``e_q = q - t*d``::

    q.v - t*s*(c.d) = q.e + e_q.(s*c)           (exact algebra)
    |q.v - t*s*(c.d)| <= |q| R + |e_q| W          (Cauchy-Schwarz; R = max |e|, W = max |s*c|)

The float32 similarity the reference computes (one dot product of ``d`` terms) is within
``gamma_d |q| N`` of the real ``q.v`` (``N = max |v|``, ``gamma_d = d u / (1 - d u)``,
``u = 2^-24``), and the float32 penalty subtraction and the approximate score's own float32 ops
add a few ulps, so every row's approximate score ``A_i`` is within one bound ``B`` (the sum of
those terms plus a margin) of its exact score. With ``L`` the ``k``-th largest ``A``, at least
``k`` rows score exactly ``>= L - B``; a row with ``A_i < L - 2B`` scores exactly ``< L - B`` and
can neither be in the top ``k`` nor tie with its last member. Every other row is re-scored
exactly, and ``top_k`` on that subset returns exactly the full scan's answer (see
``core.scoring``): the same nodes, scores, ties and order, so thresholds and failure penalties
decide exactly as before. For 384-d unit vectors ``B`` is ~0.02; on random unit vectors 10-70
rows of 50k are re-scored. When the bound admits more than a quarter of the rows (a query of
zeros, a tree of near-copies), the scan falls back to the plain float32 scan: same answer.

Small indexes (under ``quantize_from`` rows) scan float32 directly: there the per-call overhead of
quantizing the query is larger than the saving.

**Approximate candidates.** A scan that passes ``approximate_from`` and finds more rows than that
takes its candidates from an IVF index instead (:mod:`deltamem.store.ann`, built on first use and
kept in step by :meth:`VectorIndex.extend`), re-scored exactly the same way. That answer is exact
only when the exact best rows are among the candidates; without faiss the scan stays exact.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from deltamem.core.scoring import Scored, top_k
from deltamem.errors import StoreError
from deltamem.store.ann import IvfCandidates, load_faiss
from deltamem.store.base import Candidate, Vector

A = TypeVar("A", bound=np.ndarray[Any, Any])
QUANTIZE_FROM = 2048  # rows; below it the float32 scan is as fast (benchmarks/recall.py)
_U = 2.0**-24  # float32 unit roundoff
_LEVELS = 127  # symmetric int8 codes in [-127, 127]
_CHUNK = 512  # rows quantized at a time
_FALLBACK_SHARE = 4  # re-score everything when more than 1/4 of the rows are candidates
_kernel: Any = None


def _int8_dots(codes: npt.NDArray[np.int8], query: npt.NDArray[np.int8]) -> npt.NDArray[np.float32]:
    """``codes @ query`` with int32 accumulation (exact), as float32 (exact below 2^24)."""
    global _kernel
    if _kernel is None:
        import numkong

        _kernel = numkong
    out = _kernel.cdist(query[None, :], codes, metric="dot", dtype="int8", out_dtype="float32")
    dots: npt.NDArray[np.float32] = np.asarray(out).reshape(-1)
    return dots


class VectorIndex:
    """Append-only exact index of one tree's rows, in insertion order."""

    def __init__(self, dim: int, capacity: int = 1024, *, quantize_from: int = QUANTIZE_FROM):
        self.dim = dim
        self.size = 0
        self.ids: list[str] = []
        self.quantize_from = quantize_from
        self._matrix = np.zeros((capacity, dim), dtype=np.float32)
        self._failures = np.zeros(capacity, dtype=bool)
        self._depths = np.zeros(capacity, dtype=np.int32)
        self._codes = np.zeros((capacity, dim), dtype=np.int8)
        self._scales = np.zeros(capacity, dtype=np.float32)
        # Maxima over rows of |v - s*c|, |s*c| and |v|: the terms of the error bound.
        self._residual = 0.0
        self._decoded = 0.0
        self._norm = 0.0
        self.approximate: IvfCandidates | None = None  # built by the first approximate scan
        if dim * _LEVELS * _LEVELS >= 2**24:
            raise ValueError(f"{dim}-d int8 dot products would not be exact in float32")

    def extend(self, rows: Iterable[tuple[str, bool, int, Vector]]) -> None:
        """Append ``(id, failure, depth, vector)`` rows in insertion order."""
        start = self.size
        for node_id, failure, depth, vector in rows:
            if self.size == self._matrix.shape[0]:
                self._grow()
            self._matrix[self.size] = vector
            self._failures[self.size] = failure
            self._depths[self.size] = depth
            self.ids.append(node_id)
            self.size += 1
        if self.size > start:
            self._quantize(start, self.size)
            if self.approximate is not None:
                self.approximate.add(self._matrix[start:self.size])

    def adopt(self, *, ids: list[str], matrix: Any, codes: Any, scales: Any, failures: Any,
              depths: Any, bound: tuple[float, float, float]) -> None:
        """Take over the rows of a saved index (:mod:`deltamem.store.snapshot`) as they are:
        the arrays may be read-only memory maps, copied into growable buffers on the first
        append. ``bound`` is the saved (residual, decoded, norm) maxima of those rows."""
        self.ids = ids
        self.size = len(ids)
        self._matrix, self._codes, self._scales = matrix, codes, scales
        self._failures, self._depths = failures, depths
        self._residual, self._decoded, self._norm = (float(b) for b in bound)
        self.approximate = None

    def _grow(self) -> None:
        cap = max(1024, self._matrix.shape[0] * 2)
        self._matrix = _resized(self._matrix, cap)
        self._failures = _resized(self._failures, cap)
        self._depths = _resized(self._depths, cap)
        self._codes = _resized(self._codes, cap)
        self._scales = _resized(self._scales, cap)

    def _quantize(self, lo: int, hi: int) -> None:
        """Int8 codes and scales of rows ``lo:hi``, and the bound's maxima over them."""
        for start in range(lo, hi, _CHUNK):  # chunks keep the float64 temporaries in cache
            end = min(start + _CHUNK, hi)
            block = self._matrix[start:end]
            scales = (np.abs(block).max(axis=1) / _LEVELS).astype(np.float32)
            scales[scales == 0] = 1.0  # a zero row: codes 0, decoded exactly
            codes = np.clip(np.rint(block / scales[:, None]), -_LEVELS, _LEVELS)
            self._codes[start:end] = codes
            self._scales[start:end] = scales
            # The maxima are measured in float64 on the codes actually stored.
            decoded = codes.astype(np.float64)
            decoded *= scales[:, None]
            exact = block.astype(np.float64)
            if not np.isfinite(exact).all():
                self._norm = math.inf  # no bound holds: every scan re-scores everything
            self._decoded = max(self._decoded, _max_norm(decoded))
            self._norm = max(self._norm, _max_norm(exact))
            exact -= decoded
            self._residual = max(self._residual, _max_norm(exact))

    def scan(self, query: Vector, *, penalty: float, k: int,
             approximate_from: int = 0) -> list[Candidate]:
        """The exact ``top_k`` over every row (see the module docstring for how); with more
        than ``approximate_from`` rows (0: never), the exact ``top_k`` of approximate
        candidates.

        Raises:
            StoreError: ``query`` is not a vector of the index's width.
        """
        return [c for c, _ in self._scan(query, penalty=penalty, k=k,
                                         approximate_from=approximate_from)]

    def scan_vectors(self, query: Vector, *, penalty: float, k: int,
                     approximate_from: int = 0) -> tuple[list[Candidate], dict[str, Vector]]:
        """:meth:`scan`, with a copy of each returned row's vector (by id), from the same
        pass: the float32, int8 and approximate paths all end in the rows they re-scored."""
        hits = self._scan(query, penalty=penalty, k=k, approximate_from=approximate_from)
        return [c for c, _ in hits], {c.id: self._matrix[p].copy() for c, p in hits}

    def _scan(self, query: Vector, *, penalty: float, k: int,
              approximate_from: int = 0) -> list[tuple[Candidate, int]]:
        """:meth:`scan`'s candidates, each with its row position."""
        if np.shape(query) != (self.dim,):
            raise StoreError(f"query vector has shape {np.shape(query)}; the space is "
                             f"{self.dim}-d")
        n = self.size
        matrix, failures, depths = self._matrix[:n], self._failures[:n], self._depths[:n]
        rows = None
        if k < n and 0 < approximate_from < n:
            rows = self._approximate(query, k)
        if rows is None and k < n and n >= self.quantize_from:
            rows = self._candidates(query, penalty, k)
        if rows is None:
            hits = top_k(matrix, failures, depths, query, penalty=penalty, k=k)
        else:
            found = top_k(matrix[rows], failures[rows], depths[rows], query, penalty=penalty, k=k)
            hits = [Scored(int(rows[h.position]), h.similarity, h.failure, h.score)
                    for h in found]
        return [
            (Candidate(self.ids[h.position], h.similarity, h.failure,
                       int(self._depths[h.position]), h.score), h.position)
            for h in hits
        ]

    def _approximate(self, query: Vector, k: int) -> npt.NDArray[np.intp] | None:
        """Ascending positions of the approximate index's candidates (None: scan exactly)."""
        q = np.asarray(query, dtype=np.float32)
        if not math.isfinite(self._norm) or not np.isfinite(q).all() or not q.any():
            return None  # no meaningful nearest rows: the exact scan decides
        if self.approximate is None:
            faiss = load_faiss()
            if faiss is None:
                return None
            self.approximate = IvfCandidates(faiss, self._matrix[: self.size])
        rows = self.approximate.candidates(q, k)
        return rows if rows.shape[0] else None

    def _candidates(self, query: Vector, penalty: float, k: int) -> npt.NDArray[np.intp] | None:
        """Ascending positions of every row that could be in the exact top ``k`` (or None)."""
        n = self.size
        q = np.asarray(query, dtype=np.float32)
        peak = float(np.abs(q).max()) if q.size else 0.0
        if not math.isfinite(peak) or peak == 0.0:
            return None
        step = peak / _LEVELS
        qcodes = np.clip(np.rint(q.astype(np.float64) / step), -_LEVELS, _LEVELS)
        q_err = float(np.linalg.norm(q.astype(np.float64) - qcodes * step))
        q_norm = float(np.linalg.norm(q.astype(np.float64)))
        approx = _int8_dots(self._codes[:n], qcodes.astype(np.int8))
        approx *= self._scales[:n]
        approx *= np.float32(step)
        approx -= self._failures[:n] * np.float32(penalty)
        gamma = self.dim * _U / (1 - self.dim * _U)
        magnitude = q_norm * (self._norm + self._decoded) + abs(penalty) + 1.0
        bound = (q_norm * self._residual + q_err * self._decoded + gamma * q_norm * self._norm
                 + 8 * _U * magnitude) * (1 + 1e-6) + 1e-6
        if not math.isfinite(bound):
            return None
        kth = float(approx.max()) if k == 1 else float(np.partition(approx, n - k)[n - k])
        rows = np.flatnonzero(approx >= kth - 2 * bound)
        return None if rows.shape[0] * _FALLBACK_SHARE > n else rows


def _max_norm(x: npt.NDArray[np.float64]) -> float:
    """Largest row L2 norm of ``x``."""
    return math.sqrt(float(np.einsum("ij,ij->i", x, x).max()))


def _resized(a: A, rows: int) -> A:
    out: A = np.zeros((rows, *a.shape[1:]), dtype=a.dtype)  # type: ignore[assignment]
    out[: a.shape[0]] = a
    return out


def to_blob(vector: Vector) -> bytes:
    """Vectors are stored as raw little-endian float32 bytes."""
    return np.asarray(vector, dtype="<f4").tobytes()
