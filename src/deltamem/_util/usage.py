"""Cost accounting carried on every facade result."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(slots=True)
class Usage:
    """What one operation cost: model calls, tokens, embedding work and wall time.

    ``llm_calls_saved`` counts extraction calls skipped because the episode's trace was already
    stored (the dedup-before-the-model rule).
    """

    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    llm_calls_saved: int = 0
    embed_calls: int = 0
    embed_texts: int = 0
    wall_ms: float = 0.0

    @classmethod
    def of(cls, other: Any) -> Usage:
        """The usage an answer reports (``deltamem.formats.api.UsageOut``, or any object with
        these fields), as a :class:`Usage` that adds up."""
        return cls(other.llm_calls, other.prompt_tokens, other.completion_tokens,
                   other.llm_calls_saved, other.embed_calls, other.embed_texts, other.wall_ms)

    def add(self, other: Usage) -> Usage:
        """Accumulate ``other`` into this object (in place) and return it."""
        self.llm_calls += other.llm_calls
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.llm_calls_saved += other.llm_calls_saved
        self.embed_calls += other.embed_calls
        self.embed_texts += other.embed_texts
        self.wall_ms += other.wall_ms
        return self

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["wall_ms"] = round(self.wall_ms, 3)
        out["total_tokens"] = self.total_tokens
        return out
