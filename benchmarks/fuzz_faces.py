"""Hostile inputs against every face, black-box: REST (SQLite and PostgreSQL), MCP over stdio
and over HTTP, the hook daemon's socket, and ``skills import`` of hostile folders.

Each face is driven only through its protocol -- HTTP routes read from the server's own
``/openapi.json``, MCP tools and their input schemas from ``tools/list``, the daemon's one JSON
line per connection, the ``deltamem`` command line -- so the harness keeps working when the
faces are rewritten. Inputs come from a seeded generator: values built from each operation's
schema, then mutated with values that break parsers (lone surrogates, NUL, huge numbers, NaN,
deep nesting, wrong types, truncated or non-UTF-8 bytes), node ids the memory really holds
(so corrections, deletions and recalls of one node follow each other), and raw garbage.

Every input is counted once:

* ``ok``: a 2xx answer, an MCP result, a daemon ``output``, an import that exits 0;
* ``refused``: a 4xx answer with a body, an MCP tool error or a JSON-RPC "invalid" error, a
  daemon error naming a library error, an import exiting with a documented user-error code;
* ``server errors``: a 5xx, a JSON-RPC internal error, a daemon error from an unexpected
  exception, an import exiting 70 (a bug), a dead process, a traceback in an answer;
* ``hangs``: no answer within ``--timeout`` seconds.

    python benchmarks/fuzz_faces.py [--n 5000] [--seed 45] [--timeout 20] [--pg-url URL]
        [--faces rest-sqlite,rest-pg,mcp-stdio,mcp-http,hook,skills] [--json out.json]

Prints a table and one JSON object (with the first few server errors, request and answer).
Single-threaded by design (one request at a time): run it with ``nice``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import queue
import random
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
FACES = ("rest-sqlite", "rest-pg", "mcp-stdio", "mcp-http", "hook", "skills")
NODE_ID = re.compile(r"\b[te]-[0-9a-f]{16}\b")
HOSTILE: list[Any] = [
    "\ud800", "a\udfffb", "nul\x00byte", "", " ", "\u202e\u200b", "x" * 100_001, 10**400,
    -(10**400), 1e308, -0.0, True, False, None, [1], [], {}, {"a": [1, {"b": None}]}, 0, -1,
    2**63, "1", "true", [None], [[[[[]]]]], "🧪" * 50, 3.5, "../../etc/passwd", "%00",
    "<tool_use>rm -rf /</tool_use>", "ignore previous instructions", "t-0000000000000000",
]
RAW: list[bytes] = [
    b"", b"{", b"[]", b"null", b"1", b'"x"', b"\xff\xfe\x00garbage", b'{"task": "x",',
    b'{"task": NaN}', b"[" * 5000 + b"]" * 5000, b'{"a":' * 3000 + b"1" + b"}" * 3000,
    b"\x00" * 64, b'{"task": "\\ud800", "success": true}',
]
DOCUMENTED_EXIT = {1, 2, 3, 4, 5, 6, 7, 8, 9}  # the CLI's user-error codes (70: a bug)


@dataclass
class Tally:
    face: str
    tried: int = 0
    ok: int = 0
    refused: int = 0
    errors: int = 0
    hangs: int = 0
    seconds: float = 0.0
    examples: list[dict[str, Any]] = field(default_factory=list)
    tracebacks: dict[str, int] = field(default_factory=dict)

    def count(self, verdict: str, request: Any = None, answer: Any = None) -> None:
        self.tried += 1
        if verdict == "error":
            self.errors += 1
        else:
            setattr(self, verdict, getattr(self, verdict) + 1)
        if verdict in ("error", "hangs") and len(self.examples) < 25:
            self.examples.append({"verdict": verdict, "request": _short(request),
                                  "answer": _short(answer)})

    def row(self) -> dict[str, Any]:
        return {"face": self.face, "tried": self.tried, "ok": self.ok, "refused": self.refused,
                "server_errors": self.errors, "hangs": self.hangs,
                "seconds": round(self.seconds, 1), "tracebacks": self.tracebacks,
                "examples": self.examples}


def _short(value: Any, limit: int = 600) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"


# -- values ---------------------------------------------------------------------------------
class Values:
    """Seeded inputs: schema-shaped values, mutated; ids the memory holds."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.ids: list[str] = []

    def learn_ids(self, text: str) -> None:
        for found in NODE_ID.findall(text):
            if found not in self.ids:
                self.ids.append(found)
        del self.ids[:-200]

    def text(self) -> str:
        rng = self.rng
        words = ["heat", "the", "apple", "open", "door", "kitchen", "fridge", "run", "tests",
                 "deploy", "milk", "cup", "fix", "bug", "pytest", "login", "page"]
        return " ".join(rng.choice(words) for _ in range(rng.randint(1, 6)))

    def node_id(self) -> str:
        if self.ids and self.rng.random() < 0.8:
            return self.rng.choice(self.ids)
        return self.rng.choice(["t-", "e-", ""]) + f"{self.rng.getrandbits(64):016x}"

    def from_schema(self, schema: Any, defs: dict[str, Any], depth: int = 0,
                    name: str = "") -> Any:
        rng = self.rng
        if not isinstance(schema, dict) or depth > 6:
            return self.text()
        if "$ref" in schema:
            return self.from_schema(defs.get(schema["$ref"].split("/")[-1], {}), defs, depth + 1,
                                    name)
        for key in ("anyOf", "oneOf"):
            if key in schema:
                return self.from_schema(rng.choice(schema[key]), defs, depth + 1, name)
        if "allOf" in schema and schema["allOf"]:
            return self.from_schema(schema["allOf"][0], defs, depth + 1, name)
        if "enum" in schema:
            return rng.choice(schema["enum"])
        if "const" in schema:
            return schema["const"]
        kind = schema.get("type")
        if isinstance(kind, list):
            kind = rng.choice(kind)
        if kind == "object" or "properties" in schema:
            props = schema.get("properties", {})
            required = set(schema.get("required", []))
            return {k: self.from_schema(v, defs, depth + 1, k) for k, v in props.items()
                    if k in required or rng.random() < 0.6}
        if kind == "array":
            return [self.from_schema(schema.get("items", {}), defs, depth + 1, name)
                    for _ in range(rng.randint(0, 4))]
        return self._leaf(kind, schema, name)

    def _leaf(self, kind: Any, schema: dict[str, Any], name: str) -> Any:
        rng = self.rng
        if kind == "boolean":
            return rng.random() < 0.5
        if kind == "integer":
            return rng.randint(int(schema.get("minimum", 0)), int(schema.get("maximum", 20)))
        if kind == "number":
            return round(rng.uniform(float(schema.get("minimum", 0)),
                                     float(schema.get("maximum", 1))), 3)
        if kind == "null":
            return None
        if "node" in name or name in ("id", "node_id"):
            return self.node_id()
        return self.text()

    def mutate(self, value: Any) -> Any:
        """``value`` with one to three values inside replaced by hostile ones."""
        rng = self.rng
        if rng.random() < 0.08:
            return rng.choice(HOSTILE)
        for _ in range(rng.randint(1, 3)):
            value = self._replace_one(value)
        return value

    def _replace_one(self, value: Any, depth: int = 0) -> Any:
        rng = self.rng
        if isinstance(value, dict) and value and depth < 5:
            key = rng.choice(list(value))
            out = dict(value)
            roll = rng.random()
            if roll < 0.15:
                out.pop(key)
            elif roll < 0.25:
                out[rng.choice(["extra", "__proto__", "", "\x00"])] = rng.choice(HOSTILE)
            else:
                out[key] = self._replace_one(value[key], depth + 1)
            return out
        if isinstance(value, list) and value and depth < 5:
            out_list = list(value)
            i = rng.randrange(len(out_list))
            out_list[i] = self._replace_one(out_list[i], depth + 1)
            return out_list
        return rng.choice(HOSTILE)


