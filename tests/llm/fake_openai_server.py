"""A scripted OpenAI-compatible HTTP server on loopback (a test double for provider tests)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One scripted HTTP response."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Received:
    """One request the fake server saw."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]


def ok(text: str, prompt_tokens: int = 11, completion_tokens: int = 7) -> Reply:
    """A normal chat-completion answer."""
    return Reply(200, {
        "id": "x", "object": "chat.completion", "model": "fake-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    })


class FakeOpenAIServer:
    """Real HTTP server answering /v1/chat/completions from a reply queue (``replies``), or,
    when the queue is empty and ``answer`` is set, from ``answer(request)``."""

    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.received: list[Received] = []
        self.answer: Callable[[Received], Reply] | None = None
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server naming
                length = int(self.headers.get("Content-Length", "0"))
                payload = json.loads(self.rfile.read(length) or b"{}")
                request = Received(self.path, {k.lower(): v for k, v in self.headers.items()},
                                   payload)
                server.received.append(request)
                if server.replies:
                    reply = server.replies.pop(0)
                elif server.answer is not None:
                    reply = server.answer(request)
                else:
                    reply = Reply(500, {"error": "empty"})
                raw = reply.body if isinstance(reply.body, str) else json.dumps(reply.body)
                data = raw.encode()
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True)

    def __enter__(self) -> FakeOpenAIServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
