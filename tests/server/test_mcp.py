"""The MCP server driven by the official SDK client, over stdio and over streamable HTTP.

Every call's structuredContent is checked against the tool's own published outputSchema (the
SDK client checks too), and the text content a model reads is checked for its first lines.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

pytestmark = pytest.mark.server

LAUNCHER = Path(__file__).with_name("mcp_double.py")
# The SDK gives a stdio server a minimal environment; pass ours so the server imports this
# checkout's code (PYTHONPATH) like the test does.
TOOLS = {"recall", "learn", "record_outcome", "show", "list", "consolidate", "stats",
         "export_skills", "correct", "forget_node"}
STEPS = [{"action": "go to kitchen", "observation": "You are in the kitchen."},
         {"action": "take apple", "observation": "You take the apple."},
         {"action": "heat apple", "observation": "The apple is hot."}]
TRANSCRIPT = [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "make the login test pass"},
    {"role": "assistant", "content": "Run the tests first.", "tool_calls": [
        {"id": "c1", "type": "function",
         "function": {"name": "bash", "arguments": '{"command": "pytest -q tests/"}'}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "1 failed: KeyError 'email'"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c2", "type": "function",
         "function": {"name": "edit", "arguments": {"path": "app/login.py", "line": 12}}}]},
    {"role": "tool", "tool_call_id": "c2", "content": "edited"},
    {"role": "assistant", "content": "The login test passes now."},
]

Calls = Callable[[ClientSession], Awaitable[dict[str, Any]]]


class Checked:
    """A session wrapper: every tool result is validated against that tool's outputSchema."""

    def __init__(self, session: ClientSession, schemas: dict[str, dict[str, Any]]):
        self.session, self.schemas = session, schemas

    async def ok(self, name: str, args: dict[str, Any]) -> tuple[dict[str, Any], str]:
        result = await self.session.call_tool(name, args)
        assert not result.is_error, result.content
        data = result.structured_content
        assert data is not None
        jsonschema.validate(data, self.schemas[name])
        return data, result.content[0].text

    async def error(self, name: str, args: dict[str, Any]) -> str:
        result = await self.session.call_tool(name, args)
        assert result.is_error
        return str(result.content[0].text)


async def scenario(session: ClientSession, export_dir: Path) -> dict[str, Any]:
    listed = (await session.list_tools()).tools
    tools = {t.name: t for t in listed}
    c = Checked(session, {t.name: t.output_schema for t in listed if t.output_schema})
    out: dict[str, Any] = {"tools": tools}
    out["empty"] = await c.ok("recall", {"task": "heat the apple"})
    out["learned"] = await c.ok("learn", {"task": "heat the apple", "env": "a kitchen",
                                          "steps": STEPS, "success": True})
    out["from_messages"] = await c.ok("learn", {"messages": TRANSCRIPT, "success": True,
                                                "env": "python web app repository"})
    out["recalled"] = await c.ok("recall", {"task": "heat the apple", "env": "a kitchen",
                                            "explain": True})
    out["budget"] = await c.ok("recall", {"task": "heat the apple", "env": "a kitchen",
                                          "budget_tokens": 80})
    out["outcome"] = await c.ok("record_outcome", {"success": True})
    node = out["learned"][0]["task"]["node"]
    out["shown"] = await c.ok("show", {"node_id": node})
    out["listed"] = await c.ok("list", {"tree": "task", "limit": 1})
    out["dry"] = await c.ok("consolidate", {"dry_run": True})
    out["stats"] = await c.ok("stats", {})
    out["export"] = await c.ok("export_skills", {"dir": str(export_dir), "layout": "memory-md"})
    out["bad_learn"] = await c.error("learn", {"task": "", "steps": [], "success": True})
    out["both"] = await c.error("learn", {"task": "x", "steps": STEPS, "messages": TRANSCRIPT,
                                          "success": True})
    out["missing"] = await c.error("show", {"node_id": "t-nope"})
    out["bounds"] = await c.error("recall", {"task": "x", "top_k": 500})
    return out