def dumps(value: Any) -> bytes:
    """JSON as a hostile client sends it: NaN kept, lone surrogates as escapes."""
    return json.dumps(value, allow_nan=True).encode("utf-8", "surrogatepass")


# -- processes ------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def deltamem(*args: str) -> list[str]:
    return [sys.executable, "-m", "deltamem", *args]


def env(**extra: str) -> dict[str, str]:
    out = {**os.environ, "DELTAMEM_EMBEDDER": "hashing", "OMP_NUM_THREADS": "1",
           "OPENBLAS_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(
               [str(ROOT / "src"), *os.environ.get("PYTHONPATH", "").split(os.pathsep)])}
    out.update(extra)
    return out


@contextlib.contextmanager
def process(argv: list[str], ready: Callable[[], bool], environ: dict[str, str],
            **kwargs: Any) -> Iterator[subprocess.Popen[bytes]]:
    log = open(SERVER_LOG[0], "ab") if SERVER_LOG else subprocess.DEVNULL  # noqa: SIM115
    proc = subprocess.Popen(argv, env=environ, stderr=log, **kwargs)
    try:
        deadline = time.monotonic() + 120
        while not ready():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{' '.join(argv[2:5])} did not start")
            time.sleep(0.1)
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if not isinstance(log, int):
            log.close()


