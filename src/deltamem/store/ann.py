"""Candidates for very large trees from an approximate index (faiss IVF, 8-bit codes).

Past a few hundred thousand rows per tree even the int8 exact scan (:mod:`deltamem.store.index`)
misses a 5 ms budget, because it still reads every row. Above ``Settings.ann_from`` rows a tree's
index therefore also keeps a faiss ``IndexIVFScalarQuantizer`` (inner product, 8-bit codes): its
coarse centroids are trained once, by k-means on a sample of the rows the index holds when it
first crosses the threshold; every later row is added to it incrementally. A scan asks it for
:data:`CANDIDATES` rows (more for larger ``k``) by approximate raw similarity from the
:data:`probes` closest lists, and those rows are re-scored exactly in float32 with
``core.scoring.top_k`` (failure penalty, tie order) like every other scan. So the answer is the
exact answer whenever the exact best rows are among the candidates, and otherwise the best of
the candidates: this is the one scan in deltamem that is approximate, and only above the
threshold. ``benchmarks/scale.py`` measures how often it matches the exact scan.

The index is rebuilt (trained and filled) from the exact index's rows when a process first scans
a large tree, not persisted: the exact rows are read from the store on open anyway, and a
rebuilt index can never be stale. faiss is the ``ann`` extra; without it large trees are scanned
exactly (the correct answer, only slower), which is logged once per process.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np
import numpy.typing as npt

log = logging.getLogger("deltamem.store")

CANDIDATES = 128  # rows re-scored exactly per scan (at least 2k for a top-k scan)
TRAIN_PER_LIST = 40  # k-means sample: rows per coarse centroid (faiss warns under 39)
PROBE_SHARE = 16  # probe 1/16 of the lists (at least PROBES_MIN)
PROBES_MIN = 16
KMEANS_ITERATIONS = 10
_faiss: Any = None
_reported = False


def load_faiss() -> Any | None:
    """The faiss module, or None (logged once per process) when the ``ann`` extra is absent."""
    global _faiss, _reported
    if _faiss is None:
        try:
            import faiss
        except ImportError:
            if not _reported:
                _reported = True
                log.warning("a tree has more rows than ann_from but faiss is not installed "
                            "(pip install 'deltamem[ann]'): scanning it exactly")
            return None
        _faiss = faiss
    return _faiss


class IvfCandidates:
    """An IVF index over rows ``0..n-1`` of a matrix; its ids are the row positions."""

    def __init__(self, faiss: Any, rows: npt.NDArray[np.float32]):
        n, dim = rows.shape
        self.lists = max(1, min(int(math.sqrt(n)), n // TRAIN_PER_LIST))
        self.probes = min(self.lists, max(PROBES_MIN, self.lists // PROBE_SHARE))
        quantizer = faiss.IndexFlatIP(dim)
        self._index = faiss.IndexIVFScalarQuantizer(
            quantizer, dim, self.lists, faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT)
        self._index.cp.niter = KMEANS_ITERATIONS
        self._quantizer = quantizer  # the IVF index does not own it
        sample = np.random.default_rng(0).choice(n, min(n, self.lists * TRAIN_PER_LIST),
                                                 replace=False)
        self._index.train(np.ascontiguousarray(rows[np.sort(sample)]))
        self._index.nprobe = self.probes
        self.add(rows)

    @property
    def size(self) -> int:
        return int(self._index.ntotal)

    def add(self, rows: npt.NDArray[np.float32]) -> None:
        """Append rows; they get the next positions."""
        if rows.shape[0]:
            self._index.add(np.ascontiguousarray(rows, dtype=np.float32))

    def candidates(self, query: npt.NDArray[np.float32], k: int) -> npt.NDArray[np.intp]:
        """Ascending positions of the rows the index finds closest to ``query``."""
        count = max(CANDIDATES, 2 * k)
        _, found = self._index.search(np.ascontiguousarray(query[None, :], dtype=np.float32),
                                      count)
        ids = found[0]
        return np.sort(ids[ids >= 0]).astype(np.intp)
