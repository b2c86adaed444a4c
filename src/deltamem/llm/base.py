"""The LLM port: chat messages in, text and token usage out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

Message = dict[str, str]  # {"role": "system"|"user"|"assistant", "content": "..."}


@dataclass(frozen=True, slots=True)
class Completion:
    """One model answer and what it cost.

    ``stop_reason`` is why the model stopped, as the provider says it (``stop``/``end_turn``,
    ``length``/``max_tokens``, ``tool_use``, ...; empty when unknown): an answer cut off by
    ``max_tokens`` is not worth repairing.
    """

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float = 0.0
    model: str = ""
    stop_reason: str = ""

    @property
    def truncated(self) -> bool:
        """Whether the answer was cut off by ``max_tokens``."""
        return self.stop_reason in ("length", "max_tokens")


@runtime_checkable
class LLM(Protocol):
    """A chat model.

    ``schema`` is a JSON schema the answer must follow; providers that can enforce it (llama.cpp
    grammars, OpenAI ``response_format``, an Anthropic tool the model must call) do so, the
    others only ask for it in the prompt. Callers
    validate the answer either way (see ``deltamem.extract.structured``).
    """

    name: str

    def complete(
        self,
        messages: Sequence[Message],
        *,
        schema: dict[str, Any] | None = None,
        temperature: float = 0.0,
        max_tokens: int = 512,
    ) -> Completion: ...
