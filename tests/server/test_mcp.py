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
import httpx2
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
         "export_skills", "correct", "forget_node", "forget_fact"}
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
                                          "budget_tokens": 120})
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
    top_k = tools["recall"].input_schema["properties"]["top_k"]
    assert [t.get("maximum") for t in top_k.get("anyOf", [top_k])][0] == 100
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
    # A block's head (header, activation, the source naming its node) is about 95 tokens.
    assert 0 < budgeted["context_tokens"] <= 120 < out["recalled"][0]["context_tokens"]
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
                                       env={**os.environ, "DELTAMEM_EXPORT_DIR": str(tmp_path)})
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            return await scenario(s, tmp_path / "export")

    check(anyio.run(run), tmp_path / "export")


class HttpServer(str):
    """The server's URL, with API keys of its database: ``key`` (read and write on its space),
    ``reader`` (read only) and ``other`` (another space)."""

    key: str
    reader: str
    other: str
    limited: str
    lacking: dict[str, str]  # per scope, a key on the space holding every other scope


SCOPES = ("read", "write", "admin")


def _keys(db: Path) -> tuple[str, str, str, str, dict[str, str]]:
    from deltamem.faces.server.keys import open_keys

    keys = open_keys(str(db))
    try:
        lacking = {scope: keys.create(["s1"], scopes=[s for s in SCOPES if s != scope])[1]
                   for scope in SCOPES}
        return (keys.create(["s1"])[1], keys.create(["s1"], scopes=["read"])[1],
                keys.create(["elsewhere"], scopes=["read", "write", "admin"])[1],
                keys.create(["s1"], rate_limit=2)[1], lacking)
    finally:
        keys.close()


