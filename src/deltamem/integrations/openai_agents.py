"""OpenAI Agents SDK: recall into every model call, learn the run with its outcome
(``pip install 'deltamem[openai-agents]'``).

    from agents import Runner
    from deltamem.integrations.openai_agents import DeltaMemAgents

    memory = DeltaMemAgents(mem, env="my repo")
    result = await Runner.run(agent, "fix the login test", run_config=memory.run_config())
    memory.learn(result, success=tests_pass())

:meth:`DeltaMemAgents.input_filter` is a ``RunConfig.call_model_input_filter``: it appends the
recalled context for the run's user message to the instructions of each model call.
:meth:`DeltaMemAgents.learn` turns ``result.to_input_list()`` (Responses API items) into one
episode and learns it against that recall.
"""

from __future__ import annotations

from deltamem._util.extras import require

require("openai-agents", "deltamem.integrations.openai_agents")

# ruff: noqa: E402  (the extra check above must run before these imports)
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agents import RunConfig, RunResult, RunResultStreaming
from agents.run_config import CallModelData, ModelInputData

from deltamem.engine.memory import DeltaMem
from deltamem.engine.results import LearnResult
from deltamem.formats.transcripts import content_text, messages_from_responses
from deltamem.integrations.base import RecallLoop, with_context


def current_turn(items: list[Any]) -> list[Any]:
    """The items from the last user message on (a session's history holds earlier runs)."""
    for i in range(len(items) - 1, -1, -1):
        if isinstance(items[i], Mapping) and items[i].get("role") == "user":
            return items[i:]
    return []


def request_text(items: list[Any]) -> str:
    """The text of this run's user request ("" when there is none)."""
    turn = current_turn(items)
    return content_text(turn[0].get("content")) if turn else ""


class DeltaMemAgents:
    """The memory for Agents SDK runs: an input filter to recall, ``learn`` for the outcome."""

    def __init__(self, mem: DeltaMem, *, env: str = "", budget_tokens: int | None = None,
                 project: str | Path | None = None, scope: str | None = None) -> None:
        """``project``: a coding agent's working directory (recall and learn scoped to its
        repository, ``integrations.coding_memory``); ``scope``: ``project``, ``user`` or
        ``global``."""
        self.loop = RecallLoop(mem, env=env, budget_tokens=budget_tokens, project=project,
                               scope=scope)

    def input_filter(self, data: CallModelData[Any]) -> ModelInputData:
        """``RunConfig.call_model_input_filter``: the instructions gain the recalled context."""
        items = list(data.model_data.input)
        context = self.loop.context(request_text(items))
        instructions = with_context(data.model_data.instructions, context) if context else (
            data.model_data.instructions)
        return ModelInputData(input=items, instructions=instructions)

    def run_config(self, **kwargs: Any) -> RunConfig:
        """A ``RunConfig`` with :meth:`input_filter` installed (``kwargs`` pass through)."""
        return RunConfig(call_model_input_filter=self.input_filter, **kwargs)

    def learn(self, result: RunResult | RunResultStreaming, *, success: bool | None = None,
              meta: dict[str, Any] | None = None) -> LearnResult | None:
        """Learn a finished run as one episode (None when it teaches nothing).

        ``success`` defaults to whether the run produced a final output -- for a coding agent
        (``project``), to the coding outcome rules; pass your own check (tests passed, the user
        accepted) when you have one.
        """
        items = list(result.to_input_list())
        if self.loop.coding is not None:  # the whole history: a task spans its follow-ups
            return self.loop.learn(messages_from_responses(items), success=success, meta=meta)
        outcome = bool(result.final_output) if success is None else success
        return self.loop.learn(messages_from_responses(current_turn(items)), success=outcome,
                               meta=meta)
