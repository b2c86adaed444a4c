"""LLM providers behind one small protocol, and a factory that picks one by name.

Providers are imported lazily so that ``import deltamem`` never needs httpx or llama-cpp-python.
"""

from __future__ import annotations

import inspect
from typing import Any

from deltamem.config import llm_endpoint
from deltamem.errors import ConfigError
from deltamem.llm.base import LLM, Completion, Message

__all__ = ["LLM", "PROVIDERS", "Completion", "Message", "make_llm"]

PROVIDERS: tuple[str, ...] = ("local", "openai", "anthropic")
_BUDGET_OPTIONS = ("max_tokens_per_call", "max_tokens_total")


def make_llm(spec: str = "local", **options: Any) -> LLM:
    """Build an LLM from a provider name and options.

    Args:
        spec: ``"local"`` (in-process llama.cpp, SmolLM2 by default), ``"openai"`` (any
            OpenAI-compatible server), ``"anthropic"`` (Anthropic's Messages API, natively) or
            ``"openai:<model>"`` / ``"anthropic:<model>"`` as a shorthand for the model.
        **options: Passed to the provider's constructor (``LlamaCppLLM``, ``OpenAICompatLLM``
            or ``AnthropicLLM``). For ``"openai"`` and ``"anthropic"``, ``base_url``, ``model``
            and ``api_key`` default to ``DELTAMEM_LLM_BASE_URL``, ``DELTAMEM_LLM_MODEL`` and
            ``DELTAMEM_LLM_API_KEY``; ``anthropic``'s base URL defaults to
            ``https://api.anthropic.com``. ``max_tokens_per_call`` / ``max_tokens_total`` wrap
            the result in a :class:`~deltamem.llm.budget.BudgetedLLM`.

    Raises:
        ConfigError: unknown provider, unknown option, a missing base_url/model, or no key for
            api.anthropic.com.
    """
    budget = {k: options.pop(k) for k in _BUDGET_OPTIONS if k in options}
    name, _, suffix = (spec or "").strip().partition(":")
    name = name.lower()
    llm: LLM
    if name == "local":
        if suffix:
            options.setdefault("model_path", suffix)
        llm = _construct("local", _local_cls(), options)
    elif name in ("openai", "anthropic"):
        if suffix:
            options.setdefault("model", suffix)
        for key, value in llm_endpoint().items():
            if value is not None:
                options.setdefault(key, value)
        # Anthropic's own API is the anthropic provider's default endpoint; openai has none.
        required = ("base_url", "model") if name == "openai" else ("model",)
        missing = [k for k in required if not options.get(k)]
        if missing:
            raise ConfigError(
                f"the {name} provider needs {' and '.join(missing)}: pass "
                + ", ".join(f"{k}=..." for k in missing)
                + " or set "
                + " and ".join(f"DELTAMEM_LLM_{k.upper()}" for k in missing)
            )
        llm = _construct(name, _openai_cls() if name == "openai" else _anthropic_cls(), options)
    else:
        raise ConfigError(f"unknown LLM provider {spec!r}; choose one of {', '.join(PROVIDERS)}")
    if budget:
        from deltamem.llm.budget import BudgetedLLM

        llm = BudgetedLLM(llm, **budget)
    return llm


def _construct(label: str, cls: Any, options: dict[str, Any]) -> LLM:
    accepted = set(inspect.signature(cls).parameters)
    unknown = sorted(set(options) - accepted)
    if unknown:
        raise ConfigError(
            f"unknown option(s) {', '.join(unknown)} for the {label} LLM provider; "
            f"it takes {', '.join(sorted(accepted | set(_BUDGET_OPTIONS)))}"
        )
    llm: LLM = cls(**options)
    return llm


def _local_cls() -> Any:
    from deltamem.llm.llamacpp import LlamaCppLLM

    return LlamaCppLLM


def _anthropic_cls() -> Any:
    from deltamem.llm.anthropic import AnthropicLLM

    return AnthropicLLM


def _openai_cls() -> Any:
    from deltamem.llm.openai_compat import OpenAICompatLLM

    return OpenAICompatLLM
