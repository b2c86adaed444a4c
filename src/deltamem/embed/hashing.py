"""Feature-hashing embedder. TEST DOUBLE ONLY - never use it for a real memory.

**This is not a language model.** It maps words and word pairs to random signed coordinates, so
two texts are similar only when they share surface words: "heat the apple" and "warm the apple"
are similar through "the apple", but "heat" and "warm" mean nothing to it. It exists so that unit
tests can exercise retrieval deterministically, in microseconds, without model weights. Product
code must pick a real embedder (``minilm``, ``static`` or ``st:<model>``).

Hashing uses blake2b rather than Python's ``hash()``, whose per-process salt would make vectors
differ between runs (and between a writer and a reader of the same store).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from deltamem.embed.base import Vectors, l2_normalise

_WORD = re.compile(r"[a-z0-9]+")
# Bigrams count for less than words: they add word-order signal without drowning the overlap.
_BIGRAM_WEIGHT = 0.5


@lru_cache(maxsize=65536)
def _buckets(feature: str, dim: int) -> tuple[tuple[int, float], ...]:
    """Stable ``(index, sign)`` slots of a feature in a ``dim``-wide vector.

    Each feature gets two slots from independent halves of its digest: with one slot, two words
    of a short text that collide with opposite signs cancel out completely (1 in ``dim`` pairs),
    which makes tests flaky across wordings; two slots make a full cancellation negligible.
    """
    raw = hashlib.blake2b(feature.encode("utf-8"), digest_size=16).digest()
    slots = []
    for half in (raw[:8], raw[8:]):
        digest = int.from_bytes(half, "little")
        # The top bit picks the sign so that collisions cancel on average instead of piling up.
        slots.append((digest % dim, 1.0 if (digest >> 63) & 1 else -1.0))
    return tuple(slots)


class HashingEmbedder:
    """TESTS ONLY: deterministic hashed bag of word unigrams and bigrams, L2-normalised.

    See the module docstring: shared words raise cosine similarity, synonyms do not.

    Args:
        dim: vector width (default 256).
    """

    def __init__(self, dim: int = 256):
        """Set the width; ``name`` records it, so two widths are never mixed in one store."""
        if dim < 1:
            raise ValueError(f"dim must be positive, got {dim}")
        self.dim = dim
        self.name = f"hashing-{dim}"

    def _features(self, text: str) -> list[tuple[str, float]]:
        words = _WORD.findall(text.lower())
        feats = [(w, 1.0) for w in words]
        feats += [(f"{a} {b}", _BIGRAM_WEIGHT) for a, b in zip(words, words[1:], strict=False)]
        return feats

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts`` into ``(len(texts), dim)`` unit (or zero, for wordless text) vectors."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature, weight in self._features(text):
                for index, sign in _buckets(feature, self.dim):
                    out[row, index] += sign * weight
        return l2_normalise(out)