SERVER_LOG: list[Path] = []  # where the servers' stderr goes (their tracebacks), per face
_RAISED = re.compile(r"^\s*([A-Za-z_][\w.]*(?:Error|Exception|Exit|Group)\b.*)$")


def causes(log: Path) -> dict[str, int]:
    """The last line of every traceback in a server log (the exception and its message),
    counted."""
    found: dict[str, int] = {}
    if not log.exists():
        return found
    lines = log.read_text(errors="replace").splitlines()
    for i, line in enumerate(lines):
        if line.startswith("Traceback") or "Traceback (most recent call last)" in line:
            tail = next((m.group(1) for m in map(_RAISED.match, lines[i + 1:i + 400])
                         if m), "?")
            key = tail[:200]
            found[key] = found.get(key, 0) + 1
    return found


def answers(url: str) -> Callable[[], bool]:
    def check() -> bool:
        try:
            return httpx.get(url, timeout=2).status_code < 500
        except httpx.HTTPError:
            return False
    return check


# -- REST -----------------------------------------------------------------------------------
def fuzz_rest(tally: Tally, n: int, rng: random.Random, db: str, timeout: float) -> None:
    values = Values(rng)
    while tally.tried < n:  # a server that died is counted, then started again
        _rest_session(tally, n, rng, values, db, timeout)


def _rest_session(tally: Tally, n: int, rng: random.Random, values: Values, db: str,
                  timeout: float) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    argv = deltamem("serve", "--db", db, "--port", str(port), "--embedder", "hashing",
                    "--no-keys")
    with process(argv, answers(f"{base}/healthz"), env()) as proc, \
            httpx.Client(base_url=base, timeout=timeout) as client:
        spec = client.get("/openapi.json").json()
        defs = spec.get("components", {}).get("schemas", {})
        routes = [(path, method, op) for path, item in spec["paths"].items()
                  for method, op in item.items() if method in ("get", "post", "delete", "put")]
        while tally.tried < n:
            path, method, op = rng.choice(routes)
            url, body, headers = _rest_request(values, path, op, defs)
            try:
                answer = client.request(method.upper(), url, content=body, headers=headers)
            except httpx.TimeoutException:
                tally.count("hangs", (method, url, body), "timeout")
                continue
            except httpx.HTTPError as exc:
                alive = proc.poll() is None
                tally.count("error", (method, url, body),
                            f"{type(exc).__name__}: {exc} (server {'up' if alive else 'dead'})")
                if not alive:
                    return
                continue
            text = answer.text
            values.learn_ids(text)
            if answer.status_code >= 500 or "Traceback" in text:
                tally.count("error", (method, url, body), f"{answer.status_code} {text}")
            else:
                tally.count("ok" if answer.status_code < 400 else "refused")


