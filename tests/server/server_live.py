"""A real uvicorn server on a random loopback port, in a thread (shared by server tests)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import uvicorn

from deltamem.server.keys import SCOPES, open_keys


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
CLI = [sys.executable, "-m", "deltamem.cli"]


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
