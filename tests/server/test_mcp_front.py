"""The fast front of ``deltamem mcp`` (:mod:`deltamem_launch`): it answers ``initialize`` and the
listings (``tools/list`` ...) before the SDK is imported, with the SDK server's own answers, and
hands the stream over to the SDK server, which never answers those requests a second time.

The SDK server's answer is taken from a real ``deltamem mcp`` process with the front switched
off (``DELTAMEM_MCP_FRONT=0``); the sessions run real processes over pipes, and one is driven by
the ``mcp`` client SDK over stdio.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types.version
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from test_mcp import TOOLS, check, scenario

from deltamem.faces.server.mcp_serve import _Dropping
from deltamem_launch import (
    FRONT_ENV,
    answer_initialize,
    answer_listings,
    front_wanted,
    input_ended,
    listings,
)
from deltamem_launch.handshake import HANDSHAKE_VERSIONS

pytestmark = pytest.mark.server

SERVE = ["-m", "deltamem_launch", "mcp", "--db", ":memory:", "--embedder", "hashing"]
REPO = Path(__file__).resolve().parents[2]


def initialize(rid: int | str, version: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "initialize",
            "params": {"protocolVersion": version, "capabilities": {"roots": {}},
                       "clientInfo": {"name": "front-test", "version": "1"}}}


def start(front: bool) -> subprocess.Popen[bytes]:
    env = {**os.environ, FRONT_ENV: "1" if front else "0"}
    return subprocess.Popen([sys.executable, *SERVE], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)


def front_answer(line: bytes) -> tuple[bytes, bytes, str | int | None]:
    """What the front writes for a first line ``line``, what it hands over, and the id."""
    read, feed = os.pipe()
    answers, write = os.pipe()
    try:
        os.write(feed, line)
        os.close(feed)
        handed, answered = answer_initialize(read, write)
        os.close(write)
        with os.fdopen(answers, "rb") as out:
            return out.read(), handed, answered
    finally:
        os.close(read)


VERSIONS = [*HANDSHAKE_VERSIONS, "1999-01-01"]  # the last: unknown, the latest is offered


def test_the_front_knows_the_sdks_handshake_versions() -> None:
    assert tuple(mcp_types.version.HANDSHAKE_PROTOCOL_VERSIONS) == HANDSHAKE_VERSIONS
    assert HANDSHAKE_VERSIONS[-1] == mcp_types.version.LATEST_HANDSHAKE_VERSION


def test_the_front_answers_initialize_as_the_sdk_server_does() -> None:
    """For every protocol version (and an unknown one), the front's answer is byte for byte
    the SDK server's, serverInfo's name and version included."""
    procs = {}
    for n, version in enumerate(VERSIONS):
        proc = procs[version] = start(front=False)
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(initialize(n, version)).encode() + b"\n")
        proc.stdin.close()
    for n, version in enumerate(VERSIONS):
        proc = procs[version]
        assert proc.stdout is not None and proc.stderr is not None
        sdk, err = proc.stdout.read(), proc.stderr.read()
        assert proc.wait(120) == 0 and sdk.count(b"\n") == 1, err
        line = json.dumps(initialize(n, version)).encode() + b"\n"
        mine, handed, answered = front_answer(line)
        assert (mine, handed, answered) == (sdk, line, n)
        offered = json.loads(mine)["result"]["protocolVersion"]
        assert offered == (version if version in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1])


@pytest.mark.parametrize("line", [
    b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}\n',  # not initialize
    b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}\n',  # invalid params
    b'{"jsonrpc": "2.0", "id": true, "method": "initialize"}\n',
    b'{"jsonrpc": "2.0", "id": "\\udc80", "method": "initialize", "params": {}}\n',
    b'not json\n',
])
def test_the_front_leaves_every_other_first_line_to_the_sdk(line: bytes) -> None:
    written, handed, answered = front_answer(line + b'{"later": 1}\n')
    assert (written, handed, answered) == (b"", line, None)  # nothing read past the line
    assert front_answer(b"") == (b"", b"", None)  # end of input at once


def test_the_front_survives_a_client_that_is_gone() -> None:
    """No stdin, or nobody reading stdout: no exception (the SDK server meets the same end)."""
    read, write = os.pipe()
    os.close(read)  # nobody reads the answers
    feed_r, feed_w = os.pipe()
    os.write(feed_w, json.dumps(initialize(1, "2025-06-18")).encode() + b"\n")
    os.close(feed_w)
    try:
        line, answered = answer_initialize(feed_r, write)
        assert line.startswith(b"{") and answered is None
    finally:
        os.close(feed_r)
        os.close(write)
    assert answer_initialize(-1, -1) == (b"", None)  # no stdin at all


def test_an_option_the_cli_refuses_is_reported_after_the_early_answer(tmp_path: Path) -> None:
    """The front answers before the CLI reads its options; a refused one then ends the server
    with the CLI's one-line error and exit code, no traceback (the client still connected: one
    that has closed stdin is gone, and the process just ends, see below)."""
    proc = subprocess.Popen([sys.executable, "-m", "deltamem_launch", "mcp", "--db",
                             str(tmp_path / "m.db"), "--embedder", "no-such-embedder"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**os.environ, FRONT_ENV: "1"})
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    proc.stdin.write(json.dumps(initialize(1, "2025-06-18")).encode() + b"\n")
    proc.stdin.flush()
    try:
        assert json.loads(proc.stdout.readline())["id"] == 1
        assert proc.wait(120) == 3
    finally:
        proc.stdin.close()
    error = proc.stderr.read().decode()
    assert error.startswith("error: ") and "Traceback" not in error


def session(front: bool, lines: list[dict[str, Any] | bytes], until: int) -> list[dict[str, Any]]:
    """Every message a ``deltamem mcp`` process writes for ``lines``, stdin kept open until
    the answer with id ``until`` came."""
    proc = start(front)
    assert proc.stdin is not None and proc.stdout is not None
    for line in lines:
        proc.stdin.write(line if isinstance(line, bytes) else json.dumps(line).encode() + b"\n")
    proc.stdin.flush()
    out = []
    try:
        while not out or out[-1].get("id") != until:
            raw = proc.stdout.readline()
            assert raw, proc.stderr.read().decode() if proc.stderr else ""
            out.append(json.loads(raw))
        proc.stdin.close()
        out += [json.loads(raw) for raw in proc.stdout.read().splitlines()]
        assert proc.wait(60) == 0
    finally:
        proc.kill()
        proc.wait(60)
    return out


INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
PROMPTS = {"jsonrpc": "2.0", "id": "p", "method": "prompts/list", "params": {"_meta": {}}}
STATS = {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
         "params": {"name": "stats", "arguments": {}}}


def test_the_sdk_server_takes_over_without_a_second_answer() -> None:
    """With the front, the session reads as without it: one answer to initialize and to each
    listing (the front's), then the SDK server's answers, the negotiated version kept."""
    lines: list[dict[str, Any] | bytes] = [initialize(1, "2025-03-26"), INITIALIZED, LIST,
                                           PROMPTS, STATS]
    fast, slow = session(True, lines, 3), session(False, lines, 3)
    assert [m.get("id") for m in fast] == [1, 2, "p", 3]
    assert fast == slow
    assert {t["name"] for t in fast[1]["result"]["tools"]} == TOOLS
    assert "error" not in fast[3] and not fast[3]["result"].get("isError")


def test_the_listings_table_is_the_sdk_servers() -> None:
    """The front's table (``listings.json``) holds the SDK server's answers for every protocol
    version: ``scripts/mcp_listings.py --check`` asks a real server."""
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "mcp_listings.py"),
                           "--check"], capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    assert {t["name"] for t in listings()["tools/list"]["tools"]} == TOOLS


def front_listings(lines: list[dict[str, Any] | bytes], busy: bool = True,
                   table: dict[str, Any] | None = None,
                   ) -> tuple[list[dict[str, Any]], list[bytes], dict[str | int, Any]]:
    """What the front writes for the lines after ``initialize`` (the SDK still loading while
    ``busy``), the lines it hands over and the answers it gave by id."""
    read, feed = os.pipe()
    answers, write = os.pipe()
    done, loaded = os.pipe()
    try:
        os.write(feed, b"".join(line if isinstance(line, bytes)
                                else json.dumps(line).encode() + b"\n" for line in lines))
        os.close(feed)
        if not busy:
            os.write(loaded, b".")
        handed, answered = answer_listings(read, write, done,
                                           listings() if table is None else table)
        os.close(write)
        with os.fdopen(answers, "rb") as out:
            return [json.loads(x) for x in out.read().splitlines()], handed, answered
    finally:
        for fd in (read, done, loaded):
            os.close(fd)


def test_the_front_answers_the_listings_while_the_sdk_loads() -> None:
    """A notification is read and left to the SDK; each listing is answered from the table; the
    first request the front cannot answer ends its reading, nothing past that line taken."""
    lines: list[dict[str, Any] | bytes] = [INITIALIZED, LIST, PROMPTS, STATS, LIST]
    written, handed, answered = front_listings(lines)
    assert [a["id"] for a in written] == [2, "p"] and list(answered) == [2, "p"]
    assert written[0]["result"] == listings()["tools/list"] == answered[2]["result"]
    assert written[1]["result"] == {"prompts": []}
    assert [json.loads(line) for line in handed] == [INITIALIZED, LIST, PROMPTS, STATS]


@pytest.mark.parametrize("line", [
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"cursor": "x"}},  # a page
    {"jsonrpc": "2.0", "id": True, "method": "tools/list"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": None},
    {"jsonrpc": "2.0", "id": 2, "method": "ping", "params": {"_meta": 1}},
    {"jsonrpc": "2.0", "id": 2, "method": "no/such"},
    b'{"jsonrpc": "2.0", "id": "\\udc80", "method": "tools/list"}\n',  # a lone surrogate
    b"not json\n",
])
def test_the_front_leaves_every_other_request_to_the_sdk(line: dict[str, Any] | bytes) -> None:
    written, handed, answered = front_listings([line, LIST])
    assert (written, answered, len(handed)) == ([], {}, 1)  # nothing read past the line
    assert front_listings([LIST], table={}) == ([], [json.dumps(LIST).encode() + b"\n"], {})


def test_the_front_stops_reading_once_the_sdk_is_loaded() -> None:
    assert front_listings([LIST], busy=False) == ([], [], {})
    assert front_listings([LIST, LIST]) == ([{**listings_answer(2)}], [
        json.dumps(LIST).encode() + b"\n"] * 2, {2: listings_answer(2)})  # an id used twice


def listings_answer(rid: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": listings()["tools/list"]}


def test_an_sdk_answer_that_differs_from_the_fronts_is_reported(
        capsys: pytest.CaptureFixture[str]) -> None:
    """A stale table shows: the SDK server's answer to a request answered early is dropped
    (the client has one), and a difference is written to stderr."""
    from mcp import types
    from mcp.shared.message import SessionMessage

    class Sink:
        def __init__(self) -> None:
            self.sent: list[Any] = []

        async def send(self, item: Any) -> None:
            self.sent.append(item)

    sink = Sink()
    drop = _Dropping(sink, {2: listings_answer(2), 4: {"jsonrpc": "2.0", "id": 4,
                                                       "result": {"tools": []}}})

    def answer(rid: int, result: dict[str, Any]) -> Any:
        return SessionMessage(types.JSONRPCResponse(jsonrpc="2.0", id=rid, result=result))

    async def run() -> None:
        await drop.send(answer(2, listings()["tools/list"]))
        await drop.send(answer(4, listings()["tools/list"]))
        await drop.send(answer(2, {}))  # a later answer with that id is the SDK's own

    anyio.run(run)
    assert [item.message.id for item in sink.sent] == [2]
    err = capsys.readouterr().err
    assert "request 4 given early differs" in err and "request 2" not in err


def test_a_first_line_the_front_leaves_is_answered_by_the_sdk_server() -> None:
    """A first line the front does not answer reaches the SDK server: an initialize it
    refuses, and a request only Python's parser reads (a lone surrogate), which the server
    answers with an error instead of dropping."""
    bad_init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    got = session(True, [bad_init], 1)
    assert got == session(False, [bad_init], 1) and "error" in got[0]
    surrogate = b'{"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {"x": "\\udc80"}}\n'
    got = session(True, [surrogate], 7)
    assert got[0]["error"]["code"] == -32602 and "lone surrogate" in got[0]["error"]["message"]


def test_the_mcp_client_sdk_drives_a_whole_session_through_the_front(tmp_path: Path) -> None:
    """The ``mcp`` client SDK over stdio: initialize (answered by the front), then every tool
    of the SDK server, results and errors, as in test_mcp."""

    async def run() -> tuple[Any, dict[str, Any]]:
        params = StdioServerParameters(command=sys.executable, args=[
            "-m", "deltamem_launch", "mcp", "--db", str(tmp_path / "m.db"), "--space", "s1",
            "--embedder", "hashing"], env={**os.environ, FRONT_ENV: "1",
                                            "DELTAMEM_EXPORT_DIR": str(tmp_path)})
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            init = await s.initialize()
            return init, await scenario(s, tmp_path / "export")

    init, out = anyio.run(run)
    assert init.server_info.name == "deltamem" and "recall" in (init.instructions or "")
    check(out, tmp_path / "export")


@pytest.mark.parametrize(("args", "wanted"), [
    (["mcp", "--db", "m.db"], True),
    (["mcp", "--transport", "stdio"], True),
    (["mcp", "--transport", "http"], False),
    (["mcp", "--transport=http"], False),
    (["mcp", "--help"], False),
    (["recall", "x"], False),
    ([], False),
])
def test_the_front_runs_only_for_mcp_over_stdio(args: list[str], wanted: bool,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(FRONT_ENV, raising=False)
    assert front_wanted(args) is wanted
    monkeypatch.setenv(FRONT_ENV, "0")
    assert front_wanted(args) is False


def test_input_ended_tells_a_closed_pipe_without_reading_it() -> None:
    """Pending bytes and an open, empty pipe are not the end; a closed writer with nothing
    left is (and nothing is taken from the pipe to tell)."""
    read, write = os.pipe()
    try:
        assert not input_ended(read)  # open, empty
        os.write(write, b"x")
        assert not input_ended(read)  # a byte waits
        os.close(write)
        assert not input_ended(read)  # closed, but the byte still waits for the SDK
        assert os.read(read, 1) == b"x"
        assert input_ended(read)
    finally:
        os.close(read)


def test_the_front_exits_when_the_client_closes_stdin_after_the_listings() -> None:
    """A print-mode client closes stdin once it has the listings: the process ends with 0 and
    says nothing (it no longer finishes importing the SDK for nobody)."""
    proc = start(front=True)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    proc.stdin.write(json.dumps(initialize(0, HANDSHAKE_VERSIONS[-1])).encode() + b"\n"
                     + json.dumps(LIST).encode() + b"\n")
    proc.stdin.close()
    answers = [json.loads(line) for line in proc.stdout.read().splitlines()]
    assert proc.wait(120) == 0 and proc.stderr.read() == b""
    assert [a["id"] for a in answers] == [0, LIST["id"]]
