"""Anthropic's Messages API (``POST {base}/v1/messages``), natively, over httpx.

The request is Anthropic's own shape: system messages go to the top-level ``system``,
consecutive turns of one role are joined, ``max_tokens`` is always sent, and the key travels
only in the ``x-api-key`` header with ``anthropic-version: 2023-06-01``. A ``schema`` is enforced
by a tool the model must call (``tool_choice``), which every Claude model and Anthropic-compatible
server supports; its input is the answer. Retries and redaction are
:class:`~deltamem.llm.http.HTTPProvider`'s: 408, 409, 429, 529 and other 5xx answers are
retried honouring ``Retry-After`` (and Anthropic's ``x-should-retry``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Literal
from urllib.parse import urlsplit

import httpx

from deltamem.errors import ConfigError, ProviderError
from deltamem.llm.base import Completion, Message
from deltamem.llm.http import HTTPProvider, as_count

__all__ = ["ANTHROPIC_API", "API_VERSION", "AnthropicLLM", "SchemaMode"]

ANTHROPIC_API = "https://api.anthropic.com"
_ANTHROPIC_HOST = "api.anthropic.com"
API_VERSION = "2023-06-01"
SchemaMode = Literal["tool", "off"]
_SCHEMA_MODES: tuple[str, ...] = ("tool", "off")
_TOOL = "answer"


class AnthropicLLM(HTTPProvider):
    """Claude (or any server speaking Anthropic's Messages API) over HTTP.

    Args:
        model: Model name sent in every request (e.g. ``claude-sonnet-4-5``).
        api_key: The Anthropic key; required for ``api.anthropic.com``, optional for a local
            Anthropic-compatible server. Never logged or shown.
        base_url: Server root, with or without the trailing ``/v1``
            (default ``https://api.anthropic.com``).
        timeout: Seconds per HTTP attempt.
        max_retries: Extra attempts after the first on transient failures.
        backoff: First retry delay in seconds; doubles on each retry (capped at 60 s).
        json_mode: How a ``schema`` is enforced: ``"tool"`` (the model must call a tool whose
            input schema is the schema; the answer is that input as JSON) or ``"off"`` (prompt
            only; the answer is the text blocks).
        client: An httpx client to reuse (tests, connection pooling); created lazily otherwise.
        sleep: Delay function, injectable so tests do not wait.
    """

    RETRY_STATUSES: ClassVar[frozenset[int]] = frozenset({408, 409, 429})
    HINTS: ClassVar[dict[int, str]] = {
        **HTTPProvider.HINTS,
        401: " Check DELTAMEM_LLM_API_KEY (an Anthropic key, sent as x-api-key).",
        529: " Anthropic's API is overloaded; retry later or raise max_retries.",
    }

    def __init__(
        self,
        model: str,
        api_key: str | None = None,
        base_url: str = ANTHROPIC_API,
        timeout: float = 60.0,
        max_retries: int = 4,
        backoff: float = 0.5,
        json_mode: SchemaMode = "tool",
        *,
        client: httpx.Client | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ):
        if not model:
            raise ConfigError("model must be a non-empty model name (e.g. DELTAMEM_LLM_MODEL)")
        if json_mode not in _SCHEMA_MODES:
            raise ConfigError(f"json_mode must be one of {_SCHEMA_MODES}, got {json_mode!r}")
        super().__init__(base_url, api_key=api_key, timeout=timeout, max_retries=max_retries,
                         backoff=backoff, client=client, sleep=sleep)
        if self._api_key is None and urlsplit(base_url).hostname == _ANTHROPIC_HOST:
            raise ConfigError("the anthropic provider needs an API key for api.anthropic.com: "
                              "set DELTAMEM_LLM_API_KEY (or pass api_key=...)")
        self.url = f"{self.api_root}/messages"
        self.model = model
        self.name = f"anthropic:{model}"
        self.json_mode: SchemaMode = json_mode

    def __repr__(self) -> str:
        key = "'***'" if self._api_key else "None"
        return (f"AnthropicLLM(model={self.model!r}, base_url={self.base_url!r}, api_key={key}, "
                f"json_mode={self.json_mode!r})")

    def complete(
        self,
        messages: Sequence[Message],
        *,
        schema: dict[str, Any] | None = None,
        temperature: float = 0.0,
        max_tokens: int = 512,
    ) -> Completion:
        """Send one Messages request and return its answer.

        Raises:
            ProviderHTTPError: a non-retryable status, or retries exhausted on a retryable one.
            ProviderError: connection failures after all retries, or an unreadable answer.
        """
        started = time.perf_counter()
        system, turns = to_anthropic_messages(messages)
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": max_tokens,
            "messages": turns,
            "temperature": temperature,
        }
        if system:
            body["system"] = system
        tool = schema is not None and self.json_mode == "tool"
        if tool:
            body["tools"] = [{"name": _TOOL, "input_schema": schema,
                              "description": "Give your answer as this tool's input."}]
            body["tool_choice"] = {"type": "tool", "name": _TOOL}
        return self._to_completion(self._post_with_retries(body), started, tool=tool)

    # -- internals ---------------------------------------------------------------------------

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json",
                   "anthropic-version": API_VERSION}
        if self._api_key:
            headers["x-api-key"] = self._api_key
        return headers

    def _to_completion(self, data: Any, started: float, *, tool: bool) -> Completion:
        content = data.get("content") if isinstance(data, dict) else None
        if not isinstance(content, list):
            raise ProviderError(
                f"{self.name}: answer has no content blocks: {self._excerpt(str(data))!r}"
            )
        blocks = [b for b in content if isinstance(b, dict)]
        calls = [b for b in blocks if b.get("type") == "tool_use" and b.get("name") == _TOOL]
        if tool and calls and isinstance(calls[0].get("input"), dict):
            text = json.dumps(calls[0]["input"], ensure_ascii=False)
        else:  # prompt-only, or the model answered in words: callers validate either way
            text = "".join(str(b.get("text") or "") for b in blocks if b.get("type") == "text")
        usage = data.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        prompt = sum(as_count(usage.get(k)) for k in (
            "input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))
        return Completion(
            text=text,
            prompt_tokens=prompt,
            completion_tokens=as_count(usage.get("output_tokens")),
            latency_ms=(time.perf_counter() - started) * 1000.0,
            model=str(data.get("model") or self.model),
            stop_reason=str(data.get("stop_reason") or ""),
        )


def to_anthropic_messages(messages: Sequence[Message]) -> tuple[str, list[dict[str, str]]]:
    """``(system, turns)`` in the Messages API's shape: the system messages joined into the
    top-level ``system``, every other message a ``user`` or ``assistant`` turn (a ``tool`` or
    unknown role speaks as the user), consecutive turns of one role joined by a blank line."""
    system: list[str] = []
    turns: list[dict[str, str]] = []
    for message in messages:
        role = message.get("role", "user")
        content = message.get("content", "")
        if role == "system":
            system.append(content)
            continue
        role = "assistant" if role == "assistant" else "user"
        if turns and turns[-1]["role"] == role:
            turns[-1] = {"role": role, "content": f"{turns[-1]['content']}\n\n{content}"}
        else:
            turns.append({"role": role, "content": content})
    return "\n\n".join(s for s in system if s), turns
