"""Token budgets: refuse a call *before* it is sent if it could overspend."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from deltamem.errors import BudgetExceeded, ConfigError
from deltamem.llm.base import LLM, Completion, Message

# Chat templates add a few tokens of role markup around every message.
_PER_MESSAGE_OVERHEAD = 4


def estimate_tokens(text: str) -> int:
    """Rough token count for budgeting: one token per 4 characters, rounded up.

    It over-counts plain English slightly for BPE tokenizers, which is the safe side for a
    budget; pass ``count_tokens`` to :class:`BudgetedLLM` for an exact tokenizer.
    """
    return (len(text) + 3) // 4


def estimate_prompt_tokens(
    messages: Sequence[Message], count_tokens: Callable[[str], int] = estimate_tokens
) -> int:
    """Estimated prompt size of a chat request, including per-message markup."""
    return sum(count_tokens(m.get("content", "")) + _PER_MESSAGE_OVERHEAD for m in messages)


class BudgetedLLM:
    """Wraps an :class:`LLM` and enforces per-call and running-total token budgets.

    Before each call the worst case (estimated prompt tokens + ``max_tokens``) is checked against
    both budgets; if either would be exceeded, :class:`BudgetExceeded` is raised and nothing is
    sent. After the call the *reported* usage is added to the totals (the estimate is used when
    the provider reports no usage).

    Args:
        inner: The model to call.
        max_tokens_per_call: Ceiling on prompt + completion tokens of one call (None = no limit).
        max_tokens_total: Ceiling on all tokens spent through this wrapper (None = no limit).
        count_tokens: Token counter used for the pre-send estimate.
    """

    def __init__(
        self,
        inner: LLM,
        max_tokens_per_call: int | None = None,
        max_tokens_total: int | None = None,
        *,
        count_tokens: Callable[[str], int] = estimate_tokens,
    ):
        for label, value in (("max_tokens_per_call", max_tokens_per_call),
                             ("max_tokens_total", max_tokens_total)):
            if value is not None and value <= 0:
                raise ConfigError(f"{label} must be a positive token count, got {value}")
        self.inner = inner
        self.name = inner.name
        self.max_tokens_per_call = max_tokens_per_call
        self.max_tokens_total = max_tokens_total
        self.count_tokens = count_tokens
        self.calls = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self._reserved = 0
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return (
            f"BudgetedLLM({self.inner!r}, max_tokens_per_call={self.max_tokens_per_call}, "
            f"max_tokens_total={self.max_tokens_total}, used={self.total_tokens})"
        )

    @property
    def total_tokens(self) -> int:
        """Tokens spent so far through this wrapper."""
        return self.prompt_tokens + self.completion_tokens

    @property
    def remaining(self) -> int | None:
        """Tokens left in the total budget (None when there is no total budget)."""
        if self.max_tokens_total is None:
            return None
        return max(self.max_tokens_total - self.total_tokens - self._reserved, 0)

    def complete(
        self,
        messages: Sequence[Message],
        *,
        schema: dict[str, Any] | None = None,
        temperature: float = 0.0,
        max_tokens: int = 512,
    ) -> Completion:
        """Check the budgets, then delegate to the wrapped model and record its usage.

        Raises:
            BudgetExceeded: the call could exceed a budget; the wrapped model was not called.
        """
        estimated_prompt = estimate_prompt_tokens(messages, self.count_tokens)
        worst_case = estimated_prompt + max_tokens
        with self._lock:
            if self.max_tokens_per_call is not None and worst_case > self.max_tokens_per_call:
                raise BudgetExceeded(
                    f"{self.name}: this call may use ~{worst_case} tokens ({estimated_prompt} "
                    f"prompt + {max_tokens} max answer), over max_tokens_per_call="
                    f"{self.max_tokens_per_call}. Shorten the prompt, lower max_tokens or raise "
                    "the per-call budget."
                )
            if (
                self.max_tokens_total is not None
                and self.total_tokens + self._reserved + worst_case > self.max_tokens_total
            ):
                raise BudgetExceeded(
                    f"{self.name}: this call may use ~{worst_case} tokens but only "
                    f"{self.remaining} of max_tokens_total={self.max_tokens_total} are left. "
                    "Raise the total budget or start a new session."
                )
            # Reserve the worst case so concurrent callers cannot jointly overspend.
            self._reserved += worst_case
        try:
            completion = self.inner.complete(
                messages, schema=schema, temperature=temperature, max_tokens=max_tokens
            )
        finally:
            with self._lock:
                self._reserved -= worst_case
        with self._lock:
            self.calls += 1
            self.prompt_tokens += completion.prompt_tokens or estimated_prompt
            self.completion_tokens += completion.completion_tokens or self.count_tokens(
                completion.text
            )
        return completion
