"""The embedder port."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

Vectors = npt.NDArray[np.float32]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors of shape ``(len(texts), dim)``.

    ``name`` identifies the model *and* its settings (e.g. ``"minilm"``): a memory records it and
    refuses to mix vectors from two embedders. Empty text embeds to the zero vector.
    """

    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> Vectors: ...


def l2_normalise(x: Vectors) -> Vectors:
    """Row-wise L2 normalisation; zero rows stay zero."""
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    norms[norms == 0.0] = 1.0
    out: Vectors = (x / norms).astype(np.float32, copy=False)
    return out