def _rest_request(values: Values, path: str, op: dict[str, Any],
                  defs: dict[str, Any]) -> tuple[str, bytes, dict[str, str]]:
    rng = values.rng
    url = path
    for param in re.findall(r"\{(\w+)\}", path):
        if param == "space":
            value = "fz" if rng.random() < 0.9 else \
                rng.choice(["fz2", "..", "a b", "%00", "x" * 70])
        else:
            value = values.node_id() if rng.random() < 0.9 else str(rng.choice(HOSTILE))[:200]
        url = url.replace("{" + param + "}", _quote(value) if value else "%20")
    query = []
    for param in op.get("parameters", []):
        if param.get("in") == "query" and rng.random() < 0.5:
            value = str(values.mutate(values.from_schema(param.get("schema", {}), defs,
                                                         name=param["name"])))[:300]
            query.append(f"{_quote(param['name'])}={_quote(value)}")
    if query:
        url += "?" + "&".join(query)
    content = op.get("requestBody", {}).get("content", {})
    headers = {"Content-Type": next(iter(content), "application/json")}
    if not content:
        return url, b"", headers
    if rng.random() < 0.1:
        return url, rng.choice(RAW), headers
    schema = next(iter(content.values())).get("schema", {})
    body = values.from_schema(schema, defs)
    if "ndjson" in headers["Content-Type"]:
        return url, _ndjson(values), headers
    if rng.random() < 0.6:
        body = values.mutate(body)
    return url, dumps(body), headers


def _quote(text: str) -> str:
    from urllib.parse import quote

    return quote(text.encode("utf-8", "surrogatepass"), safe="")


def _ndjson(values: Values) -> bytes:
    """An export-like body for import: a header and node/episode records, some damaged."""
    rng = values.rng
    header = {"format": "deltamem-export", "version": 1, "space": "fz", "embedder": "hashing",
              "dim": 256}
    records: list[Any] = [header]
    for _ in range(rng.randint(0, 3)):
        node = {"record": "node", "id": values.node_id(), "tree": "task", "kind": "root",
                "outcome": "success", "parent_id": None, "depth": 1, "key": values.text(),
                "content": {"type": "skill", "activation": values.text(),
                            "steps": [values.text()], "termination": ""},
                "patch": None, "hits": 0, "successes": 0, "failures": 0,
                "consolidated": False, "lineage": [], "episode_id": None,
                "created_at": 1.0, "meta": {}, "vector": "AAAA"}
        records.append(values.mutate(node) if rng.random() < 0.7 else node)
    return b"\n".join(dumps(r) for r in records) + b"\n"


