"""Any OpenAI-compatible ``/v1/chat/completions`` endpoint (vLLM, llama.cpp server, Ollama, hosted).

Synchronous httpx client with bounded retries (:class:`~deltamem.llm.http.HTTPProvider`:
transient failures are retried honouring ``Retry-After``, other 4xx raised at once). The API key is
sent only in the ``Authorization`` header and is redacted from ``repr`` and every error message.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, Literal

import httpx

from deltamem.errors import ConfigError, ProviderError
from deltamem.llm.base import Completion, Message
from deltamem.llm.http import HTTPProvider, ProviderHTTPError, as_count

__all__ = ["JsonMode", "OpenAICompatLLM", "ProviderHTTPError"]

JsonMode = Literal["auto", "json_schema", "json_object", "off"]
_JSON_MODES: tuple[str, ...] = ("auto", "json_schema", "json_object", "off")
# Words a server uses when it rejects ``response_format``; only then does "auto" downgrade.
_FORMAT_HINTS = ("response_format", "json_schema", "json_object", "schema", "grammar")


class OpenAICompatLLM(HTTPProvider):
    """Chat completions over HTTP against an OpenAI-compatible server.

    Args:
        base_url: Server root, with or without the trailing ``/v1``
            (``http://127.0.0.1:8000`` and ``http://127.0.0.1:8000/v1`` are the same).
        model: Model name sent in every request.
        api_key: Bearer token; optional for local servers. Never logged or shown.
        timeout: Seconds per HTTP attempt.
        max_retries: Extra attempts after the first on transient failures.
        backoff: First retry delay in seconds; doubles on each retry (capped at 60 s).
        json_mode: How a ``schema`` is enforced: ``"json_schema"`` (strict response_format),
            ``"json_object"`` (JSON mode only), ``"off"`` (prompt only) or ``"auto"``
            (json_schema, stepping down once per level if the server rejects it, and remembering).
        client: An httpx client to reuse (tests, connection pooling); created lazily otherwise.
        sleep: Delay function, injectable so tests do not wait.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 4,
        backoff: float = 0.5,
        json_mode: JsonMode = "auto",
        *,
        client: httpx.Client | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ):
        if not model:
            raise ConfigError("model must be a non-empty model name (e.g. DELTAMEM_LLM_MODEL)")
        if json_mode not in _JSON_MODES:
            raise ConfigError(f"json_mode must be one of {_JSON_MODES}, got {json_mode!r}")
        super().__init__(base_url, api_key=api_key, timeout=timeout, max_retries=max_retries,
                         backoff=backoff, client=client, sleep=sleep)
        self.url = f"{self.api_root}/chat/completions"
        self.model = model
        self.name = f"openai:{model}"
        self.json_mode: JsonMode = json_mode
        self._auto_level: JsonMode = "json_schema"

    def __repr__(self) -> str:
        key = "'***'" if self._api_key else "None"
        return (
            f"OpenAICompatLLM(base_url={self.base_url!r}, model={self.model!r}, api_key={key}, "
            f"json_mode={self.json_mode!r})"
        )

    def complete(
        self,
        messages: Sequence[Message],
        *,
        schema: dict[str, Any] | None = None,
        temperature: float = 0.0,
        max_tokens: int = 512,
    ) -> Completion:
        """Send one chat completion request and return the first choice.

        Raises:
            ProviderHTTPError: a non-retryable status, or retries exhausted on a retryable one.
            ProviderError: connection failures after all retries, or an unreadable answer.
        """
        started = time.perf_counter()
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": [dict(m) for m in messages],
            "temperature": temperature,
            "max_tokens": max_tokens,
        }
        while True:
            mode = self._effective_mode(schema)
            body = dict(payload)
            if schema is not None and mode != "off":
                body["response_format"] = _response_format(mode, schema)
            try:
                data = self._post_with_retries(body)
            except ProviderHTTPError as err:
                # Only "auto" steps down, and only when the server names the format as the issue.
                if self._downgrade(err, mode):
                    continue
                raise
            return self._to_completion(data, started)

    # -- internals ---------------------------------------------------------------------------

    def _effective_mode(self, schema: dict[str, Any] | None) -> JsonMode:
        if schema is None:
            return "off"
        if self.json_mode == "auto":
            return self._auto_level
        return self.json_mode

    def _downgrade(self, err: ProviderHTTPError, mode: JsonMode) -> bool:
        """Step "auto" down one level if the server rejected the response format itself."""
        if self.json_mode != "auto" or mode == "off":
            return False
        if err.status not in (400, 404, 415, 422, 500, 501):
            return False
        if not any(hint in err.body.lower() for hint in _FORMAT_HINTS):
            return False
        # Remembered, so later calls start at the level this server accepts.
        self._auto_level = "json_object" if mode == "json_schema" else "off"
        return True

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def _retryable(self, response: httpx.Response, body: dict[str, Any]) -> bool:
        # Some servers (llama.cpp's among them) answer an unsupported response_format with
        # a 500; that is a verdict on the request, not a transient fault, so do not retry.
        if "response_format" in body and "response_format" in response.text:
            return False
        return super()._retryable(response, body)

    def _to_completion(self, data: Any, started: float) -> Completion:
        try:
            choice = data["choices"][0]
            text = choice["message"]["content"]
        except (KeyError, IndexError, TypeError):
            excerpt = self._excerpt(str(data))
            raise ProviderError(
                f"{self.name}: answer has no choices[0].message.content: {excerpt!r}"
            ) from None
        if text is None:  # e.g. a refusal or a tool call; nothing to parse
            text = ""
        if not isinstance(text, str):
            raise ProviderError(f"{self.name}: message content is {type(text).__name__}, not text")
        usage = data.get("usage") if isinstance(data, dict) else None
        usage = usage if isinstance(usage, dict) else {}
        return Completion(
            text=text,
            prompt_tokens=as_count(usage.get("prompt_tokens")),
            completion_tokens=as_count(usage.get("completion_tokens")),
            latency_ms=(time.perf_counter() - started) * 1000.0,
            model=str(data.get("model") or self.model),
            stop_reason=str(choice.get("finish_reason") or ""),
        )


def _response_format(mode: JsonMode, schema: dict[str, Any]) -> dict[str, Any]:
    if mode == "json_object":
        # The schema rides along: llama.cpp's server turns it into a grammar, others ignore it.
        return {"type": "json_object", "schema": schema}
    return {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": schema, "strict": True},
    }
