"""``BudgetedLLM``, ``make_llm`` and the public LLM test doubles."""

from __future__ import annotations

import pytest

from deltamem.errors import BudgetExceeded, ConfigError, ProviderError
from deltamem.llm import PROVIDERS, make_llm
from deltamem.llm.base import LLM, Completion
from deltamem.llm.budget import BudgetedLLM, estimate_prompt_tokens, estimate_tokens
from deltamem.llm.openai_compat import OpenAICompatLLM
from deltamem.testing.llm import FunctionLLM, ScriptedLLM

MESSAGES = [{"role": "user", "content": "x" * 400}]  # ~100 tokens + 4 overhead


def test_estimates() -> None:
    """The estimate is a rounded-up 4 characters per token plus per-message overhead."""
    assert estimate_tokens("") == 0 and estimate_tokens("abcde") == 2
    assert estimate_prompt_tokens(MESSAGES) == 104


def test_per_call_budget_refuses_before_sending() -> None:
    """A call whose worst case exceeds the per-call budget never reaches the model."""
    inner = ScriptedLLM(["ok"])
    llm = BudgetedLLM(inner, max_tokens_per_call=150)
    with pytest.raises(BudgetExceeded, match="max_tokens_per_call=150"):
        llm.complete(MESSAGES, max_tokens=64)
    assert inner.calls == [] and llm.total_tokens == 0
    assert llm.complete(MESSAGES, max_tokens=40).text == "ok"
    assert isinstance(llm, LLM) and llm.name == "scripted"


def test_total_budget_tracks_reported_usage() -> None:
    """Reported usage accumulates, and the next call is refused once it could overspend."""
    inner = FunctionLLM(lambda m, s: Completion("done", prompt_tokens=100, completion_tokens=50))
    llm = BudgetedLLM(inner, max_tokens_total=400)
    llm.complete(MESSAGES, max_tokens=100)
    assert (llm.calls, llm.prompt_tokens, llm.completion_tokens) == (1, 100, 50)
    assert llm.remaining == 250
    with pytest.raises(BudgetExceeded, match="only 250"):
        llm.complete(MESSAGES, max_tokens=200)
    assert len(inner.calls) == 1
    with pytest.raises(BudgetExceeded):
        BudgetedLLM(inner, max_tokens_total=50).complete(MESSAGES, max_tokens=10)


def test_budget_exceeded_is_a_provider_error_and_bad_budget_rejected() -> None:
    """BudgetExceeded is catchable as ProviderError; non-positive budgets are ConfigErrors."""
    assert issubclass(BudgetExceeded, ProviderError)
    with pytest.raises(ConfigError):
        BudgetedLLM(ScriptedLLM([]), max_tokens_total=0)


def test_make_llm_openai_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The openai provider reads base URL, model and key from the environment."""
    monkeypatch.setenv("DELTAMEM_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("DELTAMEM_LLM_MODEL", "qwen")
    monkeypatch.setenv("DELTAMEM_LLM_API_KEY", "sk-env-secret")
    llm = make_llm("openai")
    assert isinstance(llm, OpenAICompatLLM) and llm.name == "openai:qwen"
    assert llm.url == "http://127.0.0.1:9/v1/chat/completions"
    assert "sk-env-secret" not in repr(llm)
    assert make_llm("openai:other", max_retries=0).name == "openai:other"


def test_make_llm_wraps_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """Budget options wrap the provider in a BudgetedLLM."""
    llm = make_llm("openai", base_url="http://127.0.0.1:9", model="m", max_tokens_total=1000)
    assert isinstance(llm, BudgetedLLM) and llm.max_tokens_total == 1000


def test_make_llm_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unknown providers list the choices; missing settings and bad options are named."""
    monkeypatch.delenv("DELTAMEM_LLM_BASE_URL", raising=False)
    monkeypatch.delenv("DELTAMEM_LLM_MODEL", raising=False)
    with pytest.raises(ConfigError, match="local, openai, anthropic"):
        make_llm("gpt5")
    assert PROVIDERS == ("local", "openai", "anthropic")
    with pytest.raises(ConfigError, match="DELTAMEM_LLM_BASE_URL and DELTAMEM_LLM_MODEL"):
        make_llm("openai")
    with pytest.raises(ConfigError, match="unknown option"):
        make_llm("openai", base_url="http://x", model="m", colour="blue")
    with pytest.raises(ConfigError, match="not a file"):
        make_llm("local", model_path="/nonexistent/model.gguf")


def test_scripted_llm_records_and_raises() -> None:
    """ScriptedLLM answers in order, raises queued exceptions and fails when exhausted."""
    llm = ScriptedLLM(["one two", ProviderError("down")])
    result = llm.complete([{"role": "user", "content": "a b c"}], schema={"type": "object"})
    assert result.text == "one two" and result.prompt_tokens == 3
    assert result.completion_tokens == 2
    assert llm.calls[0].schema == {"type": "object"} and llm.calls[0].prompt == "a b c"
    with pytest.raises(ProviderError):
        llm.complete([])
    with pytest.raises(AssertionError, match="ran out"):
        llm.complete([])
    assert llm.remaining == 0 and len(llm.calls) == 3


def test_function_llm_computes_answers() -> None:
    """FunctionLLM passes messages and schema to its function."""
    llm = FunctionLLM(lambda msgs, schema: f"{len(msgs)}:{schema is None}")
    assert llm.complete([{"role": "user", "content": "q"}]).text == "1:True"
    assert len(llm.calls) == 1
