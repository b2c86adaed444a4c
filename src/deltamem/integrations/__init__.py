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

from deltamem.integrations.base import RecallLoop

__all__ = ["RecallLoop"]
