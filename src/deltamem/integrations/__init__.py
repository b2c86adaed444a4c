"""Adapters that plug the memory into agent frameworks, each behind its own extra.

* :mod:`deltamem.integrations.langchain` -- LangChain v1 / LangGraph middleware and tools
  (``pip install 'deltamem[langchain]'``);
* :mod:`deltamem.integrations.openai_agents` -- OpenAI Agents SDK run hooks and input filter
  (``pip install 'deltamem[openai-agents]'``);
* :mod:`deltamem.integrations.claude_code` -- Claude Code and Codex hook commands (no extra).

Each adapter does the same three things: recall before the model call, learn (with the
outcome) after the run, and expose recall/learn as tools. :class:`RecallLoop` holds the state
they share.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deltamem.integrations.base import RecallLoop

__all__ = ["RecallLoop"]


def __getattr__(name: str) -> Any:
    # Loaded when asked for: the hook daemon (``integrations.hookd``) imports this package first
    # and needs the engine only after it listens.
    if name == "RecallLoop":
        from deltamem.integrations.base import RecallLoop

        return RecallLoop
    raise AttributeError(f"module 'deltamem.integrations' has no attribute {name!r}")
