"""Embedders: turn retrieval keys (task goals, scene descriptions) into unit vectors.

Choose one with :func:`make_embedder`:

========================  ==================================================================
spec                      embedder
========================  ==================================================================
``minilm`` (default)      all-MiniLM-L6-v2 (:class:`MiniLMEmbedder`), no torch; runs on
                          ONNX Runtime when installed, else numpy (``minilm:onnx``,
                          ``minilm:numpy`` pick one)
``minilm:int8``           the same network quantised to int8 weights (ONNX Runtime): faster,
                          an embedder of its own (``minilm-int8``, own thresholds)
``static``                MiniLM distilled to static token vectors (:class:`StaticEmbedder`)
``st:<model>``            any sentence-transformers model (needs the ``st`` extra)
``hashing[:<dim>]``       feature hashing - TEST DOUBLE ONLY (:class:`HashingEmbedder`)
========================  ==================================================================
"""

from __future__ import annotations

from deltamem.config import DEFAULT_EMBEDDER
from deltamem.embed.base import Embedder, Vectors, l2_normalise
from deltamem.embed.hashing import HashingEmbedder
from deltamem.embed.minilm import MiniLMEmbedder
from deltamem.embed.sentence_transformers import SentenceTransformerEmbedder
from deltamem.embed.static import StaticEmbedder
from deltamem.errors import ConfigError

CHOICES = ("minilm[:onnx|:numpy|:int8]", "static", "static-minilm", "st:<model>",
           "hashing[:<dim>]")

__all__ = [
    "CHOICES",
    "DEFAULT_EMBEDDER",
    "Embedder",
    "HashingEmbedder",
    "MiniLMEmbedder",
    "SentenceTransformerEmbedder",
    "StaticEmbedder",
    "Vectors",
    "l2_normalise",
    "make_embedder",
]


def make_embedder(spec: str = DEFAULT_EMBEDDER) -> Embedder:
    """Build the embedder named by ``spec``.

    Args:
        spec: ``"minilm"`` (default; ``"minilm:onnx"`` / ``"minilm:numpy"`` choose the runtime;
            ``"minilm:int8"`` is the quantised model, an embedder of its own),
            ``"static"`` / ``"static-minilm"``, ``"st:<model>"`` (a
            sentence-transformers model name or path), or ``"hashing"`` / ``"hashing:<dim>"``.
            ``hashing`` is a deterministic test double with no notion of meaning: use it in
            tests only, never for a real memory.

    Returns:
        An object satisfying :class:`Embedder`; heavy models load on first ``embed``.

    Raises:
        ConfigError: unknown spec, bad hashing width, or a missing optional dependency.
    """
    text = spec.strip()
    kind, _, arg = text.partition(":")
    kind = kind.lower()
    if kind == "minilm" and arg.strip().lower() in ("", "onnx", "numpy", "int8"):
        return MiniLMEmbedder(runtime=arg.strip().lower() or "auto")
    if kind in ("static", "static-minilm") and not arg:
        return StaticEmbedder()
    if kind == "st" and arg.strip():
        return SentenceTransformerEmbedder(arg.strip())
    if kind == "hashing":
        if not arg:
            return HashingEmbedder()
        if arg.isdigit() and int(arg) > 0:
            return HashingEmbedder(int(arg))
        raise ConfigError(f"bad hashing width {arg!r} in embedder {spec!r}; use e.g. 'hashing:256'")
    raise ConfigError(f"unknown embedder {spec!r}; choose one of: {', '.join(CHOICES)}")
