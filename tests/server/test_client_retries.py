"""Client retries: backoff, Retry-After on 429/503, and which calls are sent twice.

A flaky proxy (a test double, on loopback) stands between the client and the real server: it
answers its scripted failures first (503, 429 with or without Retry-After, a dropped
connection; "forward" lets one through), then forwards every request to the real server.
"""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_live import LiveServer, free_port

from deltamem import AsyncClient, Client
from deltamem.client import RetryPolicy
from deltamem.errors import RemoteError
from deltamem.llm.http import parse_retry_after as retry_after
from helpers import make_episode

pytestmark = pytest.mark.server

KITCHEN = "a kitchen with a fridge, a microwave and a table"
FAST = RetryPolicy(retries=3, backoff=0.01)


class FlakyProxy:
    """Answers ``script`` (one entry per request: a status and headers, or "drop" to close the
    connection unanswered) before forwarding requests to ``upstream``."""

    def __init__(self, upstream: str, script: list[Any], port: int = 0):
        self.script = list(script)
        self.seen: list[tuple[float, str, str]] = []  # (monotonic time, method, path)
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _handle(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                owner.seen.append((time.monotonic(), self.command, self.path))
                step = owner.script.pop(0) if owner.script else "forward"
                if step != "forward":
                    if step == "drop":
                        self.close_connection = True
                        self.connection.shutdown(2)
                        return
                    status, headers = step
                    payload = (b'{"error": {"type": "Unavailable", "message": "scripted '
                               b'failure"}}')
                    self.send_response(status)
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() in ("authorization", "content-type")}
                answer = httpx.request(self.command, upstream + self.path, content=body,
                                       headers=headers, timeout=30)
                self.send_response(answer.status_code)
                self.send_header("Content-Type", answer.headers.get("content-type", ""))
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

            do_GET = do_POST = do_DELETE = _handle  # noqa: N815 - http.server naming

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> FlakyProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def paths(self) -> list[str]:
        return [path.split("?")[0].rsplit("/", 1)[-1] for _, _, path in self.seen]


@pytest.fixture
def learned(live: LiveServer) -> LiveServer:
    with Client(live.url, api_key=live.key_a, space="a") as mem:
        mem.learn(make_episode(env=KITCHEN))
    return live


def proxy(live: LiveServer, *script: Any) -> FlakyProxy:
    return FlakyProxy(live.url, list(script))


def test_reads_retry_through_503_and_429_then_succeed(learned: LiveServer) -> None:
    with proxy(learned, (503, {}), (429, {}), "drop") as flaky, \
            Client(flaky.url, api_key=learned.key_a, space="a", retries=FAST) as mem:
        recall = mem.recall(task="heat the apple", env=KITCHEN)
        assert recall.task.matched
        assert flaky.paths() == ["recall"] * 4
        assert mem.stats().task.nodes >= 1  # the script is spent: one request
        assert flaky.paths()[-1] == "stats" and len(flaky.seen) == 5


def test_retry_after_seconds_is_waited_for(learned: LiveServer) -> None:
    with proxy(learned, (503, {"Retry-After": "1"})) as flaky, \
            Client(flaky.url, api_key=learned.key_a, space="a", retries=FAST) as mem:
        assert mem.list_nodes().total >= 1
    (first, *_), (second, *_) = flaky.seen
    assert second - first >= 0.95  # the backoff alone would have waited about 0.01 s


def test_retry_after_longer_than_max_wait_is_not_waited_for(learned: LiveServer) -> None:
    policy = RetryPolicy(retries=3, backoff=0.01, max_wait=5)
    with proxy(learned, (429, {"Retry-After": "3600"})) as flaky, \
            Client(flaky.url, api_key=learned.key_a, space="a", retries=policy) as mem, \
            pytest.raises(RemoteError) as info:
        mem.stats()
    assert info.value.status == 429 and len(flaky.seen) == 1


def test_writes_are_not_sent_twice_after_a_503(learned: LiveServer) -> None:
    with proxy(learned, (503, {})) as flaky, \
            Client(flaky.url, api_key=learned.key_a, space="a", retries=FAST) as mem, \
            pytest.raises(RemoteError) as info:
        mem.learn(make_episode(env=KITCHEN))
    assert info.value.status == 503 and flaky.paths() == ["learn"]


