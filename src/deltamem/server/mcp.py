"""The MCP face of the memory: tools ``recall``, ``learn``, ``show``, ``consolidate``, ``stats``.

Run it as ``deltamem mcp --db P --space S`` or ``python -m deltamem.server.mcp --db P --space S``
(stdio by default; ``--transport http --port N`` serves streamable HTTP on loopback). Tool results
are the same JSON the CLI's ``--json`` and the REST server return. Library errors reach the agent
as tool errors carrying the library's message, which says what to do.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal, ParamSpec, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

from deltamem.episodes import episode_from_dict
from deltamem.errors import DeltaMemError
from deltamem.memory import DeltaMem

P = ParamSpec("P")
R = TypeVar("R")

INSTRUCTIONS = (
    "deltamem is an experience memory. Before starting a task, call `recall` with the goal and "
    "a short description of the scene, and put the returned `context` in front of your plan. "
    "After finishing (successfully or not), call `learn` with the goal, the scene, every step "
    "you took with what you observed, and whether it worked."
)


class StepArg(BaseModel):
    """One turn of an episode."""

    action: str = Field(description="The action taken, e.g. 'open door to kitchen'.")
    observation: str = Field("", description="What the environment answered.")
    thought: str | None = Field(None, description="Optional reasoning before the action.")


def _library_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Turn library errors into tool errors whose message reaches the agent."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except DeltaMemError as exc:
            raise ToolError(f"{type(exc).__name__}: {exc}") from exc

    return wrapper


def build_server(mem: DeltaMem, *, name: str = "deltamem") -> MCPServer:
    """An MCP server exposing ``mem`` (one space) as five tools."""
    server: MCPServer = MCPServer(name=name, instructions=INSTRUCTIONS)

    @server.tool(description=(
        "Recall what the memory knows before a task: the skill (steps) for a goal and the "
        "scene knowledge for an environment. Returns `context` (text to put in your prompt), "
        "the matched nodes and scores. Either argument may be empty."))
    @_library_errors
    def recall(
        task: Annotated[str, Field(description="The goal, e.g. 'heat the apple'.")] = "",
        env: Annotated[str, Field(description="A short description of the scene.")] = "",
        top_k: Annotated[int, Field(ge=1, le=50, description="Candidates per tree.")] = 1,
        explain: Annotated[bool, Field(description="Include every scoring term.")] = False,
    ) -> dict[str, Any]:
        result = mem.recall(task, env, top_k=top_k)
        data = result.to_dict()
        if explain:
            data["explain"] = result.explain()
        return data

    @server.tool(description=(
        "Learn from one finished episode (call it after every attempt, successful or not). "
        "The memory stores only what is new: a new root, an exact delta under a similar "
        "experience, or nothing (a duplicate). Failed attempts become warnings."))
    @_library_errors
    def learn(
        task: Annotated[str, Field(description="The goal of the episode.")],
        steps: Annotated[list[StepArg], Field(description="Every step, in order.")],
        success: Annotated[bool, Field(description="Whether the goal was achieved.")],
        env: Annotated[str, Field(description="A short description of the scene.")] = "",
        score: Annotated[float | None, Field(description="Optional reward or score.")] = None,
        meta: Annotated[dict[str, Any] | None, Field(
            description="Optional metadata kept with the nodes.")] = None,
    ) -> dict[str, Any]:
        episode = episode_from_dict({
            "task": task, "env": env, "success": success, "score": score,
            "steps": [s.model_dump(exclude_none=True) for s in steps], "meta": meta or {},
        })
        return mem.learn(episode).to_dict()

    @server.tool(description=(
        "Show one memory node by id: its chain from the root, its full composed experience, "
        "its own patch and its counters."))
    @_library_errors
    def show(node_id: Annotated[str, Field(description="A node id from recall or learn.")],
             ) -> dict[str, Any]:
        return mem.show(node_id)

    @server.tool(description=(
        "Compile every frequently successful chain of experiences into a new standalone root. "
        "Safe to call any time; returns what was compiled."))
    @_library_errors
    def consolidate() -> dict[str, Any]:
        return {"consolidated": [c.to_dict() for c in mem.consolidate()]}

    @server.tool(description=(
        "Size and shape of the memory: nodes per tree, roots, deltas, failures, depth, "
        "episodes learned, and stored vs flat characters."))
    @_library_errors
    def stats() -> dict[str, Any]:
        return mem.stats()

    return server


Transport = Literal["stdio", "http"]


def run_server(mem: DeltaMem, *, transport: Transport = "stdio", host: str = "127.0.0.1",
               port: int = 8765) -> None:
    """Serve ``mem`` over stdio, or streamable HTTP at ``http://host:port/mcp``."""
    server = build_server(mem)
    if transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host=host, port=port)


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m deltamem.server.mcp --db P --space S [--transport stdio|http --port N]``."""
    parser = argparse.ArgumentParser(prog="deltamem-mcp", description=__doc__)
    parser.add_argument("--db", default="deltamem.db", help="SQLite path or postgresql:// URL")
    parser.add_argument("--space", default="default")
    parser.add_argument("--embedder", default=None, help="minilm (default), static, st:<model>")
    parser.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args(argv)
    with DeltaMem.open(args.db, space=args.space, embedder=args.embedder) as mem:
        run_server(mem, transport=args.transport, host=args.host, port=args.port)


if __name__ == "__main__":  # pragma: no cover
    main()
