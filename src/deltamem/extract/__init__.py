"""Extractors turn an episode into experiences: ``trace`` (no model) or ``llm``."""

from __future__ import annotations

from typing import Any

from deltamem.errors import ConfigError
from deltamem.extract.base import Extraction, Extractor, ExtractRequest
from deltamem.extract.trace import TraceExtractor
from deltamem.scenes.base import Scene

__all__ = ["Extraction", "ExtractRequest", "Extractor", "TraceExtractor", "make_extractor"]


def make_extractor(spec: str = "trace", *, llm: Any = None,
                   scene: Scene | None = None) -> Extractor:
    """Build an extractor by name.

    Args:
        spec: ``"trace"`` or ``"llm"``.
        llm: for ``"llm"``: an LLM object, or a spec for :func:`deltamem.llm.make_llm`
            (``"local"`` when omitted).
        scene: for ``"trace"``: the scene plug-in that reads facts off observations
            (``deltamem.scenes``; the text-game scene when omitted).
    """
    if spec == "trace":
        return TraceExtractor(scene=scene)
    if spec == "llm":
        from deltamem.extract.llm import LLMExtractor
        from deltamem.llm import make_llm

        model = make_llm(llm or "local") if llm is None or isinstance(llm, str) else llm
        return LLMExtractor(model)
    raise ConfigError(f"unknown extractor {spec!r}; choose 'trace' or 'llm'")