def test_a_rate_limited_write_is_retried_after_retry_after(learned: LiveServer) -> None:
    """A 429 with Retry-After is the server refusing before running anything: safe to resend."""
    with proxy(learned, (429, {"Retry-After": "0"})) as flaky, \
            Client(flaky.url, api_key=learned.key_a, space="a", retries=FAST) as mem:
        assert mem.learn(make_episode(env=KITCHEN)).task.action == "dedup"
    assert flaky.paths() == ["learn", "learn"]


def test_retries_zero_gives_up_at_once(learned: LiveServer) -> None:
    with proxy(learned, (503, {})) as flaky, \
            Client(flaky.url, api_key=learned.key_a, space="a", retries=0) as mem, \
            pytest.raises(RemoteError) as info:
        mem.stats()
    assert info.value.status == 503 and len(flaky.seen) == 1


def test_export_retries_a_503(learned: LiveServer, tmp_path: Path) -> None:
    out = tmp_path / "x.jsonl"
    with proxy(learned, (503, {"Retry-After": "0"})) as flaky, \
            Client(flaky.url, api_key=learned.key_a, space="a", retries=FAST) as mem:
        assert mem.export(out) == len(out.read_text().splitlines()) > 0
    assert flaky.paths() == ["export", "export"]


def test_a_server_that_comes_up_late_is_reached(learned: LiveServer) -> None:
    """Connection refused (a replica restarting) is retried for every call, writes included:
    the request was never sent."""
    port = free_port()
    policy = RetryPolicy(retries=8, backoff=0.1, max_wait=1)
    with Client(f"http://127.0.0.1:{port}", api_key=learned.key_a, space="a",
                retries=policy) as mem:
        late: list[FlakyProxy] = []
        starter = threading.Timer(0.3, lambda: late.append(
            FlakyProxy(learned.url, [], port=port).__enter__()))
        starter.start()
        try:
            assert mem.learn(make_episode(env=KITCHEN)).task.action == "dedup"
        finally:
            starter.join()
            for server in late:
                server.__exit__()
    assert [p for _, _, p in late[0].seen] == ["/v1/spaces/a/learn"]


def test_a_dead_server_fails_after_the_retries_with_one_message() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with Client(url, retries=RetryPolicy(retries=2, backoff=0.01)) as mem, \
            pytest.raises(RemoteError) as info:
        mem.stats()
    assert f"no answer from the deltamem server at {url} (after 3 attempts)" in str(info.value)
    assert info.value.status is None


def test_async_client_retries_the_same_way(learned: LiveServer) -> None:
    async def run(url: str) -> tuple[bool, str]:
        async with AsyncClient(url, api_key=learned.key_a, space="a", retries=FAST) as mem:
            recall = await mem.recall(task="heat the apple", env=KITCHEN)
            try:
                await mem.learn(make_episode(env=KITCHEN))
            except RemoteError as exc:
                return recall.task.matched, f"{exc.status}"
            return recall.task.matched, "learned"

    with proxy(learned, (503, {"Retry-After": "0"}), "drop", "forward", (503, {})) as flaky:
        matched, learn = asyncio.run(run(flaky.url))
    assert matched and learn == "503"
    assert flaky.paths() == ["recall", "recall", "recall", "learn"]


def test_retry_after_reads_seconds_and_http_dates() -> None:
    assert retry_after("7") == 7.0
    assert retry_after(" 0 ") == 0.0
    assert retry_after(None) is None and retry_after("soon") is None
    later = datetime.now(UTC) + timedelta(seconds=120)
    assert 100 < (retry_after(format_datetime(later, usegmt=True)) or 0) <= 120
    past = datetime.now(UTC) - timedelta(seconds=120)
    assert retry_after(format_datetime(past, usegmt=True)) == 0.0


def test_negative_retries_are_refused() -> None:
    with pytest.raises(ValueError, match="retries"):
        Client("http://127.0.0.1:1", retries=-1)