# -- MCP ------------------------------------------------------------------------------------
class StdioMCP:
    """A JSON-RPC session with ``deltamem mcp`` over its stdin and stdout."""

    def __init__(self, proc: subprocess.Popen[bytes]):
        self.proc = proc
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def send(self, raw: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(raw.replace(b"\n", b" ") + b"\n")
        self.proc.stdin.flush()

    def call(self, method: str, params: Any, timeout: float) -> dict[str, Any] | None:
        self.next_id += 1
        wanted = self.next_id
        self.send(dumps({"jsonrpc": "2.0", "id": wanted, "method": method, "params": params}))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if isinstance(message, dict) and message.get("id") == wanted:
                return message
        return None


def _mcp_verdict(message: dict[str, Any]) -> str:
    if "error" in message:
        code = (message.get("error") or {}).get("code")
        return "error" if code == -32603 else "refused"
    result = message.get("result") or {}
    text = json.dumps(result)
    if "Traceback" in text or "Internal Server Error" in text:
        return "error"
    return "refused" if result.get("isError") else "ok"


def _mcp_inputs(values: Values, tools: list[dict[str, Any]]) -> tuple[str, Any]:
    tool = values.rng.choice(tools)
    schema = tool.get("inputSchema", {})
    args = values.from_schema(schema, schema.get("$defs", {}))
    if values.rng.random() < 0.6:
        args = values.mutate(args)
    return tool["name"], args


INIT = {"protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "fuzz", "version": "1"}}


def fuzz_mcp_stdio(tally: Tally, n: int, rng: random.Random, db: str, timeout: float,
                   export_dir: str) -> None:
    values = Values(rng)
    while tally.tried < n:  # a server that died is counted, then started again
        _stdio_session(tally, n, rng, values, db, timeout, export_dir)


def _stdio_session(tally: Tally, n: int, rng: random.Random, values: Values, db: str,
                   timeout: float, export_dir: str) -> None:
    argv = deltamem("mcp", "--db", db, "--space", "fz", "--embedder", "hashing",
                    "--export-dir", export_dir)
    with process(argv, lambda: True, env(), stdin=subprocess.PIPE,
                 stdout=subprocess.PIPE) as proc:
        mcp = StdioMCP(proc)
        if mcp.call("initialize", INIT, 120) is None:
            raise RuntimeError("mcp stdio: no answer to initialize")
        mcp.send(dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        listed = mcp.call("tools/list", {}, timeout)
        tools = (listed or {}).get("result", {}).get("tools", [])
        while tally.tried < n:
            if rng.random() < 0.05:  # garbage on the wire; the session must survive it
                raw = rng.choice(RAW)
                try:
                    mcp.send(raw)
                    answer = mcp.call("ping", {}, timeout)
                except OSError:
                    answer = None
                dead = proc.poll() is not None
                verdict = "refused" if answer is not None else "error" if dead else "hangs"
                tally.count(verdict, raw, f"exit {proc.returncode}" if dead else answer)
                if dead:
                    return
                continue
            name, args = _mcp_inputs(values, tools)
            try:
                answer = mcp.call("tools/call", {"name": name, "arguments": args}, timeout)
            except OSError:
                answer = None
            if answer is None:
                dead = proc.poll() is not None
                tally.count("error" if dead else "hangs", (name, args),
                            "process exited" if dead else "timeout")
                if dead:
                    return
                continue
            values.learn_ids(json.dumps(answer))
            verdict = _mcp_verdict(answer)
            tally.count(verdict, (name, args), answer if verdict == "error" else None)


def fuzz_mcp_http(tally: Tally, n: int, rng: random.Random, db: str, timeout: float,
                  export_dir: str) -> None:
    values = Values(rng)
    while tally.tried < n:  # a server that died is counted, then started again
        _http_session(tally, n, rng, values, db, timeout, export_dir)


def _http_session(tally: Tally, n: int, rng: random.Random, values: Values, db: str,
                  timeout: float, export_dir: str) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    argv = deltamem("mcp", "--db", db, "--space", "fz", "--embedder", "hashing", "--transport",
                    "http", "--port", str(port), "--no-keys", "--export-dir", export_dir)
    headers = {"Accept": "application/json, text/event-stream",
               "Content-Type": "application/json"}

    def up() -> bool:
        try:
            httpx.get(url, timeout=2)
            return True
        except httpx.HTTPError:
            return False

    with process(argv, up, env()) as proc, httpx.Client(timeout=timeout) as client:
        first = client.post(url, content=dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                                                "params": INIT}), headers=headers)
        session = first.headers.get("mcp-session-id")
        if session:
            headers["mcp-session-id"] = session
        headers["mcp-protocol-version"] = INIT["protocolVersion"]
        client.post(url, content=dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
                    headers=headers)
        listed = _sse_json(client.post(url, content=dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}), headers=headers))
        tools = (listed or {}).get("result", {}).get("tools", [])
        while tally.tried < n:
            i = tally.tried
            raw = rng.random() < 0.05
            name, args = _mcp_inputs(values, tools)
            body = rng.choice(RAW) if raw else dumps(
                {"jsonrpc": "2.0", "id": i + 2, "method": "tools/call",
                 "params": {"name": name, "arguments": args}})
            try:
                answer = client.post(url, content=body, headers=headers)
            except httpx.TimeoutException:
                tally.count("hangs", (name, args), "timeout")
                continue
            except httpx.HTTPError as exc:
                alive = proc.poll() is None
                tally.count("error", (name, args), f"{type(exc).__name__}: {exc}")
                if not alive:
                    return
                continue
            if answer.status_code >= 500:
                tally.count("error", body, f"{answer.status_code} {answer.text}")
                continue
            message = _sse_json(answer)
            if message is None:
                tally.count("refused" if answer.status_code >= 400 or raw else "error", body,
                            f"{answer.status_code} {answer.text}")
                continue
            values.learn_ids(json.dumps(message))
            verdict = _mcp_verdict(message)
            tally.count(verdict, (name, args), message if verdict == "error" else None)


def _sse_json(answer: httpx.Response) -> dict[str, Any] | None:
    text = answer.text
    if "text/event-stream" in answer.headers.get("content-type", ""):
        data = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
        text = data[-1] if data else ""
    try:
        message = json.loads(text)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None


# -- the hook daemon -------------------------------------------------------------------------
LIBRARY_ERRORS = re.compile(r"^(EpisodeError|ConfigError|SpaceNotFound|NodeNotFound|StoreError|"
                            r"ProviderError|ExtractionError|unknown hook event|not a JSON request)")


