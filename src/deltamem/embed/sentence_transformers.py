"""Optional sentence-transformers backend (the ``st`` extra): any model it can load.

For example ``SentenceTransformerEmbedder("intfloat/e5-base-v2")`` reproduces the paper's
embedder; the paper used *no* query/passage prefixes, so ``prefix`` defaults to ``None``. The
library (and torch) is imported only when the first text is embedded.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Sequence
from typing import Any

import numpy as np

from deltamem.embed.base import Vectors, l2_normalise
from deltamem.errors import ConfigError, ProviderError

INSTALL_HINT = 'pip install "deltamem[st]"  (or: pip install sentence-transformers)'


def _available() -> bool:
    try:
        return importlib.util.find_spec("sentence_transformers") is not None
    except (ImportError, ValueError):  # ValueError: a module object without a spec
        return False


class SentenceTransformerEmbedder:
    """Embeds with a sentence-transformers model, L2-normalised, empty text to zero.

    Args:
        model_name: a name or local path that ``SentenceTransformer`` accepts.
        prefix: text prepended to every input (e.g. ``"query: "`` for e5); ``None`` for none.
        batch_size: texts per forward pass.
        device: torch device string; ``None`` lets the library choose.

    Raises:
        ConfigError: sentence-transformers is not installed (message gives the pip command).
    """

    def __init__(self, model_name: str, prefix: str | None = None, batch_size: int = 32,
                 device: str | None = None):
        """Check the extra is installed; defer the (slow) import and model load to first use."""
        if not _available():
            raise ConfigError(
                f"embedder 'st:{model_name}' needs sentence-transformers; install it with "
                f"`{INSTALL_HINT}`")
        self.model_name = model_name
        self.prefix = prefix
        self.batch_size = batch_size
        self.device = device
        # The prefix changes every vector, so it is part of the embedder's identity.
        self.name = f"st:{model_name}" + (f"|prefix={prefix!r}" if prefix else "")
        self._model: Any = None
        self._dim: int | None = None

    def _load(self) -> Any:
        if self._model is None:
            try:
                module = importlib.import_module("sentence_transformers")
            except ImportError as exc:
                raise ConfigError(f"cannot import sentence-transformers ({exc}); "
                                  f"reinstall with `{INSTALL_HINT}`") from exc
            try:
                self._model = module.SentenceTransformer(self.model_name, device=self.device)
            except Exception as exc:  # hub/network/file errors all surface the same way
                raise ProviderError(
                    f"could not load sentence-transformers model {self.model_name!r}: {exc}. "
                    "Offline, pass a local folder path instead of a hub name.") from exc
            actual = int(self._model.get_sentence_embedding_dimension())
            if self._dim is not None and self._dim != actual:
                raise ConfigError(f"model {self.model_name!r} makes {actual}-d vectors, "
                                  f"but dim={self._dim} was declared")
            self._dim = actual
        return self._model

    @property
    def dim(self) -> int:
        """Vector width: the declared one, else the model's (loading it the first time)."""
        if self._dim is None:
            self._load()
        assert self._dim is not None
        return self._dim

    @dim.setter
    def dim(self, value: int) -> None:
        # Declaring the width lets a store check compatibility without loading torch.
        self._dim = value

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts`` into ``(len(texts), dim)`` unit vectors (zero rows for empty texts)."""
        model = self._load()
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        keep = [i for i, t in enumerate(texts) if t.strip()]
        if keep:
            inputs = [(self.prefix or "") + texts[i] for i in keep]
            vecs = model.encode(inputs, batch_size=self.batch_size, convert_to_numpy=True,
                                normalize_embeddings=False, show_progress_bar=False)
            out[keep] = np.asarray(vecs, dtype=np.float32)
        return l2_normalise(out)
