"""Where the REST server runs an operation: a read of an open space of a SQLite file on the event
loop, everything else (writes, a first request, a read that was slow, a store whose reads may
wait) in a worker thread (``OperationRoute``)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from server_live import LiveServer, ServerThread, make_keys, make_spaces

from deltamem.embed.hashing import HashingEmbedder
from deltamem.engine.memory import DeltaMem
from deltamem.faces.server import rest
from deltamem.faces.server.rest import create_app
from deltamem.faces.server.spaces import SpacePool
from helpers import TEST_SETTINGS

pytestmark = pytest.mark.server


@pytest.fixture
def threads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, str]]]:
    """(operation, thread name) of every ``stats`` and ``consolidate`` the facade runs."""
    seen: list[tuple[str, str]] = []
    for name in ("stats", "consolidate"):
        original = getattr(DeltaMem, name)

        def recording(self: DeltaMem, *args: Any, _name: str = name, _original: Any = original,
                      **kwargs: Any) -> Any:
            seen.append((_name, threading.current_thread().name))
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(DeltaMem, name, recording)
    yield seen


def in_worker(name: str) -> bool:
    return name.startswith("deltamem-rest")


def call(live: LiveServer, method: str, path: str) -> None:
    with live.client(live.key_a) as c:
        assert c.request(method, f"/v1/spaces/a{path}").status_code == 200


def test_reads_of_an_open_sqlite_space_run_on_the_loop_and_writes_in_a_worker(
        live: LiveServer, threads: list[tuple[str, str]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The first request opens the key table and the space: a worker thread. Then reads run on
    the loop (not a worker), and a write always runs in a worker. (No read counts as slow
    here, whatever the machine's load.)"""
    monkeypatch.setattr(rest, "INLINE_MAX_S", 3600.0)
    for _ in range(3):
        call(live, "GET", "/stats")
    call(live, "POST", "/consolidate")
    names = [name for _, name in threads]
    assert in_worker(names[0])
    assert not in_worker(names[1]) and names[1] == names[2]
    assert threads[3][0] == "consolidate" and in_worker(names[3])


def test_a_slow_read_sends_the_next_reads_of_its_space_to_a_worker(
        live: LiveServer, threads: list[tuple[str, str]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A read over ``INLINE_MAX_S`` (here every read: the bound is below zero) sends the next
    reads of its space to a worker thread; once one is fast again, reads go back to the loop."""
    monkeypatch.setattr(rest, "INLINE_MAX_S", -1.0)
    for _ in range(3):
        call(live, "GET", "/stats")
    monkeypatch.setattr(rest, "INLINE_MAX_S", 3600.0)
    call(live, "GET", "/stats")  # still remembered as slow: a worker; fast, so forgotten
    call(live, "GET", "/stats")
    names = [name for _, name in threads]
    assert all(in_worker(name) for name in names[:4])
    assert not in_worker(names[4])


def test_inline_reads_off_runs_every_operation_in_a_worker(
        tmp_path: Path, threads: list[tuple[str, str]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rest, "INLINE_MAX_S", 3600.0)
    db = tmp_path / "served.db"
    key_a, _ = make_keys(db)
    make_spaces(db, "a")
    app = create_app(db, embedder=HashingEmbedder(), settings=TEST_SETTINGS, inline_reads=False)
    with ServerThread(app) as running:
        live = LiveServer(f"http://127.0.0.1:{running.port}", db, key_a, key_a)
        for _ in range(3):
            call(live, "GET", "/stats")
    assert [in_worker(name) for _, name in threads] == [True] * 3


def test_only_an_open_space_of_a_sqlite_file_reads_locally(tmp_path: Path) -> None:
    """A space not open yet (its first read may load the model or migrate) and a ':memory:'
    database (whose reads take the write lock) do not read locally."""
    make_spaces(tmp_path / "m.db", "a")
    on_file = SpacePool(tmp_path / "m.db", embedder=HashingEmbedder(), settings=TEST_SETTINGS)
    in_memory = SpacePool(":memory:", embedder=HashingEmbedder(), settings=TEST_SETTINGS)
    try:
        assert not on_file.reads_locally("a")
        on_file.get("a")
        in_memory.get("a", create=True)
        assert on_file.reads_locally("a") and not on_file.reads_locally("b")
        assert not in_memory.reads_locally("a")
    finally:
        on_file.close()
        in_memory.close()
