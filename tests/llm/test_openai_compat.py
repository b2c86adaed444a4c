"""``OpenAICompatLLM`` end to end over real HTTP against a scripted loopback server."""

from __future__ import annotations

import socket

import pytest
from fake_openai_server import FakeOpenAIServer, Reply, ok

from deltamem.errors import ConfigError, ProviderError
from deltamem.llm.base import LLM
from deltamem.llm.openai_compat import OpenAICompatLLM, ProviderHTTPError

pytestmark = pytest.mark.server

KEY = "sk-test-SECRET-1234567890"
MESSAGES = [{"role": "user", "content": "hi"}]
SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}


def _llm(server: FakeOpenAIServer, sleeps: list[float], **kw: object) -> OpenAICompatLLM:
    return OpenAICompatLLM(server.url, "fake-model", api_key=KEY, sleep=sleeps.append, **kw)  # type: ignore[arg-type]


def test_success_parses_text_usage_and_sends_auth(fake_server: FakeOpenAIServer) -> None:
    """A 200 answer gives text, usage and model; the request carries the bearer key."""
    fake_server.replies = [ok("hello", 12, 3)]
    llm = _llm(fake_server, [])
    assert isinstance(llm, LLM) and llm.name == "openai:fake-model"
    result = llm.complete(MESSAGES, temperature=0.2, max_tokens=64)
    assert result.text == "hello" and result.model == "fake-model"
    assert (result.prompt_tokens, result.completion_tokens) == (12, 3)
    assert result.latency_ms > 0
    (req,) = fake_server.received
    assert req.path == "/v1/chat/completions"
    assert req.headers["authorization"] == f"Bearer {KEY}"
    assert req.body["messages"] == MESSAGES and req.body["max_tokens"] == 64
    assert req.body["temperature"] == 0.2 and "response_format" not in req.body


def test_base_url_with_v1_suffix(fake_server: FakeOpenAIServer) -> None:
    """A base_url that already ends in /v1 is not doubled."""
    fake_server.replies = [ok("x")]
    OpenAICompatLLM(fake_server.url + "/v1/", "m").complete(MESSAGES)
    assert fake_server.received[0].path == "/v1/chat/completions"
    assert "authorization" not in fake_server.received[0].headers


def test_500_then_success_is_retried(fake_server: FakeOpenAIServer) -> None:
    """A server error is retried after the first backoff delay."""
    fake_server.replies = [Reply(500, {"error": "boom"}), ok("recovered")]
    sleeps: list[float] = []
    assert _llm(fake_server, sleeps, backoff=0.25).complete(MESSAGES).text == "recovered"
    assert len(fake_server.received) == 2 and sleeps == [0.25]


def test_429_honours_retry_after(fake_server: FakeOpenAIServer) -> None:
    """A 429 waits for the Retry-After seconds instead of the computed backoff."""
    fake_server.replies = [Reply(429, {"error": "slow down"}, {"Retry-After": "3"}), ok("ok")]
    sleeps: list[float] = []
    assert _llm(fake_server, sleeps).complete(MESSAGES).text == "ok"
    assert sleeps == [3.0]


def test_backoff_doubles_and_gives_up(fake_server: FakeOpenAIServer) -> None:
    """Persistent 503s are retried max_retries times with doubling delays, then raised."""
    fake_server.replies = [Reply(503, {"error": "busy"}) for _ in range(4)]
    sleeps: list[float] = []
    with pytest.raises(ProviderHTTPError) as info:
        _llm(fake_server, sleeps, max_retries=3, backoff=0.5).complete(MESSAGES)
    assert info.value.status == 503 and "after 4 attempt(s)" in str(info.value)
    assert sleeps == [0.5, 1.0, 2.0] and len(fake_server.received) == 4


def test_400_is_not_retried(fake_server: FakeOpenAIServer) -> None:
    """A client error raises at once with its status and a body excerpt."""
    fake_server.replies = [Reply(400, {"error": {"message": "max_tokens too large"}})]
    sleeps: list[float] = []
    with pytest.raises(ProviderHTTPError) as info:
        _llm(fake_server, sleeps).complete(MESSAGES)
    assert info.value.status == 400 and "max_tokens too large" in str(info.value)
    assert sleeps == [] and len(fake_server.received) == 1