def _authed(url: str, key: str | None) -> AbstractAsyncContextManager[Any]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers))


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[HttpServer]:
    """The MCP server over streamable HTTP on a free loopback port, in its own process."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    key, reader, other, limited, lacking = _keys(tmp_path / "h.db")
    proc = subprocess.Popen([sys.executable, str(LAUNCHER), str(tmp_path / "h.db"), "s1", "http",
                             str(port)], stderr=subprocess.PIPE,
                            env={**os.environ, "DELTAMEM_EXPORT_DIR": str(tmp_path)})
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
        url = HttpServer(f"http://127.0.0.1:{port}/mcp")
        url.key, url.reader, url.other, url.limited = key, reader, other, limited
        url.lacking = lacking
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_streamable_http_client_uses_every_tool(http_server: HttpServer, tmp_path: Path) -> None:
    """The same scenario over streamable HTTP (the transport remote agents use)."""

    async def run() -> dict[str, Any]:
        transport = _authed(http_server, http_server.key)
        async with transport as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            return await scenario(s, tmp_path / "export")

    check(anyio.run(run), tmp_path / "export")


def test_cli_mcp_command_serves_over_stdio(tmp_path: Path) -> None:
    """`deltamem mcp --db --space --embedder` starts a working server (the one entry point)."""

    async def run() -> tuple[list[str], dict[str, Any]]:
        params = StdioServerParameters(command=sys.executable, args=[
            "-m", "deltamem", "mcp", "--db", str(tmp_path / "m.db"),
            "--space", "s2", "--embedder", "hashing"], env=dict(os.environ))
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            names = sorted(t.name for t in (await s.list_tools()).tools)
            result = await s.call_tool("stats", {})
            return names, result.structured_content or {}

    names, stats = anyio.run(run)
    assert set(names) == TOOLS
    assert stats["episodes"] == 0 and stats["task"]["nodes"] == 0


def test_each_http_session_scores_its_own_last_recall(http_server: HttpServer) -> None:
    """record_outcome without ids uses the caller's own last recall, not another client's."""

    async def run() -> tuple[str, bool]:
        a = _authed(http_server, http_server.key)
        b = _authed(http_server, http_server.key)
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
    from deltamem.faces.server.mcp import build_server
    from helpers import make_episode

    mem.learn(make_episode())
    server = build_server(mem)

    async def run() -> tuple[Any, Any]:
        recalled = await server.call_tool("recall", {"task": "heat the apple"})
        return recalled, await server.call_tool("record_outcome", {"success": True})

    recalled, outcome = anyio.run(run)
    assert recalled.content[0].text.startswith("# Skill memory")
    assert outcome.structured_content["nodes"] == [recalled.structured_content["task"]["node"]]


def test_recall_and_list_tools_take_filters(mem) -> None:
    """The recall and list tools filter on episode meta; a bad filter is a tool error."""
    from mcp.server.mcpserver.exceptions import ToolError

    from deltamem.faces.server.mcp import build_server
    from helpers import make_episode

    alice = mem.learn(make_episode(user="alice"))
    bob = mem.learn(make_episode(actions=("go to kitchen", "open microwave", "take apple",
                                          "heat apple"), user="bob"))
    server = build_server(mem)

    async def run() -> tuple[Any, Any]:
        recalled = await server.call_tool("recall", {"task": "heat the apple",
                                                     "filters": {"user": "bob"}})
        listed = await server.call_tool("list", {"filters": {"user": "alice"}, "tree": "task"})
        return recalled, listed

    async def bad() -> None:
        await server.call_tool("recall", {"task": "x", "filters": {"": "bob"}})

    recalled, listed = anyio.run(run)
    assert recalled.structured_content["task"]["node"] == bob.task.node
    assert [n["id"] for n in listed.structured_content["nodes"]] == [alice.task.node]
    with pytest.raises(ToolError, match="ConfigError: filter key '' must be a non-empty"):
        anyio.run(bad)


def _post(url: str, key: str | None) -> httpx2.Response:
    """A raw MCP initialize request, with or without a key."""
    headers = {"Accept": "application/json, text/event-stream",
               "Content-Type": "application/json"}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "probe", "version": "0"}}}
    with httpx2.Client(timeout=30) as client:
        return client.post(url, json=body, headers=headers)


def test_http_refuses_calls_without_a_key_for_the_space(http_server: HttpServer) -> None:
    """MCP over HTTP asks for the REST server's API keys: none or a wrong one is 401, a key
    for another space 403, in the REST error envelope; a right one gets through."""
    missing = _post(http_server, None)
    assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
    assert missing.json()["error"]["type"] == "Unauthorized"
    assert _post(http_server, "dmk_nope_nope").status_code == 401
    elsewhere = _post(http_server, http_server.other)
    assert elsewhere.status_code == 403 and "'s1'" in elsewhere.json()["error"]["message"]
    assert _post(http_server, http_server.key).status_code == 200
    statuses = [_post(http_server, http_server.limited) for _ in range(3)]
    assert [r.status_code for r in statuses] == [200, 200, 429]  # the key's own limit: 2/min
    assert int(statuses[2].headers["retry-after"]) >= 1


def test_http_tools_need_the_key_scope(http_server: HttpServer) -> None:
    """A read-only key may recall and look, but not learn (write scope), over HTTP."""

    async def run() -> tuple[bool, Any, Any]:
        async with _authed(http_server, http_server.reader) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            recalled = await s.call_tool("recall", {"task": "heat the apple"})
            learned = await s.call_tool("learn", {"task": "heat the apple", "steps": STEPS,
                                                  "success": True})
            stats = await s.call_tool("stats", {})
            return recalled.is_error, learned, stats.structured_content

    recall_failed, learned, stats = anyio.run(run)
    assert not recall_failed
    assert learned.is_error and "lacks the 'write' scope" in learned.content[0].text
    assert stats is not None and stats["episodes"] == 0


def test_every_tool_refuses_a_key_lacking_its_scope(http_server: HttpServer) -> None:
    """Every tool the server lists, called over HTTP with a key holding every scope but the
    tool's own, is refused before it runs, whatever the tool's signature; the memory is left
    as it was (a read key once deleted and corrected nodes through forget_node and correct)."""
    from deltamem.faces.server.mcp import tool_scopes

    async def run() -> tuple[list[str], dict[str, Any], Any, Any]:
        async with _authed(http_server, http_server.key) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            learned = await s.call_tool("learn", {"task": "heat the apple", "steps": STEPS,
                                                  "success": True})
            node = learned.structured_content["task"]["node"]
            names = sorted(t.name for t in (await s.list_tools()).tools)
        answers: dict[str, Any] = {}
        args = {"node_id": node, "node_ids": [node], "wrong": True, "success": False,
                "task": "heat the apple", "steps": STEPS, "dir": "x"}
        for name in names:
            lacking = http_server.lacking[tool_scopes()[name]]
            async with _authed(http_server, lacking) as (r, w), ClientSession(r, w) as s:
                await s.initialize()
                answers[name] = await s.call_tool(name, args)
        async with _authed(http_server, http_server.key) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            shown = await s.call_tool("show", {"node_id": node})
            stats = await s.call_tool("stats", {})
        return names, answers, shown, stats.structured_content

    names, answers, shown, stats = anyio.run(run)
    scopes = tool_scopes()
    assert set(names) == set(scopes)
    for name, answer in answers.items():
        assert answer.is_error, name
        assert f"lacks the {scopes[name]!r} scope" in answer.content[0].text, name
    assert not shown.is_error  # not deleted
    assert stats["episodes"] == 1 and stats["task"]["nodes"] == 1  # not corrected, not learned


def test_export_skills_writes_only_under_the_configured_folder(mem, tmp_path: Path) -> None:
    """Without an export folder the tool is refused; with one, a relative dir lands inside it
    and a dir outside it (absolute, or climbing out with ..) is refused, writing nothing; an
    OS error says why."""
    from mcp.server.mcpserver.exceptions import ToolError

    from deltamem.faces.server.mcp import build_server
    from helpers import make_episode

    mem.learn(make_episode())
    root = tmp_path / "exports"
    outside = tmp_path / "elsewhere"
    root.mkdir()
    (root / "blocker").write_text("a file, not a folder")

    async def call(server: Any, dir: str) -> Any:
        try:
            return (await server.call_tool("export_skills", {"dir": dir})).structured_content
        except ToolError as exc:
            return str(exc)

    async def run() -> list[Any]:
        off, on = build_server(mem), build_server(mem, export_root=root)
        return [await call(off, str(outside)), await call(on, "agent-1"),
                await call(on, str(outside)), await call(on, "../elsewhere"),
                await call(on, "blocker/x"), await call(on, str(root / "ok"))]

    off, inside, absolute, climbing, blocked, absolute_inside = anyio.run(run)
    assert "export_skills is off" in off
    assert inside["dir"] == str(root / "agent-1") and (root / "agent-1" / "knowledge").is_dir()
    assert absolute_inside["dir"] == str(root / "ok")
    assert "outside the export folder" in absolute and "outside the export folder" in climbing
    assert not outside.exists()
    reason = blocked.partition("cannot write skills to 'blocker/x':")[2]
    assert reason.strip(), blocked  # the OS's reason, not an empty message


def test_stdio_answers_a_request_the_sdk_cannot_parse(tmp_path: Path) -> None:
    """A tools/call whose arguments hold a lone surrogate (JSON Python reads, but the SDK's
    parser refuses) gets a JSON-RPC error with its id; it used to get no answer at all, so the
    client waited forever. The server goes on answering."""
    import json
    import select

    proc = subprocess.Popen([sys.executable, str(LAUNCHER), str(tmp_path / "r.db"), "s1"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None

    def send(line: str) -> None:
        assert proc.stdin is not None
        proc.stdin.write(line.encode() + b"\n")
        proc.stdin.flush()

    def answer() -> dict[str, Any]:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        assert ready, "no answer"
        return dict(json.loads(proc.stdout.readline()))

    try:
        send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}}))
        assert answer()["id"] == 1
        send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        send('{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "recall", '
             '"arguments": {"task": "a\\ud800"}}}')
        refused = answer()
        assert refused["id"] == 2 and refused["error"]["code"] == -32602
        assert "lone surrogate" in refused["error"]["message"]
        # A line nested past Python's parser (issue 45 fuzz: it ended the server, exit 70).
        send("[" * 5000 + "]" * 5000)
        send('{"a":' * 5000 + "1" + "}" * 5000)
        send(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                         "params": {"name": "stats", "arguments": {}}}))
        stats = answer()
        while "id" not in stats:  # the parse errors the SDK reports as notifications
            stats = answer()
        assert stats["id"] == 3 and stats["result"]["structuredContent"]["episodes"] == 0
    finally:
        proc.kill()
        proc.wait()


def test_tool_errors_keep_the_servers_addresses_and_secrets_private(tmp_path: Path) -> None:
    """A tool error names neither the database file, nor the LLM endpoint, nor a configured key
    (issue 34 item 5: the REST error bodies already hid them; the MCP tools did not)."""
    import sqlite3

    from mcp.server.mcpserver.exceptions import ToolError

    from deltamem import DeltaMem
    from deltamem.config import secret
    from deltamem.embed.hashing import HashingEmbedder
    from deltamem.errors import ProviderError
    from deltamem.extract.trace import TraceExtractor
    from deltamem.faces.server.mcp import build_server
    from deltamem.store.sqlite import SQLiteStore

    key = "sk-FAKE5b1d0c7e29a4f6b8d3e1c0a9b7f5e3d1c2b4a6"
    secret("DELTAMEM_LLM_API_KEY", key)
    path = tmp_path / "private-folder" / "memory.db"
    mem = DeltaMem(SQLiteStore(path, busy_timeout=0.2), HashingEmbedder(), TraceExtractor())
    server = build_server(mem)
    episode = {"task": "heat the apple", "steps": STEPS, "success": True}

    async def call() -> str:
        with pytest.raises(ToolError) as caught:
            await server.call_tool("learn", episode)
        return str(caught.value)

    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another writer holds the database
    try:
        locked = anyio.run(call)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert "StoreError" in locked and "locked" in locked
    assert "private-folder" not in locked and "<server-side>" in locked

    class ProviderDown(TraceExtractor):  # a test double: its model endpoint fails
        def extract(self, *args: Any, **kwargs: Any) -> Any:  # noqa: ARG002
            raise ProviderError(f"http://10.0.0.7:8080/v1/chat/completions answered 401 for "
                                f"Bearer {key}")

    mem.close()
    mem = DeltaMem(SQLiteStore(path), HashingEmbedder(), ProviderDown())
    server = build_server(mem)
    down = anyio.run(call)
    mem.close()
    assert "ProviderError" in down and "401" in down
    assert "10.0.0.7" not in down and key[3:15] not in down
