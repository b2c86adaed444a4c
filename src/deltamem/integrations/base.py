"""The state every agent adapter keeps: the recall it made for a task, reused when it learns."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from deltamem.memory import DeltaMem
from deltamem.results import LearnResult, Recall
from deltamem.transcripts import episode_from_messages


class RecallLoop:
    """Recall once per task, then learn the run's transcript against that recall.

    ``env`` describes the agent's environment (the scene key of the environment tree), e.g.
    ``"python web service repository"``; it is the same for every run of one agent.
    ``budget_tokens`` caps the recalled context (see :meth:`DeltaMem.recall`).
    """

    def __init__(self, mem: DeltaMem, *, env: str = "", budget_tokens: int | None = None) -> None:
        self.mem = mem
        self.env = env
        self.budget_tokens = budget_tokens
        self.last: Recall | None = None

    def recall(self, task: str) -> Recall:
        """Recall for ``task`` (cached: the same task recalls once)."""
        if self.last is None or self.last.task.key != task or self.last.env.key != self.env:
            self.last = self.mem.recall(task, self.env, budget_tokens=self.budget_tokens)
        return self.last

    def context(self, task: str) -> str:
        """The context block for ``task`` ("" when nothing matched or the task is empty)."""
        return self.recall(task).context if task.strip() else ""

    def learn(self, messages: Iterable[Mapping[str, Any]], *, success: bool,
              task: str | None = None, meta: dict[str, Any] | None = None) -> LearnResult:
        """Learn an OpenAI-style transcript as one episode (see :mod:`deltamem.transcripts`)."""
        episode = episode_from_messages(messages, success=success, task=task, env=self.env,
                                        meta=meta)
        return self.mem.learn(episode, self.last)


def with_context(system: str | None, context: str) -> str:
    """A system prompt with the recalled context appended (the prompt alone when empty)."""
    if not context:
        return system or ""
    return f"{system}\n\n{context}" if system else context
