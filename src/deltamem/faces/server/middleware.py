"""ASGI middleware: a request body size limit and one structured JSON log line per request.

Both are plain ASGI (not ``BaseHTTPMiddleware``) so that streaming responses stay streaming and
the body limit can refuse a request before reading it.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from deltamem.faces.server.http_errors import error_body

log = logging.getLogger("deltamem.server")


class BodyLimit:
    """Answer 413 to bodies over ``limit(path)`` bytes without reading the rest.

    A declared ``Content-Length`` over the limit is refused before any byte is read. A body
    without one (chunked) is read up to the limit and refused as soon as it goes past it.
    """

    def __init__(self, app: ASGIApp, limit: Callable[[str], int]):
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit(scope["path"])
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            await _too_large(send, limit)
            return
        if declared is not None:
            await self.app(scope, receive, send)
            return
        # No declared length: buffer up to the limit (bodies here are small JSON documents).
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await _too_large(send, limit)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _too_large(send: Send, limit: int) -> None:
    payload = json.dumps(error_body(
        "PayloadTooLarge", f"request body is larger than {limit} bytes; send less per request"
    )).encode()
    await send({"type": "http.response.start", "status": 413, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()),
        (b"connection", b"close"),
    ]})
    await send({"type": "http.response.body", "body": payload})


class AccessLog:
    """One JSON log line per request: method, path, status, ms, space, key id; never headers."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500
        logged = False

        def emit() -> None:
            nonlocal logged
            if not logged:
                logged = True
                if log.isEnabledFor(logging.INFO):  # no record built for a silent log
                    log.info(json.dumps(access_record(scope, status, started)))

        async def capture(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                emit()  # before the last byte goes out, so the line exists when the client has it
            await send(message)

        try:
            await self.app(scope, receive, capture)
        finally:
            emit()


def access_record(scope: Scope, status: int, started: float) -> dict[str, Any]:
    """The log record of one request.

    Left out: headers and the query string (they may hold secrets). The key is named by its id,
    which the route puts in the request state once the key has been verified.
    """
    path: str = scope["path"]
    parts = path.split("/")
    space = parts[3] if len(parts) > 3 and parts[1] == "v1" and parts[2] == "spaces" else None
    state = scope.get("state") or {}
    return {"event": "request", "method": scope["method"], "path": path, "status": status,
            "ms": round((time.perf_counter() - started) * 1000, 3), "space": space,
            "key": state.get("key_id")}
