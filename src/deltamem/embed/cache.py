"""A bounded cache of embeddings, so a repeated task or scene is embedded once.

Agents recall the same goal and the same room again and again (every retry of a task, every
episode in a known environment); with MiniLM the query embedding costs far more than the scan.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from deltamem.embed.base import Embedder, Vectors

DEFAULT_ENTRIES = 4096  # ~6 MB of 384-d float32 vectors


class EmbeddingCache:
    """Least-recently-used embeddings keyed by ``(embedder.name, text)``.

    The embedder's ``name`` identifies its model and settings (see :class:`Embedder`), so two
    embedders never share entries. Cached vectors are read-only; :meth:`embed` returns a fresh
    array. Safe to share between threads.

    Args:
        max_entries: most texts kept; 0 turns the cache off.
    """

    def __init__(self, max_entries: int = DEFAULT_ENTRIES):
        if max_entries < 0:
            raise ValueError(f"max_entries must be >= 0, got {max_entries}")
        self.max_entries = max_entries
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[tuple[str, str], Vectors] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def embed(self, embedder: Embedder, texts: Sequence[str]) -> tuple[Vectors, int]:
        """Vectors of ``texts`` (as ``embedder.embed`` returns them) and how many were computed.

        The texts not in the cache go to the embedder in one call (one batched forward pass).
        """
        out = np.zeros((len(texts), embedder.dim), dtype=np.float32)
        missing: dict[str, list[int]] = {}
        with self._lock:
            for i, text in enumerate(texts):
                vector = self._entries.get((embedder.name, text))
                if vector is None:
                    missing.setdefault(text, []).append(i)
                else:
                    self._entries.move_to_end((embedder.name, text))
                    out[i] = vector
            self.hits += len(texts) - sum(len(rows) for rows in missing.values())
            self.misses += len(missing)
        if not missing:
            return out, 0
        fresh = embedder.embed(list(missing))
        with self._lock:
            for vector, (text, rows) in zip(fresh, missing.items(), strict=True):
                out[rows] = vector
                if self.max_entries:
                    kept = vector.copy()
                    kept.setflags(write=False)
                    self._entries[(embedder.name, text)] = kept
                    self._entries.move_to_end((embedder.name, text))
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        return out, len(missing)
