"""What the hosted-model providers share: one JSON ``POST`` with bounded retries, and errors that
never show the API key.

Transient failures (HTTP 429, 5xx, connection errors, timeouts, and what a provider adds, such as
Anthropic's 408, 409 and 529) are retried with exponential backoff, honouring ``Retry-After``
(seconds or an HTTP date) and the ``x-should-retry`` header that OpenAI's and Anthropic's APIs
send; every other 4xx is the caller's fault and is raised at once. The API key is redacted from
``repr`` and from every error message, before an excerpt is cut so no piece of it survives.
"""

from __future__ import annotations

import email.utils
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar, Self

import httpx

from deltamem.config import secret
from deltamem.errors import ConfigError, ProviderError

_MAX_DELAY_S = 60.0
_EXCERPT_CHARS = 300


class ProviderHTTPError(ProviderError):
    """The endpoint answered with an HTTP error status (after any retries)."""

    def __init__(self, message: str, *, status: int, body: str):
        self.status = status
        self.body = body
        super().__init__(message)


class HTTPProvider(ABC):
    """Base of the providers that reach a model over HTTP (``OpenAICompatLLM``,
    ``AnthropicLLM``): the client, the retry loop and error reporting. A subclass sets
    ``name`` and ``url``, builds its request headers and reads its answers.

    Args:
        base_url: Server root; it must start with ``http://`` or ``https://``.
        api_key: The provider's key; optional for local servers. Never logged or shown.
        timeout: Seconds per HTTP attempt.
        max_retries: Extra attempts after the first on transient failures.
        backoff: First retry delay in seconds; doubles on each retry (capped at 60 s).
        client: An httpx client to reuse (tests, connection pooling); created lazily otherwise.
        sleep: Delay function, injectable so tests do not wait.
    """

    name: str
    url: str
    #: Statuses retried besides every 5xx.
    RETRY_STATUSES: ClassVar[frozenset[int]] = frozenset({429})
    #: What to check, by status, appended to an HTTP error's message.
    HINTS: ClassVar[dict[int, str]] = {
        401: " Check DELTAMEM_LLM_API_KEY.",
        403: " Check DELTAMEM_LLM_API_KEY and the model's access rights.",
        404: " Check DELTAMEM_LLM_BASE_URL and DELTAMEM_LLM_MODEL.",
        429: " The server is rate-limiting; lower the request rate or raise max_retries.",
    }

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None,
        timeout: float,
        max_retries: int,
        backoff: float,
        client: httpx.Client | None,
        sleep: Callable[[float], None],
    ):
        if not base_url or not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"base_url must start with http:// or https://, got {base_url!r}")
        if max_retries < 0 or backoff < 0 or timeout <= 0:
            raise ConfigError("max_retries and backoff must be >= 0 and timeout > 0")
        self.base_url = base_url
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self._api_key = secret("api_key", api_key)
        self._client = client
        self._own_client = client is None
        self._sleep = sleep

    @property
    def api_root(self) -> str:
        """``base_url`` ending in exactly one ``/v1``: SDKs include it in a base URL, most docs
        do not, so ``http://h:8000`` and ``http://h:8000/v1`` are the same server."""
        root = self.base_url.rstrip("/")
        return root if root.endswith("/v1") else f"{root}/v1"

    def close(self) -> None:
        """Close the HTTP client if this object created it."""
        if self._client is not None and self._own_client:
            self._client.close()
            self._client = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- for subclasses ----------------------------------------------------------------------

    @abstractmethod
    def _headers(self) -> dict[str, str]:
        """The request headers, the key's among them."""

    def _retryable(self, response: httpx.Response, body: dict[str, Any]) -> bool:
        """Whether an error answer is transient (worth sending ``body`` again)."""
        verdict = str(response.headers.get("x-should-retry", "")).strip().lower()
        if verdict in ("true", "false"):  # the server's own word beats the status
            return verdict == "true"
        status: int = response.status_code
        return status in self.RETRY_STATUSES or status >= 500

    # -- the request -------------------------------------------------------------------------

    def _http(self) -> httpx.Client:
        if self._client is None:
            self._client = httpx.Client(timeout=self.timeout)
        return self._client

    def _post_with_retries(self, body: dict[str, Any]) -> Any:
        """POST ``body`` as JSON to ``url``; the decoded JSON answer.

        Raises:
            ProviderHTTPError: a non-retryable status, or retries exhausted on a retryable one.
            ProviderError: connection failures after all retries, or a body that is not JSON.
        """
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
            if not self._retryable(response, body) or attempt >= self.max_retries:
                raise self._http_error(response, attempt + 1)
            self._sleep(self._delay(attempt, response.headers.get("retry-after")))
            attempt += 1

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        computed = self.backoff * (2**attempt)
        hinted = parse_retry_after(retry_after)
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
        return ProviderHTTPError(
            f"{self.name}: POST {self.url} failed with HTTP {response.status_code} after "
            f"{attempts} attempt(s): {excerpt!r}.{self.HINTS.get(response.status_code, '')}",
            status=response.status_code,
            body=excerpt,
        )

    def _excerpt(self, text: str) -> str:
        """The start of ``text`` with the API key redacted first (a cut must not split it)."""
        if self._api_key and self._api_key in text:
            text = text.replace(self._api_key, "***")
        return text[:_EXCERPT_CHARS]


def parse_retry_after(value: str | None) -> float | None:
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
    if when.tzinfo is None:  # a date with no zone ("-0000") cannot be compared with now
        return None
    return max(when.timestamp() - time.time(), 0.0)


def as_count(value: Any) -> int:
    """A token count from a provider's usage block (0 when absent or not a count)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