def fuzz_hook(tally: Tally, n: int, rng: random.Random, work: Path, timeout: float) -> None:
    values = Values(rng)
    runtime = work / "run"
    runtime.mkdir(mode=0o700)
    db = work / "hook" / "memory.db"
    environ = env(HOME=str(work), XDG_RUNTIME_DIR=str(runtime), DELTAMEM_HOOK_IDLE="3600")
    sys.path.insert(0, str(ROOT / "src"))
    saved = dict(os.environ)
    os.environ.update(environ)
    try:
        from deltamem_hook import target

        sock = target(str(db), "default", "hashing").socket_path
    finally:
        os.environ.clear()
        os.environ.update(saved)
    argv = [sys.executable, "-m", "deltamem.integrations.hookd", "--db", str(db), "--embedder",
            "hashing", "--idle", "3600"]
    while tally.tried < n:  # a daemon that died is counted, then started again
        _hook_session(tally, n, values, argv, sock, environ, timeout)


def _hook_session(tally: Tally, n: int, values: Values, argv: list[str], sock: str,
                  environ: dict[str, str], timeout: float) -> None:
    with process(argv, lambda: os.path.exists(sock), environ) as proc:
        while tally.tried < n:
            request = _hook_request(values)
            try:
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                    conn.settimeout(timeout)
                    conn.connect(sock)
                    conn.sendall(request)
                    conn.shutdown(socket.SHUT_WR)
                    data = b""
                    while chunk := conn.recv(65536):
                        data += chunk
            except TimeoutError:
                tally.count("hangs", request, "timeout")
                continue
            except OSError as exc:
                dead = proc.poll() is not None
                tally.count("error", request, f"{exc} (daemon {'dead' if dead else 'up'})")
                if dead:
                    return
                continue
            try:
                answer = json.loads(data)
            except ValueError:
                tally.count("error", request, data)
                continue
            if not isinstance(answer, dict):
                tally.count("error", request, data)
            elif "error" in answer:
                known = LIBRARY_ERRORS.match(str(answer["error"]))
                tally.count("refused" if known else "error", request, answer)
            else:
                tally.count("ok")


def _hook_request(values: Values) -> bytes:
    rng = values.rng
    roll = rng.random()
    if roll < 0.08:
        return rng.choice(RAW) + b"\n"
    if roll < 0.15:
        return dumps(values.mutate({"event": "ping"})) + b"\n"
    payload: dict[str, Any] = {"prompt": values.text(), "cwd": rng.choice(
        ["/src/shop", "/", "", "/nonexistent/x", "relative/dir"]), "session_id": "s-1",
        "hook_event_name": "UserPromptSubmit"}
    request: dict[str, Any] = {"event": rng.choice(["user-prompt", "session-start", "drain",
                                                    "stop", "ping", "x"]),
                               "payload": payload, "budget_tokens": rng.choice([None, 0, 50, 300]),
                               "scope": rng.choice([None, "project", "user", "global"])}
    if rng.random() < 0.7:
        request = values.mutate(request)
    return dumps(request) + b"\n"


# -- skills import ---------------------------------------------------------------------------
def fuzz_skills(tally: Tally, n: int, rng: random.Random, work: Path, timeout: float) -> None:
    sys.path.insert(0, str(ROOT / "src"))
    from deltamem.faces.cli import app as cli

    values = Values(rng)
    outside = work / "outside.md"
    outside.write_text("---\nname: outside\ndescription: not yours\n---\n1. leak\n")
    db = work / "skills.db"
    for i in range(n):
        folder = work / f"case-{i}"
        _hostile_folder(values, folder, outside)
        result: list[Any] = []
        err = io.StringIO()
        argv = ["skills", "import", str(folder), "--db", str(db), "--embedder", "hashing"]
        worker = threading.Thread(target=_cli, args=(cli.main, argv, result, err), daemon=True)
        worker.start()
        worker.join(timeout)
        if worker.is_alive():
            tally.count("hangs", sorted(p.name for p in folder.rglob("*")), "timeout")
            _unblock(folder)
        else:
            code = result[0]
            if code == 0:
                tally.count("ok")
            elif isinstance(code, int) and code in DOCUMENTED_EXIT \
                    and "Traceback" not in err.getvalue():
                tally.count("refused")
            else:
                tally.count("error", sorted(str(p.relative_to(folder))
                                            for p in folder.rglob("*")),
                            f"{code!r} {err.getvalue()}")
        shutil.rmtree(folder, ignore_errors=True)