def test_json_schema_payload_and_auto_downgrade(fake_server: FakeOpenAIServer) -> None:
    """A schema is sent as json_schema; a server rejecting it gets json_object, remembered."""
    fake_server.replies = [
        ok('{"a": "1"}'),
        Reply(400, {"error": "response_format json_schema is not supported"}),
        ok('{"a": "2"}'),
        ok('{"a": "3"}'),
    ]
    llm = _llm(fake_server, [])
    llm.complete(MESSAGES, schema=SCHEMA)
    first = fake_server.received[0].body["response_format"]
    assert first["type"] == "json_schema" and first["json_schema"]["schema"] == SCHEMA
    fake_server.received.clear()
    assert llm.complete(MESSAGES, schema=SCHEMA).text == '{"a": "2"}'
    assert fake_server.received[0].body["response_format"]["type"] == "json_schema"
    assert fake_server.received[1].body["response_format"] == {"type": "json_object",
                                                               "schema": SCHEMA}
    llm.complete(MESSAGES, schema=SCHEMA)
    assert fake_server.received[2].body["response_format"] == {"type": "json_object",
                                                               "schema": SCHEMA}


def test_explicit_json_modes(fake_server: FakeOpenAIServer) -> None:
    """json_mode='off' sends no response_format; a fixed mode is never downgraded."""
    fake_server.replies = [ok("{}"), Reply(400, {"error": "json_schema unsupported"})]
    _llm(fake_server, [], json_mode="off").complete(MESSAGES, schema=SCHEMA)
    assert "response_format" not in fake_server.received[0].body
    with pytest.raises(ProviderHTTPError):
        _llm(fake_server, [], json_mode="json_schema").complete(MESSAGES, schema=SCHEMA)
    assert len(fake_server.received) == 2


def test_key_never_in_repr_or_errors(fake_server: FakeOpenAIServer) -> None:
    """The API key is hidden in repr and redacted from error messages that echo it."""
    fake_server.replies = [Reply(401, {"error": f"invalid key {KEY}"})]
    llm = _llm(fake_server, [])
    assert KEY not in repr(llm) and "***" in repr(llm)
    with pytest.raises(ProviderHTTPError) as info:
        llm.complete(MESSAGES)
    assert KEY not in str(info.value) and KEY not in info.value.body
    assert "DELTAMEM_LLM_API_KEY" in str(info.value)


def test_key_echoed_across_the_excerpt_cut_is_redacted(fake_server: FakeOpenAIServer) -> None:
    """The key is redacted before the body is cut to its excerpt, so no part of it leaks."""
    prefix = len('{"error": "')
    fake_server.replies = [Reply(401, {"error": "x" * (296 - prefix) + KEY})]  # spans char 300
    with pytest.raises(ProviderHTTPError) as info:
        _llm(fake_server, []).complete(MESSAGES)
    for text in (str(info.value), info.value.body):
        assert all(KEY[i:i + 6] not in text for i in range(len(KEY) - 5)), text[-40:]


def test_connection_refused_is_retried_then_raised() -> None:
    """An unreachable server is retried, then reported as a ProviderError."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    sleeps: list[float] = []
    llm = OpenAICompatLLM(f"http://127.0.0.1:{port}", "m", api_key=KEY, max_retries=2,
                          backoff=0.1, sleep=sleeps.append)
    with pytest.raises(ProviderError, match="cannot reach") as info:
        llm.complete(MESSAGES)
    assert sleeps == [0.1, 0.2] and KEY not in str(info.value)


def test_malformed_success_body(fake_server: FakeOpenAIServer) -> None:
    """A 200 whose body is not JSON or lacks choices raises ProviderError."""
    fake_server.replies = [Reply(200, "<html>oops</html>"), Reply(200, {"choices": []})]
    llm = _llm(fake_server, [])
    with pytest.raises(ProviderError, match="not JSON"):
        llm.complete(MESSAGES)
    with pytest.raises(ProviderError, match="no choices"):
        llm.complete(MESSAGES)


def test_bad_configuration() -> None:
    """Invalid constructor arguments raise ConfigError."""
    with pytest.raises(ConfigError):
        OpenAICompatLLM("localhost:8000", "m")
    with pytest.raises(ConfigError):
        OpenAICompatLLM("http://x", "")
    with pytest.raises(ConfigError):
        OpenAICompatLLM("http://x", "m", json_mode="yaml")  # type: ignore[arg-type]


def test_format_rejected_with_500_steps_down_without_retrying(fake_server):
    """A 500 that names response_format (llama.cpp's server does this) downgrades at once."""
    from fake_openai_server import Reply, ok

    from deltamem.llm.openai_compat import OpenAICompatLLM

    fake_server.replies = [
        Reply(500, {"error": {"message": "body.response_format.type: Input should be 'text' "
                                         "or 'json_object'"}}),
        ok('{"a": "b"}'),
    ]
    llm = OpenAICompatLLM(fake_server.url, "m", sleep=lambda _s: None)
    answer = llm.complete([{"role": "user", "content": "hi"}], schema={"type": "object"})
    assert answer.text == '{"a": "b"}'
    sent = [r.body.get("response_format", {}).get("type") for r in fake_server.received]
    assert sent == ["json_schema", "json_object"]
