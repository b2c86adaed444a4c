"""Extractors turn an episode into experiences: ``trace`` (no model) or ``llm``."""

from __future__ import annotations

from deltamem.errors import ConfigError
from deltamem.extract.base import Extraction, Extractor, ExtractRequest
from deltamem.extract.trace import TraceExtractor
from deltamem.llm.base import LLM
from deltamem.scenes.base import Scene

__all__ = ["Extraction", "ExtractRequest", "Extractor", "TraceExtractor", "make_extractor"]


def make_extractor(spec: str | Extractor = "trace", *, llm: LLM | str | None = None,
                   base_url: str | None = None, model: str | None = None,
                   api_key: str | None = None, scene: Scene | None = None) -> Extractor:
    """The extractor ``spec`` names. Every entry point resolves its extractor here:
    ``DeltaMem.open``, the CLI's model flags, the server's spaces, the coding hooks' environment
    and the LangGraph store.

    Args:
        spec: ``"trace"`` (no model), ``"llm"``, or an :class:`Extractor` (returned as it is).
        llm: for ``"llm"``: an LLM object, or a provider spec for :func:`deltamem.llm.make_llm`
            (``"local"``, ``"local:<gguf path>"``, ``"openai"``, ``"anthropic[:<model>]"``).
            Omitted: ``"openai"`` when ``base_url`` is given, else ``"local"``.
        base_url: the endpoint of a hosted provider (``openai``, ``anthropic``); by default
            ``DELTAMEM_LLM_BASE_URL`` (read by ``make_llm``). A local model takes none.
        model: the hosted provider's model name (default ``DELTAMEM_LLM_MODEL``), or the GGUF
            file of a local model.
        api_key: the hosted provider's key (default ``DELTAMEM_LLM_API_KEY``).
        scene: for ``"trace"``: the scene plug-in that reads facts off observations
            (``deltamem.scenes``; left None, the scene of the memory that asks).

    Raises:
        ConfigError: an unknown extractor or provider, a base URL for the local model, or what
            ``make_llm`` refuses (a hosted provider with no endpoint or model).
    """
    if not isinstance(spec, str):
        return spec
    name = spec.strip().lower()
    if name == "trace":
        return TraceExtractor(scene=scene)
    if name != "llm":
        raise ConfigError(f"unknown extractor {spec!r}; choose 'trace' or 'llm'")
    from deltamem.extract.llm import LLMExtractor

    if llm is None or isinstance(llm, str):
        llm = _model(llm or ("openai" if base_url else "local"), base_url, model, api_key)
    return LLMExtractor(llm)


def _model(provider: str, base_url: str | None, model: str | None,
           api_key: str | None) -> LLM:
    from deltamem.llm import make_llm

    if provider.strip().lower().partition(":")[0] == "local":
        if base_url:
            raise ConfigError(f"the local model runs in process and takes no base URL "
                              f"(got {base_url!r}); choose --llm openai or anthropic for an "
                              "endpoint")
        return make_llm(provider, **({"model_path": model} if model else {}))
    endpoint = (("base_url", base_url), ("model", model), ("api_key", api_key))
    return make_llm(provider, **{k: v for k, v in endpoint if v})