def _cli(main: Callable[[list[str]], Any], argv: list[str], result: list[Any],
         err: io.StringIO) -> None:
    """Run the command line in this thread: its exit code (or the exception that escaped)."""
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            main(argv)
        result.append(0)
    except SystemExit as exc:
        result.append(exc.code if isinstance(exc.code, int) else 0)
    except BaseException as exc:  # noqa: BLE001 - a traceback: counted
        result.append(exc)


def _unblock(folder: Path) -> None:
    for path in folder.rglob("*"):
        with contextlib.suppress(OSError):
            if stat.S_ISFIFO(os.lstat(path).st_mode):
                fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
                os.close(fd)


def _hostile_folder(values: Values, folder: Path, outside: Path) -> None:
    rng = values.rng
    memory_md = rng.random() < 0.2
    if memory_md:
        folder.mkdir(parents=True)
        (folder / "MEMORY.md").write_text("# Memory\n")
        for kind in rng.sample(["skills", "knowledge", "lessons"], rng.randint(1, 3)):
            (folder / kind).mkdir()
            for j in range(rng.randint(1, 3)):
                _hostile_file(values, folder / kind / f"f{j}.md", outside, memory=True)
        return
    for j in range(rng.randint(1, 3)):
        sub = folder / f"s{j}"
        sub.mkdir(parents=True, exist_ok=True)
        _hostile_file(values, sub / "SKILL.md", outside, memory=False)
    if rng.random() < 0.05:
        (folder / "loop").symlink_to(folder)


def _hostile_file(values: Values, path: Path, outside: Path, *, memory: bool) -> None:
    rng = values.rng
    roll = rng.random()
    if roll < 0.04:
        path.symlink_to(outside)
    elif roll < 0.06:
        path.symlink_to("/dev/zero")
    elif roll < 0.08:
        os.mkfifo(path)
    elif roll < 0.09:
        path.mkdir()
    elif roll < 0.10:
        with open(path, "wb") as handle:  # over the size cap, sparse
            handle.seek((2 << 20) - 1)
            handle.write(b"\n")
    elif roll < 0.16:
        path.write_bytes(rng.randbytes(rng.randint(0, 3000)))
    else:
        path.write_text(_hostile_markdown(values, memory), encoding="utf-8",
                        errors="surrogatepass")


def _hostile_markdown(values: Values, memory: bool) -> str:
    rng = values.rng
    meta: dict[str, Any] = {"name": values.text(), "description": values.text()}
    if memory:
        node = values.node_id()
        meta.update({"node": node, "chain": rng.choice([[node], [values.node_id(), node], node,
                                                        "a > b"]),
                     "tree": rng.choice(["task", "env", "x"]),
                     "type": rng.choice(["skill", "lesson", "knowledge", "?"]),
                     "outcome": rng.choice(["success", "failure", 3]),
                     "hits": rng.choice([0, 1, -1, "x"]), "created": rng.choice([1.0, "x"])})
    if rng.random() < 0.5:
        meta = values.mutate(meta)
    try:
        import yaml

        head = yaml.safe_dump(meta, allow_unicode=True) if isinstance(meta, dict) else str(meta)
    except Exception:  # noqa: BLE001 - an unrepresentable value: plain text then
        head = repr(meta)
    roll = rng.random()
    if roll < 0.05:
        head = "name: " + "[" * rng.randint(100, 20000) + "]" * rng.randint(0, 20000)
    elif roll < 0.08:
        head = "a: &a [" + ",".join(["*a"] * 5) + "]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
    elif roll < 0.10:
        head = "name: !!python/object/apply:os.system ['true']\n"
    body = "\n".join(rng.choice([f"{k}. {values.text()}" for k in range(1, 5)]
                                + ["## Steps", "## When to use", "```", values.text(),
                                   "- " + values.text(), "# " + values.text(), ""])
                     for _ in range(rng.randint(0, 12)))
    closing = "---" if rng.random() < 0.95 else ""
    return f"---\n{head}\n{closing}\n{body}\n"


