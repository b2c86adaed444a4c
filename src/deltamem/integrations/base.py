"""The state every agent adapter keeps: the recall it made for a task, reused when it learns.

With ``project`` (a coding agent's working directory) the loop is a coding agent's memory
(``integrations.coding_memory``): the context is the project's note and the note of a past task like
the request, within the scope and the token budgets of the hooks; learning splits the run's
messages into tasks (follow-ups included), judges the outcome by the coding rules unless one is
given, and keeps project knowledge in that project.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from deltamem.engine.memory import DeltaMem
from deltamem.engine.results import LearnResult, Recall
from deltamem.formats.transcripts import episode_from_messages
from deltamem.integrations import env as hook_env
from deltamem.integrations.coding_memory import CodingMemory


class RecallLoop:
    """Recall once per task, then learn the run's transcript against that recall.

    ``env`` describes the agent's environment (the scene key of the environment tree), e.g.
    ``"python web service repository"``; it is the same for every run of one agent.
    ``budget_tokens`` caps the recalled context (see :meth:`DeltaMem.recall`).
    """

    def __init__(self, mem: DeltaMem, *, env: str = "", budget_tokens: int | None = None,
                 project: str | Path | None = None, scope: str | None = None) -> None:
        self.mem = mem
        self.budget_tokens = budget_tokens
        self.last: Recall | None = None
        self.coding = CodingMemory.for_directory(mem, project, scope=scope or hook_env.scope()) \
            if project is not None else None
        self.env = self.coding.scene if self.coding is not None else env

    def recall(self, task: str) -> Recall:
        """Recall for ``task`` (cached: the same task recalls once)."""
        if self.last is None or self.last.task.key != task or self.last.env.key != self.env:
            self.last = self.mem.recall(task, self.env, budget_tokens=self.budget_tokens)
        return self.last

    def context(self, task: str) -> str:
        """The context block for ``task`` ("" when nothing matched or the task is empty)."""
        if not task.strip():
            return ""
        if self.coding is not None:
            notes = (self.coding.session_note(hook_env.hook_budget("session-start")),
                     self.coding.task_note(task, self.budget_tokens if self.budget_tokens
                                           is not None else hook_env.hook_budget("user-prompt")))
            return "\n\n".join(n for n in notes if n)
        return self.recall(task).context

    def learn(self, messages: Iterable[Mapping[str, Any]], *, success: bool | None,
              task: str | None = None, meta: dict[str, Any] | None = None
              ) -> LearnResult | None:
        """Learn an OpenAI-style transcript (see :mod:`deltamem.formats.transcripts`): as one
        episode, or for a coding agent (``project``) as its tasks, each judged by the coding rules
        unless ``success`` is given (None when it teaches nothing)."""
        messages = list(messages)
        if self.coding is not None:
            if task is not None:
                episode = self.coding.episode(messages, task=task, success=success, meta=meta)
                return self.coding.learn(episode) if episode is not None else None
            done = self.coding.learn_session(messages, verdict=success, meta=meta)
            return done[-1] if done else None
        if success is None:
            raise ValueError("success is required unless the loop has a project")
        episode = episode_from_messages(messages, success=success, task=task, env=self.env,
                                        meta=meta)
        return self.mem.learn(episode, self.last)


def with_context(system: str | None, context: str) -> str:
    """A system prompt with the recalled context appended (the prompt alone when empty)."""
    if not context:
        return system or ""
    return f"{system}\n\n{context}" if system else context