def check(out: dict[str, Any], export_dir: Path) -> None:
    tools = out["tools"]
    assert set(tools) == TOOLS
    assert all(len(t.description or "") > 120 for t in tools.values())
    assert all(t.output_schema for t in tools.values())
    hints = {n: (t.annotations.read_only_hint, t.annotations.destructive_hint,
                 t.annotations.idempotent_hint) for n, t in tools.items()}
    assert hints["recall"] == (True, False, True)
    assert hints["learn"] == (False, False, False)
    assert hints["export_skills"] == (False, True, True)
    assert tools["recall"].input_schema["properties"]["top_k"]["maximum"] == 100
    assert tools["learn"].input_schema["required"] == ["success"]

    data, text = out["empty"]
    assert data["context"] == "" and text.startswith("(no memory matched")
    data, text = out["learned"]
    assert data["task"]["action"] == "root" and text.startswith("learned episode ep-")
    data, _ = out["from_messages"]
    assert data["task"]["action"] == "root"
    data, text = out["recalled"]
    assert data["task"]["matched"] and data["env"]["matched"]
    assert data["explain"]["task"]["candidates"]
    # The context block comes first; the text is far shorter than the structured JSON.
    assert text.startswith(data["context"]) and "1. go to kitchen" in text
    assert text.endswith("]") and "skill: t-" in text
    budgeted, _ = out["budget"]
    assert 0 < budgeted["context_tokens"] <= 80 < out["recalled"][0]["context_tokens"]
    data, text = out["outcome"]
    assert data["nodes"] == [out["recalled"][0]["task"]["node"], out["recalled"][0]["env"]["node"]]
    assert text.startswith("counted a success on t-")
    data, text = out["shown"]
    assert data["experience"]["steps"] == ["go to kitchen", "take apple", "heat apple"]
    assert "1. go to kitchen" in text
    data, _ = out["listed"]
    assert data["total"] == 2 and data["truncated"] and len(data["nodes"]) == 1
    assert out["dry"][0] == {"dry_run": True, "consolidated": []}
    data, _ = out["stats"]
    assert data["episodes"] == 2 and data["task"]["nodes"] == 2
    data, _ = out["export"]
    assert (export_dir / "MEMORY.md").is_file() and len(data["skills"]) == 2
    assert "task" in out["bad_learn"]
    assert "exactly one of" in out["both"]
    assert "NodeNotFound" in out["missing"]
    assert "top_k" in out["bounds"]


def test_stdio_client_uses_every_tool(tmp_path: Path) -> None:
    """An SDK client spawns the server over stdio and exercises all eight tools."""

    async def run() -> dict[str, Any]:
        params = StdioServerParameters(command=sys.executable,
                                       args=[str(LAUNCHER), str(tmp_path / "m.db"), "s1"],
                                       env=dict(os.environ))
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            return await scenario(s, tmp_path / "export")

    check(anyio.run(run), tmp_path / "export")


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[str]:
    """The MCP server over streamable HTTP on a free loopback port, in its own process."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen([sys.executable, str(LAUNCHER), str(tmp_path / "h.db"), "s1", "http",
                             str(port)], stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                assert time.monotonic() < deadline, "MCP HTTP server did not start"
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_streamable_http_client_uses_every_tool(http_server: str, tmp_path: Path) -> None:
    """The same scenario over streamable HTTP (the transport remote agents use)."""

    async def run() -> dict[str, Any]:
        transport: AbstractAsyncContextManager[Any] = streamable_http_client(http_server)
        async with transport as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            return await scenario(s, tmp_path / "export")

    check(anyio.run(run), tmp_path / "export")


def test_cli_mcp_command_serves_over_stdio(tmp_path: Path) -> None:
    """`deltamem mcp --db --space --embedder` starts a working server (the one entry point)."""

    async def run() -> tuple[list[str], dict[str, Any]]:
        params = StdioServerParameters(command=sys.executable, args=[
            "-c", "from deltamem.cli import main; main()", "mcp", "--db", str(tmp_path / "m.db"),
            "--space", "s2", "--embedder", "hashing"], env=dict(os.environ))
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            names = sorted(t.name for t in (await s.list_tools()).tools)
            result = await s.call_tool("stats", {})
            return names, result.structured_content or {}

    names, stats = anyio.run(run)
    assert set(names) == TOOLS
    assert stats["episodes"] == 0 and stats["task"]["nodes"] == 0


def test_each_http_session_scores_its_own_last_recall(http_server: str) -> None:
    """record_outcome without ids uses the caller's own last recall, not another client's."""

    async def run() -> tuple[str, bool]:
        a: AbstractAsyncContextManager[Any] = streamable_http_client(http_server)
        b: AbstractAsyncContextManager[Any] = streamable_http_client(http_server)
        async with a as (ra, wa), ClientSession(ra, wa) as sa, b as (rb, wb), \
                ClientSession(rb, wb) as sb:
            await sa.initialize()
            await sb.initialize()
            await sa.call_tool("learn", {"task": "heat the apple", "steps": STEPS,
                                         "success": True})
            await sa.call_tool("recall", {"task": "heat the apple"})
            other = await sb.call_tool("record_outcome", {"success": True})
            own = await sa.call_tool("record_outcome", {"success": True})
            return str(other.content[0].text), own.is_error

    other, own_failed = anyio.run(run)
    assert "call recall first" in other and not own_failed


def test_server_tools_called_in_process(mem) -> None:
    """build_server's tools also work when called directly, outside a client request."""
    from deltamem.server.mcp import build_server
    from helpers import make_episode

    mem.learn(make_episode())
    server = build_server(mem)

    async def run() -> tuple[Any, Any]:
        recalled = await server.call_tool("recall", {"task": "heat the apple"})
        return recalled, await server.call_tool("record_outcome", {"success": True})

    recalled, outcome = anyio.run(run)
    assert recalled.content[0].text.startswith("# Skill memory")
    assert outcome.structured_content["nodes"] == [recalled.structured_content["task"]["node"]]
