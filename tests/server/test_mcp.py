"""The MCP server over stdio, driven by the official SDK client in a real subprocess."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

pytestmark = pytest.mark.server

LAUNCHER = Path(__file__).with_name("mcp_double.py")
STEPS = [{"action": "go to kitchen", "observation": "You are in the kitchen."},
         {"action": "take apple", "observation": "You take the apple."},
         {"action": "heat apple", "observation": "The apple is hot."}]


def payload(result: Any) -> dict[str, Any]:
    """The JSON a tool returned (structured content, else its text)."""
    assert not result.is_error, result.content
    if result.structured_content is not None:
        data = result.structured_content
        return data.get("result", data) if set(data) == {"result"} else data
    return json.loads(result.content[0].text)


async def session_run(db: Path, calls: Any) -> Any:
    params = StdioServerParameters(command=sys.executable, args=[str(LAUNCHER), str(db), "s1"])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        return await calls(session)


def test_agent_lists_tools_and_learns_then_recalls(tmp_path: Path) -> None:
    """An SDK client sees the five tools with descriptions, learns, and recalls the skill."""

    async def calls(session: ClientSession) -> dict[str, Any]:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        learned = payload(await session.call_tool("learn", {
            "task": "heat the apple", "env": "a kitchen with a microwave", "steps": STEPS,
            "success": True}))
        recalled = payload(await session.call_tool("recall", {"task": "heat the apple"}))
        stats = payload(await session.call_tool("stats", {}))
        shown = payload(await session.call_tool("show", {"node_id": learned["task"]["node"]}))
        bad = await session.call_tool("learn", {"task": "", "steps": [], "success": True})
        missing = await session.call_tool("show", {"node_id": "t-nope"})
        return {"tools": tools, "learned": learned, "recalled": recalled, "stats": stats,
                "shown": shown, "bad": bad, "missing": missing}

    out = anyio.run(session_run, tmp_path / "mcp.db", calls)
    tools = out["tools"]
    assert set(tools) == {"recall", "learn", "show", "consolidate", "stats"}
    assert all(len(t.description or "") > 40 for t in tools.values())
    learn_schema = tools["learn"].input_schema
    assert set(learn_schema["required"]) == {"task", "steps", "success"}
    assert out["learned"]["task"]["action"] == "root"
    assert out["recalled"]["task"]["matched"] is True
    assert "1. go to kitchen" in out["recalled"]["context"]
    assert out["stats"]["episodes"] == 1
    assert out["shown"]["experience"]["steps"] == ["go to kitchen", "take apple", "heat apple"]
    assert out["bad"].is_error and "task" in out["bad"].content[0].text
    assert out["missing"].is_error and "NodeNotFound" in out["missing"].content[0].text


def test_module_entry_point_serves_over_stdio(tmp_path: Path) -> None:
    """`python -m deltamem.server.mcp --db --space --embedder` starts a working server."""

    async def calls(session: ClientSession) -> tuple[list[str], dict[str, Any]]:
        names = sorted(t.name for t in (await session.list_tools()).tools)
        return names, payload(await session.call_tool("stats", {}))

    async def run() -> tuple[list[str], dict[str, Any]]:
        params = StdioServerParameters(command=sys.executable, args=[
            "-m", "deltamem.server.mcp", "--db", str(tmp_path / "m.db"), "--space", "s2",
            "--embedder", "hashing"])
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return await calls(session)

    names, stats = anyio.run(run)
    assert names == ["consolidate", "learn", "recall", "show", "stats"]
    assert stats["episodes"] == 0 and stats["task"]["nodes"] == 0
