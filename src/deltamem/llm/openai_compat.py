"""Any OpenAI-compatible ``/v1/chat/completions`` endpoint (vLLM, llama.cpp server, Ollama, hosted).

Synchronous httpx client with bounded retries. Transient failures (HTTP 429, 5xx, connection
errors, timeouts) are retried with exponential backoff, honouring ``Retry-After``; every other
4xx is the caller's fault and is raised at once. The API key is sent only in the
``Authorization`` header and is redacted from ``repr`` and from every error message.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Callable, Sequence
from typing import Any, Literal

import httpx

from deltamem.config import secret
from deltamem.errors import ConfigError, ProviderError
from deltamem.llm.base import Completion, Message

JsonMode = Literal["auto", "json_schema", "json_object", "off"]
_JSON_MODES: tuple[str, ...] = ("auto", "json_schema", "json_object", "off")
# Words a server uses when it rejects ``response_format``; only then does "auto" downgrade.
_FORMAT_HINTS = ("response_format", "json_schema", "json_object", "schema", "grammar")
_MAX_DELAY_S = 60.0
_EXCERPT_CHARS = 300


class ProviderHTTPError(ProviderError):
    """The endpoint answered with an HTTP error status (after any retries)."""

    def __init__(self, message: str, *, status: int, body: str):
        self.status = status
        self.body = body
        super().__init__(message)


class OpenAICompatLLM:
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
        if not base_url or not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"base_url must start with http:// or https://, got {base_url!r}")
        if not model:
            raise ConfigError("model must be a non-empty model name (e.g. DELTAMEM_LLM_MODEL)")
        if json_mode not in _JSON_MODES:
            raise ConfigError(f"json_mode must be one of {_JSON_MODES}, got {json_mode!r}")
        if max_retries < 0 or backoff < 0 or timeout <= 0:
            raise ConfigError("max_retries and backoff must be >= 0 and timeout > 0")
        root = base_url.rstrip("/")
        # Accept both conventions: OpenAI SDKs include /v1 in base_url, most docs do not.
        api_root = root if root.endswith("/v1") else f"{root}/v1"
        self.url = f"{api_root}/chat/completions"
        self.base_url = base_url
        self.model = model
        self.name = f"openai:{model}"
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.json_mode: JsonMode = json_mode
        self._auto_level: JsonMode = "json_schema"
        self._api_key = secret("api_key", api_key)
        self._client = client
        self._own_client = client is None
        self._sleep = sleep

    def __repr__(self) -> str:
        key = "'***'" if self._api_key else "None"
        return (
            f"OpenAICompatLLM(base_url={self.base_url!r}, model={self.model!r}, api_key={key}, "
            f"json_mode={self.json_mode!r})"
        )

    def close(self) -> None:
        """Close the HTTP client if this object created it."""
        if self._client is not None and self._own_client:
            self._client.close()
            self._client = None

    def __enter__(self) -> OpenAICompatLLM:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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

    def _http(self) -> httpx.Client:
        if self._client is None:
            self._client = httpx.Client(timeout=self.timeout)
        return self._client

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def _post_with_retries(self, body: dict[str, Any]) -> Any:
        attempt = 0
        while True:
            try:
                response = self._http().post(
                    self.url, json=body, headers=self._headers(), timeout=self.timeout
                )
            except httpx.TransportError as exc:  # connect errors, timeouts, broken connections
                if attempt >= self.max_retries:
                    raise ProviderError(
                        f"{self.name}: cannot reach {self.url} after {attempt + 1} attempt(s): "
                        f"{type(exc).__name__}: {self._excerpt(str(exc))}. "
                        "Check that the server is running and DELTAMEM_LLM_BASE_URL is right."
                    ) from None
                self._sleep(self._delay(attempt, None))
                attempt += 1
                continue
            if response.status_code < 400:
                return self._decode(response)
            retryable = response.status_code == 429 or response.status_code >= 500
            # Some servers (llama.cpp's among them) answer an unsupported response_format with
            # a 500; that is a verdict on the request, not a transient fault, so do not retry.
            if "response_format" in body and "response_format" in response.text:
                retryable = False
            if not retryable or attempt >= self.max_retries:
                raise self._http_error(response, attempt + 1)
            self._sleep(self._delay(attempt, response.headers.get("retry-after")))
            attempt += 1

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        computed = self.backoff * (2**attempt)
        hinted = _parse_retry_after(retry_after)
        # The server knows its own rate window better than our exponential guess.
        delay = hinted if hinted is not None else computed
        return min(max(delay, 0.0), _MAX_DELAY_S)

    def _decode(self, response: httpx.Response) -> Any:
        try:
            return response.json()
        except ValueError:
            excerpt = self._excerpt(response.text)
            raise ProviderError(
                f"{self.name}: HTTP {response.status_code} with a body that is not JSON: "
                f"{excerpt!r}"
            ) from None

    def _http_error(self, response: httpx.Response, attempts: int) -> ProviderHTTPError:
        excerpt = self._excerpt(response.text)
        hint = {
            401: " Check DELTAMEM_LLM_API_KEY.",
            403: " Check DELTAMEM_LLM_API_KEY and the model's access rights.",
            404: " Check DELTAMEM_LLM_BASE_URL and DELTAMEM_LLM_MODEL.",
            429: " The server is rate-limiting; lower the request rate or raise max_retries.",
        }.get(response.status_code, "")
        return ProviderHTTPError(
            f"{self.name}: POST {self.url} failed with HTTP {response.status_code} after "
            f"{attempts} attempt(s): {excerpt!r}.{hint}",
            status=response.status_code,
            body=excerpt,
        )

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
            prompt_tokens=_as_int(usage.get("prompt_tokens")),
            completion_tokens=_as_int(usage.get("completion_tokens")),
            latency_ms=(time.perf_counter() - started) * 1000.0,
            model=str(data.get("model") or self.model),
        )

    def _excerpt(self, text: str) -> str:
        """The start of ``text`` with the API key redacted first (a cut must not split it)."""
        if self._api_key and self._api_key in text:
            text = text.replace(self._api_key, "***")
        return text[:_EXCERPT_CHARS]


def _response_format(mode: JsonMode, schema: dict[str, Any]) -> dict[str, Any]:
    if mode == "json_object":
        # The schema rides along: llama.cpp's server turns it into a grammar, others ignore it.
        return {"type": "json_object", "schema": schema}
    return {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": schema, "strict": True},
    }


def _parse_retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or HTTP-date); None if absent/bad."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


def _as_int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