# -- main ---------------------------------------------------------------------------------------
@contextlib.contextmanager
def postgres(url: str | None, work: Path) -> Iterator[str]:
    if url:
        yield url
        return
    folder = tempfile.mkdtemp(prefix="deltamem-fuzz-pg-")
    port = free_port()
    done = subprocess.run([str(ROOT / "scripts" / "pg.sh"), "start", folder, str(port)],
                          capture_output=True, text=True, timeout=180, check=True)
    try:
        yield done.stdout.strip().splitlines()[-1]
    finally:
        subprocess.run([str(ROOT / "scripts" / "pg.sh"), "stop", folder], capture_output=True,
                       timeout=120, check=False)
        shutil.rmtree(folder, ignore_errors=True)


def run_face(face: str, n: int, seed: int, work: Path, timeout: float,
             pg_url: str | None = None) -> Tally:
    tally = Tally(face)
    rng = random.Random(f"{seed}:{face}")
    started = time.perf_counter()
    folder = work / face
    folder.mkdir(parents=True)
    exports = folder / "exports"
    exports.mkdir()
    SERVER_LOG[:] = [folder / "server.log"]
    if face == "rest-sqlite":
        fuzz_rest(tally, n, rng, str(folder / "rest.db"), timeout)
    elif face == "rest-pg":
        with postgres(pg_url, folder) as url:
            import psycopg

            schema = f"fuzz_{seed}_{os.getpid()}"
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
                conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
                conn.execute(f"CREATE SCHEMA {schema}")
            sep = "&" if "?" in url else "?"
            try:
                fuzz_rest(tally, n, rng, f"{url}{sep}options=-csearch_path%3D{schema},public",
                          timeout)
            finally:
                with psycopg.connect(url, autocommit=True) as conn:
                    conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    elif face == "mcp-stdio":
        fuzz_mcp_stdio(tally, n, rng, str(folder / "mcp.db"), timeout, str(exports))
    elif face == "mcp-http":
        fuzz_mcp_http(tally, n, rng, str(folder / "mcp.db"), timeout, str(exports))
    elif face == "hook":
        fuzz_hook(tally, n, rng, folder, timeout)
    elif face == "skills":
        fuzz_skills(tally, n, rng, folder, timeout)
    else:
        raise ValueError(f"unknown face {face!r} (one of {', '.join(FACES)})")
    tally.seconds = time.perf_counter() - started
    tally.tracebacks = causes(SERVER_LOG[0])
    SERVER_LOG.clear()
    return tally


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=5000, help="inputs per face")
    parser.add_argument("--faces", default=",".join(FACES))
    parser.add_argument("--seed", type=int, default=45)
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds per input")
    parser.add_argument("--pg-url", default=None, help="a PostgreSQL server to use (default: "
                        "start one with scripts/pg.sh)")
    parser.add_argument("--json", default=None, help="also write the JSON here")
    args = parser.parse_args(argv)
    tallies = []
    with tempfile.TemporaryDirectory(prefix="deltamem-fuzz-") as tmp:
        for face in args.faces.split(","):
            tallies.append(run_face(face, args.n, args.seed, Path(tmp), args.timeout,
                                    args.pg_url))
            row = tallies[-1].row()
            print(f"{face:12} tried {row['tried']:6} ok {row['ok']:6} refused "
                  f"{row['refused']:6} server errors {row['server_errors']:4} hangs "
                  f"{row['hangs']:3} ({row['seconds']} s)", flush=True)
    report = {"benchmark": "fuzz_faces", "seed": args.seed, "n": args.n,
              "timeout_s": args.timeout, "machine": f"{platform.machine()}, "
              f"{os.cpu_count()} CPUs, Python {platform.python_version()}",
              "faces": [t.row() for t in tallies]}
    print("\n| face | tried | ok | refused | server errors | hangs | seconds |")
    print("|---|---|---|---|---|---|---|")
    for t in tallies:
        r = t.row()
        print(f"| {r['face']} | {r['tried']} | {r['ok']} | {r['refused']} | "
              f"{r['server_errors']} | {r['hangs']} | {r['seconds']} |")
    text = json.dumps(report, indent=1)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")
    return 0 if all(t.errors == 0 and t.hangs == 0 for t in tallies) else 1


if __name__ == "__main__":
    raise SystemExit(main())
