"""LLM test doubles: deterministic stand-ins for a real model, for tests only.

They are named as doubles on purpose; the product never falls back to them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from deltamem.llm.base import Completion, Message


def _words(text: str) -> int:
    # A stable stand-in for a token count, so usage accounting can be asserted exactly.
    return len(text.split())


@dataclass(frozen=True, slots=True)
class LLMCall:
    """One recorded call to a test double."""

    messages: tuple[Message, ...]
    schema: dict[str, Any] | None
    temperature: float
    max_tokens: int

    @property
    def prompt(self) -> str:
        """All message contents joined, for substring assertions."""
        return "\n".join(m.get("content", "") for m in self.messages)


class ScriptedLLM:
    """Test double that returns queued answers in order and records every call.

    An ``Exception`` in the queue is raised instead of answered (to script provider failures).
    Token usage is counted in whitespace-separated words. Running out of answers raises
    ``AssertionError``: a test that calls the model more often than scripted is wrong.
    """

    def __init__(self, answers: Sequence[str | Exception], name: str = "scripted"):
        self.answers: list[str | Exception] = list(answers)
        self.name = name
        self.calls: list[LLMCall] = []

    @property
    def remaining(self) -> int:
        """Answers not yet consumed."""
        return len(self.answers)

    def complete(
        self,
        messages: Sequence[Message],
        *,
        schema: dict[str, Any] | None = None,
        temperature: float = 0.0,
        max_tokens: int = 512,
    ) -> Completion:
        """Record the call and return (or raise) the next scripted answer."""
        call = _record(self.calls, messages, schema, temperature, max_tokens)
        if not self.answers:
            raise AssertionError(f"ScriptedLLM ran out of answers at call {len(self.calls)}")
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return _completion(call, answer, self.name)


class FunctionLLM:
    """Test double whose answer is computed by ``fn(messages, schema)``; records every call.

    ``fn`` may return the answer text or a full :class:`Completion`.
    """

    def __init__(
        self,
        fn: Callable[[Sequence[Message], dict[str, Any] | None], str | Completion],
        name: str = "function",
    ):
        self.fn = fn
        self.name = name
        self.calls: list[LLMCall] = []

    def complete(
        self,
        messages: Sequence[Message],
        *,
        schema: dict[str, Any] | None = None,
        temperature: float = 0.0,
        max_tokens: int = 512,
    ) -> Completion:
        """Record the call and return ``fn``'s answer."""
        call = _record(self.calls, messages, schema, temperature, max_tokens)
        result = self.fn(call.messages, schema)
        return result if isinstance(result, Completion) else _completion(call, result, self.name)


def _record(calls: list[LLMCall], messages: Sequence[Message], schema: dict[str, Any] | None,
            temperature: float, max_tokens: int) -> LLMCall:
    call = LLMCall(tuple(dict(m) for m in messages), schema, temperature, max_tokens)
    calls.append(call)
    return call


def _completion(call: LLMCall, text: str, model: str) -> Completion:
    return Completion(text=text, prompt_tokens=_words(call.prompt),
                      completion_tokens=_words(text), model=model)
