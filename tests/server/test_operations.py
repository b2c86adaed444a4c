"""Operations of a real server: readiness follows the database, and a graceful shutdown lets
in-flight requests finish without writing anything by halves."""

from __future__ import annotations

import contextlib
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest
from server_live import ServeProcess, ServerThread, SlowModel, make_keys

from deltamem.embed.hashing import HashingEmbedder
from deltamem.engine.memory import DeltaMem
from deltamem.extract.trace import TraceExtractor
from deltamem.faces.server.rest import create_app
from deltamem.store import open_store
from helpers import TEST_SETTINGS
from pg_fixture import pg_server, pg_url  # noqa: F401 - fixtures

pytestmark = pytest.mark.server


class Cable:
    """A TCP forwarder on loopback between the server and PostgreSQL that can be unplugged:
    ``cut()`` refuses new connections and breaks the open ones; ``mend()`` serves again."""

    def __init__(self, target: tuple[str, int]):
        self.target = target
        self.port = 0
        self._listener: socket.socket | None = None
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        self.mend()

    def mend(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen()
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            with self._lock:
                self._open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        assert self._listener is not None
        self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() blocked on it
        self._listener.close()
        with self._lock:
            for s in self._open:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()
            self._open.clear()


@pytest.fixture
def cable(pg_url: str) -> Iterator[tuple[Cable, str]]:  # noqa: F811 - fixture
    """A cable to the test PostgreSQL, and the schema's URL through it."""
    parts = urlsplit(pg_url)
    assert parts.hostname is not None and parts.port is not None
    line = Cable((parts.hostname, parts.port))
    yield line, urlunsplit(parts._replace(netloc=f"{parts.username}@127.0.0.1:{line.port}"))
    line.cut()


def ready(client: httpx.Client) -> httpx.Response:
    return client.get("/readyz")


@pytest.mark.postgres
def test_readiness_fails_while_the_database_is_unreachable(cable: tuple[Cable, str]) -> None:
    """/readyz is 503 (within its timeout) while the database is cut off, liveness stays ok,
    and readiness comes back when the database does."""
    line, url = cable
    app = create_app(url, embedder=HashingEmbedder(), settings=TEST_SETTINGS, ready_timeout=1.0)
    with ServerThread(app) as running, httpx.Client(
            base_url=f"http://127.0.0.1:{running.port}", timeout=30) as c:
        assert ready(c).json()["status"] == "ready"
        line.cut()
        for _ in range(3):  # the broken pooled connection, then attempts to reconnect
            started = time.monotonic()
            down = ready(c)
            assert down.status_code == 503 and down.json()["status"] == "unavailable", (
                _, down.text)
            # A hang guard, not a speed test: the probe gives up after ready_timeout (1 s);
            # without it this request waited for the client's 30 s.
            assert time.monotonic() - started < 20
        assert c.get("/healthz").status_code == 200
        line.mend()
        deadline = time.monotonic() + 60
        while ready(c).status_code != 200:
            assert time.monotonic() < deadline, "readiness did not come back"
            time.sleep(0.5)


def test_sigterm_lets_in_flight_learns_finish(tmp_path: Path) -> None:
    """SIGTERM while four learns wait on a slow model: all four answer 200, the server stops,
    and the database holds exactly those four episodes with sound trees."""
    db = tmp_path / "graceful.db"
    _, key = make_keys(db)
    answers: list[int] = []
    with SlowModel(delay=1.5) as model, ServeProcess(
            f"sqlite:{db}", tmp_path / "serve.log", "--extractor", "llm",
            "--base-url", model.url, "--model", "fake-model") as server:

        def learn(n: int) -> None:
            body = {"task": f"task number {n}", "env": f"room {n}", "success": True,
                    "steps": [{"action": f"do thing {n}", "observation": "done"}]}
            r = httpx.post(f"{server.url}/v1/spaces/a/learn", json=body, timeout=120,
                           headers={"Authorization": f"Bearer {key}"})
            answers.append(r.status_code)

        clients = [threading.Thread(target=learn, args=(n,)) for n in range(4)]
        for t in clients:
            t.start()
        deadline = time.monotonic() + 60
        while model.calls < 4:  # every request is inside the model call
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert server.proc is not None
        server.proc.send_signal(signal.SIGTERM)
        for t in clients:
            t.join(timeout=120)
        code = server.stop()
    assert answers == [200] * 4
    assert code in (0, -signal.SIGTERM), server.output()
    assert "Application shutdown complete" in server.output()
    mem = DeltaMem(open_store(f"sqlite:{db}"), HashingEmbedder(), TraceExtractor(), space="a",
                   settings=TEST_SETTINGS)
    try:
        assert mem.store.count_episodes("a") == 4
        assert mem.check() == []
    finally:
        mem.close()
