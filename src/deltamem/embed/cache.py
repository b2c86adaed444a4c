"""A bounded cache of embeddings, so a repeated task or scene is embedded once.

Agents recall the same goal and the same room again and again (every retry of a task, every
episode in a known environment); with MiniLM the query embedding costs far more than the scan.

A process may keep some of its vectors for the next one (:meth:`EmbeddingCache.save`,
:meth:`EmbeddingCache.load`): the hook daemon keeps the gists of a project's past tasks, which
the first prompt of a session would otherwise embed while the user waits. The file holds
vectors keyed by a digest of the embedder's name and the text, never the text.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
import zipfile
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from deltamem.embed.base import Embedder, Vectors

DEFAULT_ENTRIES = 4096  # ~6 MB of 384-d float32 vectors
DIGEST_SIZE = 16


def digest(name: str, text: str) -> bytes:
    """The key a kept vector is found by: the embedder's name and the text, hashed."""
    return hashlib.blake2b(f"{name}\0{text}".encode("utf-8", "surrogatepass"),
                           digest_size=DIGEST_SIZE).digest()


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
        # Vectors loaded from a file (:meth:`load`), found by :func:`digest`.
        self._kept: dict[bytes, Vectors] = {}
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
                if vector is None and self._kept:
                    vector = self._kept.get(digest(embedder.name, text))
                    if vector is not None and vector.shape != (embedder.dim,):
                        vector = None  # kept by another embedder of the same name: not ours
                    if vector is not None and self.max_entries:
                        self._entries[(embedder.name, text)] = vector
                if vector is None:
                    missing.setdefault(text, []).append(i)
                else:
                    self._entries.move_to_end((embedder.name, text))
                    out[i] = vector
            self.hits += len(texts) - sum(len(rows) for rows in missing.values())
            self.misses += len(missing)
            self._trim()
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
            self._trim()
        return out, len(missing)

    def _trim(self) -> None:
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def save(self, path: str | os.PathLike[str], embedder: str, texts: Iterable[str]) -> int:
        """Keep the vectors of ``texts`` that this cache holds for the embedder named
        ``embedder`` in ``path`` for another process (:meth:`load`), with those loaded or
        saved before (at most ``max_entries``, the newest kept); returns how many the file
        holds, or 0 where nothing new was to be kept (the file is then left as it is). The
        file has digests and vectors, no text; it is written beside ``path`` and renamed into
        place, readable by the user alone.

        Raises:
            OSError: the file cannot be written.
        """
        added = False
        with self._lock:
            for text in texts:
                vector = self._entries.get((embedder, text))
                if vector is not None:
                    key = digest(embedder, text)
                    added |= key not in self._kept
                    self._kept.pop(key, None)  # re-inserted: the newest last
                    self._kept[key] = vector
            while len(self._kept) > self.max_entries:
                self._kept.pop(next(iter(self._kept)))
            rows = list(self._kept.items())
        if not added:
            return 0
        shape = rows[-1][1].shape  # one embedder's vectors per file: those of the newest
        keys = [key for key, vector in rows if vector.shape == shape]
        vectors = [vector for _, vector in rows if vector.shape == shape]
        target = Path(path)
        fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=".", suffix=".npz")
        try:
            with os.fdopen(fd, "wb") as out:  # mkstemp: mode 0600
                np.savez(out, digests=np.frombuffer(b"".join(keys), dtype=np.uint8).reshape(
                    len(keys), DIGEST_SIZE), vectors=np.stack(vectors).astype(np.float32))
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        return len(keys)

    def load(self, path: str | os.PathLike[str]) -> int:
        """Add the vectors a :meth:`save` kept in ``path``; returns how many.

        Raises:
            OSError: the file cannot be read.
            ValueError: it is not a file :meth:`save` wrote.
        """
        try:
            with np.load(path, allow_pickle=False) as data:
                digests, vectors = data["digests"], data["vectors"]
        except (KeyError, EOFError, ValueError, zipfile.BadZipFile) as exc:
            raise ValueError(f"{path} holds no kept embeddings: {exc}") from None
        if digests.dtype != np.uint8 or digests.ndim != 2 or digests.shape[1] != DIGEST_SIZE \
                or vectors.dtype != np.float32 or vectors.ndim != 2 \
                or len(vectors) != len(digests):
            raise ValueError(f"{path} holds no kept embeddings (digests {digests.shape}, "
                             f"vectors {vectors.shape} {vectors.dtype})")
        vectors.setflags(write=False)
        with self._lock:
            for key, vector in zip(digests, vectors, strict=True):
                self._kept.setdefault(key.tobytes(), vector)
            while len(self._kept) > self.max_entries:
                self._kept.pop(next(iter(self._kept)))
        return len(digests)
