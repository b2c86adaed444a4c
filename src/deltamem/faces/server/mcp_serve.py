"""Serving the MCP face (:mod:`deltamem.faces.server.mcp`): over stdio, or streamable HTTP behind
the REST server's API keys.

* stdio: the SDK's loop, except that a request line the SDK's stricter parser refuses (a lone
  surrogate) is answered with a JSON-RPC error rather than dropped, so no client waits forever,
  and that it takes over from the fast front of the ``deltamem`` command (:mod:`deltamem_launch`),
  which may have read the first lines and answered ``initialize`` and the listings already
  (:func:`hand_over`);
* HTTP: :class:`KeyAuth` checks every request's key (it must cover the space, and the per-key
  rate limit holds) and leaves the verified key in the request state, where the one tool
  dispatcher (:class:`~deltamem.faces.server.mcp.ScopedServer`) checks each tool's scope.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from mcp.server.mcpserver import MCPServer

from deltamem._util.jsonsafe import text_problem
from deltamem.engine.memory import DeltaMem
from deltamem.errors import ConfigError
from deltamem.faces.server.keys import is_loopback
from deltamem.faces.server.mcp import KEY_STATE, build_server

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

    from deltamem.faces.server.keys import KeyStore


@dataclass(frozen=True)
class _Opening:
    lines: list[bytes]  # the first lines of stdin, read by the front
    answered: dict[str | int, Any]  # the answers it gave, by request id


_openings: list[_Opening] = []


def hand_over(lines: list[bytes], answered: dict[str | int, Any]) -> None:
    """What the fast front (:mod:`deltamem_launch`) did before the SDK was loaded: it read
    ``lines``, the first lines of stdin, and gave the ``answered`` answers (by request id). The
    next stdio server reads ``lines`` first and drops its own answers to those requests."""
    _openings[:] = [_Opening([line for line in lines if line], dict(answered))]


async def _serve_stdio(server: MCPServer) -> None:
    """``server.run("stdio")``, except that a request the SDK would drop unanswered gets a
    JSON-RPC error (see :class:`_Answering`), and that the front's work is taken over (see
    :func:`hand_over`)."""
    from mcp.server.stdio import stdio_server

    lowlevel = getattr(server, "_lowlevel_server", None)  # what MCPServer.run_stdio_async uses
    if lowlevel is None:  # pragma: no cover - another SDK layout: its own loop
        await server.run_stdio_async()
        return
    opening = _openings.pop() if _openings else _Opening([], {})
    async with stdio_server() as (read_stream, write_stream):
        write = _Dropping(write_stream, opening.answered)
        await lowlevel.run(_Answering(read_stream, write, opening.lines), write,
                           lowlevel.create_initialization_options())


def _parsed(line: bytes) -> Any:
    """``line`` as the SDK's stdio transport reads a line: a message, or the parse error."""
    from mcp import types
    from mcp.shared.message import SessionMessage

    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(
            line.decode("utf-8", errors="replace"), by_name=False))
    except Exception as exc:  # noqa: BLE001 - the SDK's transport passes it on the same way
        return exc


class _Dropping:
    """The SDK's stdio write stream, less the SDK's answers to the requests the front answered
    already (the first response with each such id). An answer of the SDK's that differs from
    the front's is reported on stderr (the client kept the front's)."""

    def __init__(self, inner: Any, answered: dict[str | int, Any]):
        self._inner, self._answered = inner, dict(answered)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def send(self, item: Any) -> None:
        from mcp import types

        message = getattr(item, "message", None)
        rid = getattr(message, "id", None)
        if not isinstance(message, types.JSONRPCResponse | types.JSONRPCError) \
                or isinstance(rid, bool) or rid not in self._answered:
            await self._inner.send(item)
            return
        early = self._answered.pop(rid)
        if isinstance(message, types.JSONRPCError):  # the front's shape check passed it
            print(f"deltamem mcp: the server refused the request {rid!r} answered early: "
                  f"{message.error.message}", file=sys.stderr)
        elif json.loads(message.model_dump_json(by_alias=True, exclude_unset=True)) != early:
            print(f"deltamem mcp: the answer to the request {rid!r} given early differs from "
                  "the server's (run scripts/mcp_listings.py)", file=sys.stderr)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _Dropping:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        return bool(await self._inner.__aexit__(*exc))


class _Answering:
    """The SDK's stdio read stream, answering what the SDK would drop: a line that is JSON (as
    Python reads it) holding a request id, which the SDK's stricter parser refuses -- a string
    with a lone surrogate -- and so never answers, leaving the client waiting forever. The
    front's ``opening`` lines (if any) are read first."""

    def __init__(self, inner: Any, write: Any, opening: list[bytes] | None = None):
        self._inner, self._write = inner, write
        self._first = [_parsed(line) for line in reversed(opening or [])]  # popped in order

    def __getattr__(self, name: str) -> Any:  # e.g. the sender's context
        return getattr(self._inner, name)

    async def receive(self) -> Any:
        while True:
            item = self._first.pop() if self._first else await self._inner.receive()
            if not await self._answered(item):
                return item

    def __aiter__(self) -> _Answering:
        return self

    async def __anext__(self) -> Any:
        while True:
            item = self._first.pop() if self._first else await self._inner.__anext__()
            if not await self._answered(item):
                return item

    async def _answered(self, item: Any) -> bool:
        answer = unanswered_request(item) if isinstance(item, Exception) else None
        if answer is not None:
            await self._write.send(answer)
        return answer is not None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _Answering:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        return bool(await self._inner.__aexit__(*exc))


