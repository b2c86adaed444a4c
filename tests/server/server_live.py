"""A real uvicorn server on a random loopback port, in a thread (shared by server tests)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from deltamem.embed.hashing import HashingEmbedder
from deltamem.engine.memory import DeltaMem
from deltamem.extract.trace import TraceExtractor
from deltamem.faces.server.keys import SCOPES, open_keys
from deltamem.store.sqlite import SQLiteStore


@dataclass
class LiveServer:
    """A running server: its base URL, database and API keys."""

    url: str
    db: Path
    key_a: str  # scoped to space "a"
    key_all: str  # scoped to "*"

    def client(self, key: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30.0)


class ServerThread:
    """uvicorn serving an app on an already bound socket, in a background thread."""

    def __init__(self, app: object):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        config = uvicorn.Config(app, log_level="warning", lifespan="on")  # type: ignore[arg-type]
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]},
                                       daemon=True)

    def __enter__(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
        self.sock.close()


def make_keys(db: Path | str) -> tuple[str, str]:
    """Create a key for space "a" and one for every space, both with every scope."""
    keys = open_keys(str(db))
    try:
        return (keys.create(["a"], name="agent-a", scopes=list(SCOPES))[1],
                keys.create(["*"], name="admin", scopes=list(SCOPES))[1])
    finally:
        keys.close()


# The real `deltamem` command line, run as a child process with the hashing test embedder.
CLI = [sys.executable, "-m", "deltamem"]


def cli_env(**extra: str) -> dict[str, str]:
    """The environment of a child `deltamem`: test embedder and thresholds, one BLAS thread."""
    return {**os.environ, "DELTAMEM_EMBEDDER": "hashing", "DELTAMEM_TAU_TASK": "0.6",
            "DELTAMEM_TAU_ENV": "0.6", "PYTHONUNBUFFERED": "1", "OPENBLAS_NUM_THREADS": "1",
            "OMP_NUM_THREADS": "1", **extra}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServeProcess:
    """A real `deltamem serve` child process on a free loopback port; output goes to a file.

    Use as a context manager: it waits for /readyz on start and terminates (then kills) the
    process on exit, so a failing test leaves nothing running.
    """

    def __init__(self, db: str, log: Path, *args: str, **env: str):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        self.command = [*CLI, "serve", "--db", db, "--port", str(self.port), *args]
        self.env = cli_env(**env)
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> ServeProcess:
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(self.command, env=self.env, stdout=out,
                                         stderr=subprocess.STDOUT)
        self.wait_ready()
        return self

    def wait_ready(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited ({self.proc.returncode}):\n{self.output()}")
            try:
                if httpx.get(f"{self.url}/readyz", timeout=5).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"server not ready after {timeout} s:\n{self.output()}")

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, then wait (SIGKILL after ``timeout``); the exit code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            self.stop()


class SlowModel:
    """An OpenAI-compatible endpoint on loopback that answers every call after ``delay`` seconds
    (a test double standing in for a real model). It fills the requested JSON schema with
    fixed content: a skill of one step, scene knowledge of one fact, else ``{}``."""

    def __init__(self, delay: float):
        self.calls = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server naming
                request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                owner.calls += 1
                time.sleep(delay)
                schema = request.get("response_format", {}).get("json_schema", {})
                fields = set(schema.get("schema", {}).get("properties", {}))
                answer: dict[str, Any] = {}
                if {"activation", "steps"} <= fields:
                    answer = {"activation": "a task", "steps": ["go to kitchen"],
                              "termination": ""}
                elif {"trigger", "facts"} <= fields:
                    answer = {"trigger": "a kitchen", "facts": ["there is a fridge"]}
                body = json.dumps({"choices": [{"index": 0, "finish_reason": "stop", "message": {
                    "role": "assistant", "content": json.dumps(answer)}}],
                    "usage": {"prompt_tokens": 5, "completion_tokens": 5}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> SlowModel:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def make_spaces(db: Path | str, *spaces: str) -> None:
    """Create empty spaces (with the hashing test embedder): reads of a missing space are 404."""
    for space in spaces:
        mem = DeltaMem(SQLiteStore(db), HashingEmbedder(), TraceExtractor(), space=space)
        with mem, mem.transaction():  # writers create spaces: an empty write creates it
            pass
