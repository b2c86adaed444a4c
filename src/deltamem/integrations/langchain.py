"""LangChain v1 / LangGraph: a middleware that recalls into the model request and learns after
the run, and tools for explicit recall and learn (``pip install 'deltamem[langchain]'``).

    from langchain.agents import create_agent
    from deltamem.integrations.langchain import DeltaMemMiddleware

    agent = create_agent(model, tools, middleware=[DeltaMemMiddleware(mem, env="my repo")])

:class:`DeltaMemMiddleware` appends the recalled context for the run's user message to the
system prompt of every model call (``wrap_model_call``), and after the run (``after_agent``)
learns the run (the last user message and what followed) as one episode. The outcome is
``success(messages)``; by default a run succeeded when it ended in an answer and its last tool
call did not fail.
"""

from __future__ import annotations

from deltamem._util.extras import require

require("langchain", "deltamem.integrations.langchain")

# ruff: noqa: E402  (the extra check above must run before these imports)
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_openai_messages,
)
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.runtime import Runtime
from pydantic import BaseModel, Field

from deltamem.engine.memory import DeltaMem
from deltamem.engine.results import LearnResult
from deltamem.formats import api
from deltamem.integrations.base import RecallLoop, with_context

Judge = Callable[[Sequence[AnyMessage]], bool]


def finished_cleanly(messages: Sequence[AnyMessage]) -> bool:
    """The default outcome: the run ended in an answer and its last tool result is no error."""
    if not messages or not isinstance(messages[-1], AIMessage) or messages[-1].tool_calls:
        return False
    tools = [m for m in messages if isinstance(m, ToolMessage)]
    return not tools or tools[-1].status != "error"


def current_turn(messages: Sequence[AnyMessage]) -> Sequence[AnyMessage]:
    """The messages from the last user message on: this run's request and what followed (a
    thread with a checkpointer holds earlier runs too)."""
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], HumanMessage):
            return messages[i:]
    return []


def request_text(messages: Sequence[AnyMessage]) -> str:
    """The text of this run's user request ("" when there is none)."""
    turn = current_turn(messages)
    return turn[0].text if turn else ""


def _marked_errors(messages: Sequence[AnyMessage]) -> list[AnyMessage]:
    """Failed tool results get an ``error: `` prefix (the chat format has no status field), so
    the failure shows in the learned episode as it does for the other adapters."""
    return [m.model_copy(update={"content": f"error: {m.text}"})
            if isinstance(m, ToolMessage) and m.status == "error" else m for m in messages]


class DeltaMemMiddleware(AgentMiddleware):
    """Recall into every model call of a run; learn the run when it ends.

    Args:
        mem: the memory.
        env: the agent's environment description (the scene key).
        success: judges a finished run from its messages (default :func:`finished_cleanly`;
            for a coding agent, the coding outcome rules of ``extract.coding_session``).
        learn: set False to only recall.
        budget_tokens: cap on the recalled context.
        project: a coding agent's working directory: recall and learn as a coding agent's
            memory scoped to its repository (``integrations.coding_memory``), instead of ``env``.
        scope: for ``project``: ``project``, ``user`` or ``global`` (default ``DELTAMEM_SCOPE``).
    """

    def __init__(self, mem: DeltaMem, *, env: str = "", success: Judge | None = None,
                 learn: bool = True, budget_tokens: int | None = None,
                 project: str | Path | None = None, scope: str | None = None) -> None:
        super().__init__()
        self.loop = RecallLoop(mem, env=env, budget_tokens=budget_tokens, project=project,
                               scope=scope)
        self.success = success if success is not None or project is not None \
            else finished_cleanly
        self.learns = learn
        self.learned: LearnResult | None = None

    def _with_memory(self, request: ModelRequest) -> ModelRequest:
        context = self.loop.context(request_text(request.messages))
        if not context:
            return request
        prompt = with_context(request.system_prompt, context)
        return request.override(system_message=SystemMessage(content=prompt))

    def wrap_model_call(self, request: ModelRequest,
                        handler: Callable[[ModelRequest], ModelResponse]) -> ModelResponse:
        return handler(self._with_memory(request))

    async def awrap_model_call(
        self, request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]]) -> ModelResponse:
        return await handler(self._with_memory(request))

    def after_agent(self, state: AgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        turn = current_turn(state["messages"])
        if not self.learns or not turn:
            return None
        verdict = self.success(turn) if self.success is not None else None
        if self.loop.coding is not None:  # the whole thread: a task spans its follow-ups
            thread = convert_to_openai_messages(_marked_errors(state["messages"]))
            self.learned = self.loop.learn(thread, success=verdict)
        else:
            self.learned = self.loop.learn(convert_to_openai_messages(_marked_errors(turn)),
                                           success=verdict)
        return None

    async def aafter_agent(self, state: AgentState,
                           runtime: Runtime[Any]) -> dict[str, Any] | None:
        return self.after_agent(state, runtime)


class _RecallArgs(BaseModel):
    task: api.QueryText = Field(description="The goal, e.g. 'fix the failing login test'.")
    env: api.QueryText = Field("", description="A short description of the scene.")


class _LearnArgs(BaseModel):
    """The tool's arguments: the fields of :class:`deltamem.formats.api.EpisodeIn` an agent
    gives."""

    task: api.RequiredText = Field(description="The goal of the episode.")
    steps: list[api.StepIn] = Field(max_length=api.MAX_STEPS,
                                    description="Every step, in order.")
    success: bool = Field(description="Whether the goal was achieved.")
    env: api.OptionalText = Field("", description="A short description of the scene.")


def memory_tools(mem: DeltaMem) -> list[BaseTool]:
    """``deltamem_recall`` and ``deltamem_learn`` as LangChain tools over ``mem``."""
    from deltamem.formats.episodes import episode_from_dict

    def recall(task: str, env: str = "") -> str:
        return mem.recall(task, env).context or "(no memory matched)"

    def learn(task: str, steps: list[api.StepIn], success: bool, env: str = "") -> str:
        episode = episode_from_dict({"task": task, "env": env, "success": success, "steps": [
            s.model_dump(exclude_none=True) for s in steps]})
        result = mem.learn(episode)
        return f"learned: task {result.task.action}, env {result.env.action}"

    return [
        StructuredTool.from_function(
            recall, name="deltamem_recall", args_schema=_RecallArgs,
            description="Recall skills and scene knowledge from past episodes before a task."),
        StructuredTool.from_function(
            learn, name="deltamem_learn", args_schema=_LearnArgs,
            description="Store a finished episode (steps and outcome) in the experience memory."),
    ]