def unanswered_request(exc: Exception) -> Any:
    """The JSON-RPC error answering a request line the SDK could not parse, or None when the
    line is no request with a usable id (the SDK's own handling stands)."""
    from mcp import types
    from mcp.shared.message import SessionMessage

    try:
        first = exc.errors()[0] if hasattr(exc, "errors") else {}
    except (IndexError, TypeError):
        return None
    raw = first.get("input") if isinstance(first, dict) else None
    if first.get("type") != "json_invalid" or not isinstance(raw, str):
        return None
    try:
        request = json.loads(raw)
    except (ValueError, RecursionError):  # not JSON, or nested past Python's parser
        return None
    if not isinstance(request, dict) or not isinstance(request.get("method"), str):
        return None
    rid = request.get("id")
    if isinstance(rid, bool) or not (isinstance(rid, str) and text_problem(rid) is None
                                     or isinstance(rid, int) and abs(rid) < 2**53):
        return None
    try:
        json.dumps(request, ensure_ascii=False).encode("utf-8")
        why = f"the request is not strict JSON ({first.get('msg', 'invalid JSON')})"
    except UnicodeEncodeError:
        why = "a string in the request holds a lone surrogate (not valid Unicode text)"
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=rid, error=types.ErrorData(
        code=types.INVALID_PARAMS, message=f"invalid params: {why}")))


Transport = Literal["stdio", "http"]


class KeyAuth:
    """ASGI layer in front of the MCP HTTP app: every request needs an API key (the REST
    server's, ``Authorization: Bearer dmk_...``) that covers ``space``; 401/403 otherwise, in
    the REST error envelope, and 429 past the key's own request limit. The verified key is left
    in the request state for the tools' scope checks."""

    def __init__(self, app: ASGIApp, keys: KeyStore, space: str):
        from deltamem.faces.server.limits import RateLimiter

        self.app, self.keys, self.space = app, keys, space
        self.limiter = RateLimiter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        import anyio

        token = _bearer(scope)
        key = await anyio.to_thread.run_sync(self.keys.verify, token) if token else None
        if key is None:
            what = "invalid or revoked API key" if token else (
                "missing API key: send 'Authorization: Bearer <key>'")
            await _refuse(send, 401, "Unauthorized", what)
            return
        if not key.covers(self.space):
            await _refuse(send, 403, "Forbidden",
                          f"this API key is not allowed on space {self.space!r}")
            return
        wait = self.limiter.take(key.id, key.rate_limit) if key.rate_limit else None
        if wait is not None:
            await _refuse(send, 429, "RateLimited", f"this API key is limited to "
                          f"{key.rate_limit} requests per minute; retry in {wait} s",
                          retry_after=wait)
            return
        state = scope.setdefault("state", {})
        state[KEY_STATE] = key
        await self.app(scope, receive, send)


def _bearer(scope: Scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            kind, _, token = value.decode("latin-1").partition(" ")
            return (token.strip() or None) if kind.lower() == "bearer" else None
    return None


async def _refuse(send: Send, status: int, kind: str, message: str, *,
                  retry_after: int | None = None) -> None:
    from deltamem.faces.server.http_errors import error_body

    payload = json.dumps(error_body(kind, message)).encode()
    headers = [(b"content-type", b"application/json"),
               (b"content-length", str(len(payload)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    if retry_after is not None:
        headers.append((b"retry-after", str(retry_after).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


def run_server(mem: DeltaMem, *, transport: Transport = "stdio", host: str = "127.0.0.1",
               port: int = 8765, keys: KeyStore | None = None,
               export_root: str | Path | None = None) -> None:
    """Serve ``mem`` over stdio, or streamable HTTP at ``http://host:port/mcp``.

    Args:
        keys: over HTTP, the API keys every request must present (one that covers this space,
            with each tool's scope). None serves HTTP without keys, which is allowed only on a
            loopback address (``ConfigError`` otherwise).
        export_root: the only folder ``export_skills`` may write under (None: refused).
    """
    server = build_server(mem, export_root=export_root)
    if transport == "stdio":
        import anyio

        anyio.run(_serve_stdio, server)
        return
    if keys is None and not is_loopback(host):
        raise ConfigError(f"refusing to serve MCP without API keys on {host!r}: only a loopback "
                          "address (127.0.0.1, ::1) may go without them")
    import uvicorn

    app: ASGIApp = server.streamable_http_app(host=host)
    if keys is not None:
        app = KeyAuth(app, keys, mem.space)
    uvicorn.run(app, host=host, port=port, log_level="warning")

