"""``AnthropicLLM`` end to end over real HTTP against a loopback server that records each request
and replays answers in the Messages API's format (``fake_anthropic_server``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fake_anthropic_server import MODEL, FakeAnthropicServer, error, message, tool_answer
from fake_openai_server import Received, Reply

from deltamem.errors import ConfigError, ExtractionError, ProviderError
from deltamem.extract.schemas import SkillAnswer, answer_schema
from deltamem.extract.structured import ask_structured
from deltamem.integrations.claude_code import hook_extractor
from deltamem.llm import make_llm
from deltamem.llm.anthropic import ANTHROPIC_API, AnthropicLLM, to_anthropic_messages
from deltamem.llm.base import LLM
from deltamem.llm.budget import BudgetedLLM
from deltamem.llm.http import ProviderHTTPError

pytestmark = pytest.mark.server

KEY = "sk-ant-api03-FAKE0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8-AAAA"
CONVERSATION = [
    {"role": "system", "content": "You distil experiences."},
    {"role": "user", "content": "Episode: heat an apple."},
    {"role": "assistant", "content": "not json"},
    {"role": "user", "content": "Your answer was rejected."},
    {"role": "user", "content": "Reply with one JSON object."},
]
SKILL = {"activation": "Applies when food must be heated",
         "steps": ["take apple 1 from fridge 1", "heat apple 1 with microwave 1"],
         "termination": "the apple is hot"}


def _llm(server: FakeAnthropicServer, sleeps: list[float] | None = None,
         **kw: object) -> AnthropicLLM:
    return AnthropicLLM(MODEL, api_key=KEY, base_url=server.url,  # type: ignore[arg-type]
                        sleep=(sleeps if sleeps is not None else []).append, **kw)


def test_request_shape_and_answer(anthropic_server: FakeAnthropicServer) -> None:
    """The Messages API's shape: /v1/messages, x-api-key and anthropic-version headers, the
    system prompt top-level, max_tokens sent, turns of one role joined; the answer's text
    blocks, stop_reason, model and usage come back."""
    anthropic_server.replies = [message("Hello", 25, 9, blocks=[
        {"type": "text", "text": "Hel"}, {"type": "text", "text": "lo"}])]
    llm = _llm(anthropic_server)
    assert isinstance(llm, LLM) and llm.name == f"anthropic:{MODEL}"
    result = llm.complete(CONVERSATION, temperature=0.2, max_tokens=64)
    assert (result.text, result.model, result.stop_reason) == ("Hello", MODEL, "end_turn")
    assert (result.prompt_tokens, result.completion_tokens) == (25, 9)
    assert not result.truncated and result.latency_ms > 0
    (req,) = anthropic_server.received
    assert req.path == "/v1/messages"
    assert req.headers["x-api-key"] == KEY and req.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in req.headers
    assert req.body == {
        "model": MODEL, "max_tokens": 64, "temperature": 0.2,
        "system": "You distil experiences.",
        "messages": [
            {"role": "user", "content": "Episode: heat an apple."},
            {"role": "assistant", "content": "not json"},
            {"role": "user", "content": "Your answer was rejected.\n\nReply with one JSON object."},
        ],
    }


def test_base_url_with_v1_and_no_system(anthropic_server: FakeAnthropicServer) -> None:
    """A base URL ending in /v1 is not doubled; without system messages no system is sent."""
    anthropic_server.replies = [message("x")]
    AnthropicLLM(MODEL, base_url=anthropic_server.url + "/v1/").complete(
        [{"role": "user", "content": "hi"}])
    (req,) = anthropic_server.received
    assert req.path == "/v1/messages" and "system" not in req.body
    assert "x-api-key" not in req.headers  # a local server needs no key


def test_schema_is_a_tool_the_model_must_call(anthropic_server: FakeAnthropicServer) -> None:
    """With a schema the request carries one tool and forces it; the answer is its input."""
    schema = answer_schema(SkillAnswer)
    anthropic_server.replies = [tool_answer(SKILL), message('{"activation": "x"}')]
    llm = _llm(anthropic_server)
    answer = llm.complete(CONVERSATION, schema=schema)
    assert json.loads(answer.text) == SKILL and answer.stop_reason == "tool_use"
    body = anthropic_server.received[0].body
    assert body["tools"] == [{"name": "answer", "input_schema": schema,
                              "description": "Give your answer as this tool's input."}]
    assert body["tool_choice"] == {"type": "tool", "name": "answer"}
    off = _llm(anthropic_server, json_mode="off").complete(CONVERSATION, schema=schema)
    assert off.text == '{"activation": "x"}'
    assert "tools" not in anthropic_server.received[1].body


def test_429_honours_retry_after(anthropic_server: FakeAnthropicServer) -> None:
    """A rate-limited request waits the Retry-After seconds, then succeeds."""
    anthropic_server.replies = [
        error(429, "rate_limit_error", "Number of request tokens has exceeded your per-minute "
              "rate limit", {"Retry-After": "7"}),
        message("ok"),
    ]
    sleeps: list[float] = []
    assert _llm(anthropic_server, sleeps).complete(CONVERSATION).text == "ok"
    assert sleeps == [7.0] and len(anthropic_server.received) == 2
    assert anthropic_server.received[0].body == anthropic_server.received[1].body


def test_overloaded_529_and_408_are_retried_with_backoff(
        anthropic_server: FakeAnthropicServer) -> None:
    """529 (overloaded) and 408 are transient: retried with doubling delays, then raised."""
    anthropic_server.replies = [error(529, "overloaded_error", "Overloaded"),
                                error(408, "timeout_error", "Request timed out"),
                                error(529, "overloaded_error", "Overloaded")]
    sleeps: list[float] = []
    with pytest.raises(ProviderHTTPError) as info:
        _llm(anthropic_server, sleeps, max_retries=2, backoff=0.25).complete(CONVERSATION)
    assert info.value.status == 529 and sleeps == [0.25, 0.5]
    assert "after 3 attempt(s)" in str(info.value) and "overloaded" in str(info.value)


def test_client_errors_and_should_retry_false_are_not_retried(
        anthropic_server: FakeAnthropicServer) -> None:
    """A 400 raises at once; so does a 500 the server marks x-should-retry: false."""
    anthropic_server.replies = [
        error(400, "invalid_request_error", "max_tokens: Field required"),
        error(500, "api_error", "Internal server error", {"x-should-retry": "false"}),
    ]
    sleeps: list[float] = []
    llm = _llm(anthropic_server, sleeps)
    with pytest.raises(ProviderHTTPError, match="max_tokens: Field required"):
        llm.complete(CONVERSATION)
    with pytest.raises(ProviderHTTPError) as info:
        llm.complete(CONVERSATION)
    assert info.value.status == 500 and sleeps == [] and len(anthropic_server.received) == 2


def test_an_error_body_with_the_key_is_redacted(anthropic_server: FakeAnthropicServer) -> None:
    """The key echoed in an error body (even across the excerpt's cut) appears nowhere: not in
    the message, the body excerpt or repr; the message says which setting to check."""
    anthropic_server.replies = [
        error(401, "authentication_error", f"invalid x-api-key: {KEY}"),
        error(401, "authentication_error", "x" * 230 + KEY),
    ]
    llm = _llm(anthropic_server)
    assert KEY not in repr(llm) and "'***'" in repr(llm)
    for _ in range(2):
        with pytest.raises(ProviderHTTPError) as info:
            llm.complete(CONVERSATION)
        for text in (str(info.value), info.value.body):
            assert all(KEY[i:i + 8] not in text for i in range(len(KEY) - 7)), text
        assert "DELTAMEM_LLM_API_KEY" in str(info.value) and info.value.status == 401


def test_token_usage_is_accounted(anthropic_server: FakeAnthropicServer) -> None:
    """Input, cache-read and cache-write tokens count as prompt tokens; a budget and
    ask_structured add up what every attempt reported."""
    anthropic_server.replies = [message("x", 100, 10, cache_read=50, cache_creation=5)]
    budgeted = BudgetedLLM(_llm(anthropic_server), max_tokens_total=10_000)
    assert budgeted.complete(CONVERSATION, max_tokens=32).prompt_tokens == 155
    assert (budgeted.calls, budgeted.prompt_tokens, budgeted.completion_tokens) == (1, 155, 10)
    anthropic_server.replies = [message("not an object", 40, 4), tool_answer(SKILL, 60, 30)]
    skill, usage, _raw = ask_structured(_llm(anthropic_server), CONVERSATION, SkillAnswer)
    assert skill.steps == SKILL["steps"]
    assert (usage.llm_calls, usage.prompt_tokens, usage.completion_tokens) == (2, 100, 34)


def test_a_cut_off_answer_is_reported_as_such(anthropic_server: FakeAnthropicServer) -> None:
    """stop_reason max_tokens reaches the extraction error, not a half-parsed object."""
    cut = message('{"activation": "heat", "steps": ["take', stop_reason="max_tokens")
    anthropic_server.replies = [cut, cut]
    with pytest.raises(ExtractionError, match="cut off at the 48-token limit"):
        ask_structured(_llm(anthropic_server, json_mode="off"), CONVERSATION, SkillAnswer,
                       max_tokens=48)


def test_unreadable_answers_and_bad_configuration(anthropic_server: FakeAnthropicServer) -> None:
    """A 200 without content blocks is a ProviderError; bad arguments are ConfigErrors, and
    api.anthropic.com without a key is refused before any request."""
    anthropic_server.replies = [Reply(200, {"type": "message"}), Reply(200, "<html>")]
    llm = _llm(anthropic_server)
    with pytest.raises(ProviderError, match="no content blocks"):
        llm.complete(CONVERSATION)
    with pytest.raises(ProviderError, match="not JSON"):
        llm.complete(CONVERSATION)
    with pytest.raises(ConfigError, match="DELTAMEM_LLM_API_KEY"):
        AnthropicLLM(MODEL)
    for bad in ({"model": ""}, {"model": MODEL, "base_url": "api.anthropic.com"},
                {"model": MODEL, "json_mode": "json_schema"}):
        with pytest.raises(ConfigError):
            AnthropicLLM(api_key=KEY, **bad)  # type: ignore[arg-type]
    assert AnthropicLLM(MODEL, api_key=KEY).url == f"{ANTHROPIC_API}/v1/messages"


def test_to_anthropic_messages() -> None:
    """System messages join into one; a tool or unknown role speaks as the user."""
    system, turns = to_anthropic_messages([
        {"role": "system", "content": "a"}, {"role": "user", "content": "q"},
        {"role": "system", "content": "b"}, {"role": "tool", "content": "out"}])
    assert system == "a\n\nb" and turns == [{"role": "user", "content": "q\n\nout"}]


def test_make_llm_reads_the_same_settings(monkeypatch: pytest.MonkeyPatch,
                                          anthropic_server: FakeAnthropicServer) -> None:
    """``anthropic`` / ``anthropic:<model>`` take DELTAMEM_LLM_MODEL, _API_KEY and _BASE_URL
    (default: Anthropic's API); a missing model is named."""
    for name in ("DELTAMEM_LLM_BASE_URL", "DELTAMEM_LLM_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DELTAMEM_LLM_API_KEY", KEY + "\n")
    with pytest.raises(ConfigError, match="anthropic provider needs model.*DELTAMEM_LLM_MODEL"):
        make_llm("anthropic")
    llm = make_llm("anthropic:claude-x", max_retries=1)
    assert isinstance(llm, AnthropicLLM) and llm.name == "anthropic:claude-x"
    assert llm.url == f"{ANTHROPIC_API}/v1/messages" and llm.max_retries == 1
    monkeypatch.setenv("DELTAMEM_LLM_BASE_URL", anthropic_server.url)
    monkeypatch.setenv("DELTAMEM_LLM_MODEL", MODEL)
    anthropic_server.replies = [message("ok")]
    budgeted = make_llm("anthropic", max_tokens_total=5000)
    assert isinstance(budgeted, BudgetedLLM) and budgeted.complete(CONVERSATION).text == "ok"
    assert anthropic_server.received[0].headers["x-api-key"] == KEY


def test_the_hooks_can_learn_with_anthropic(anthropic_server: FakeAnthropicServer) -> None:
    """DELTAMEM_LLM=anthropic gives the coding hooks a model over the Messages API."""
    extractor = hook_extractor({"DELTAMEM_EXTRACTOR": "llm", "DELTAMEM_LLM": "anthropic",
                                "DELTAMEM_LLM_MODEL": MODEL, "DELTAMEM_LLM_API_KEY": KEY,
                                "DELTAMEM_LLM_BASE_URL": anthropic_server.url})
    model = extractor.base.llm  # type: ignore[attr-defined]
    assert isinstance(model, AnthropicLLM) and model.url == f"{anthropic_server.url}/v1/messages"


def _answer_by_schema(request: Received) -> Reply:
    """Answer each extraction call with an experience of the kind its tool's schema asks for."""
    properties = request.body["tools"][0]["input_schema"]["properties"]
    if "activation" in properties:
        return tool_answer(SKILL)
    if "trigger" in properties:
        return tool_answer({"trigger": "Applies in kitchens",
                            "facts": ["apples are kept in the fridge 1"]})
    return tool_answer({"situation": "heating", "failed": ["open fridge 1 -> empty"]})


def test_cli_learns_with_anthropic(tmp_path: Path, anthropic_server: FakeAnthropicServer) -> None:
    """``deltamem learn --extractor llm --llm anthropic`` extracts through the Messages API."""
    anthropic_server.answer = _answer_by_schema
    episodes = tmp_path / "one.jsonl"
    episodes.write_text(json.dumps({
        "task": "heat an apple", "env": "You are in a kitchen. You see a fridge 1.",
        "success": True, "steps": [
            {"action": "take apple 1 from fridge 1", "observation": "You take the apple 1."},
            {"action": "heat apple 1 with microwave 1", "observation": "The apple is hot."}]})
        + "\n")
    env = {**os.environ, "DELTAMEM_LLM_API_KEY": KEY, "DELTAMEM_EMBEDDER": "hashing"}
    env.pop("DELTAMEM_LLM_BASE_URL", None)
    proc = subprocess.run(
        [sys.executable, "-m", "deltamem", "learn", str(episodes), "--db",
         str(tmp_path / "m.db"), "--extractor", "llm", "--llm", "anthropic", "--base-url",
         anthropic_server.url, "--model", MODEL, "--json"],
        capture_output=True, text=True, env=env, check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert KEY[10:30] not in proc.stdout + proc.stderr
    assert anthropic_server.received and all(
        r.path == "/v1/messages" and r.headers["x-api-key"] == KEY and "tool_choice" in r.body
        for r in anthropic_server.received)
    (result,) = json.loads(proc.stdout)["results"]
    assert (result["task"]["note"], result["env"]["note"]) == ("skill_root", "knowledge_root")
    assert len(anthropic_server.received) == 2
    assert {k: result["usage"][k] for k in ("llm_calls", "prompt_tokens", "completion_tokens")} \
        == {"llm_calls": 2, "prompt_tokens": 80, "completion_tokens": 40}
