"""Background consolidation: `deltamem worker` and the server's --consolidate-every.

Due chains are compiled outside request paths; learn with consolidation deferred answers without
compiling; of several workers one consolidates a space and the others skip it (the lease is an
advisory lock on PostgreSQL, an OS record lock on SQLite); a dry run writes nothing; the LLM
compiler is used when configured (an OpenAI-compatible endpoint on loopback).
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_live import CLI, ServerThread, SlowModel, cli_env, make_keys

from deltamem.embed.hashing import HashingEmbedder
from deltamem.engine.memory import DeltaMem
from deltamem.extract.trace import TraceExtractor
from deltamem.faces.server.rest import create_app
from deltamem.faces.worker import Worker
from deltamem.store import open_store
from deltamem.store.lease import consolidation_lease
from helpers import TEST_SETTINGS, make_episode
from pg_fixture import pg_server, pg_url  # noqa: F401 - fixtures

pytestmark = pytest.mark.server

DEFERRED = TEST_SETTINGS.with_(auto_consolidate=False)
LONGER = ("go to kitchen", "open microwave", "take apple", "heat apple")


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:{tmp_path / 'w.db'}"
    request.applymarker(pytest.mark.postgres)
    url: str = request.getfixturevalue("pg_url")
    return url


def memory(db: str, space: str = "default") -> DeltaMem:
    return DeltaMem(open_store(db), HashingEmbedder(), TraceExtractor(), space=space,
                    settings=DEFERRED)


def make_due(db: str, spaces: tuple[str, ...] = ("default",)) -> int:
    """In each space, learn a root and a delta that then succeeds 3 more times: one task chain
    and one env chain become due; learning (deferred) compiles nothing. Returns chains due."""
    due = 0
    for space in spaces:
        with memory(db, space) as mem:
            mem.learn(make_episode(task=f"heat the apple in {space}"))
            for _ in range(4):
                assert mem.learn(make_episode(task=f"heat the apple in {space}",
                                              actions=LONGER)).consolidated == []
            due += len(mem.due())
    return due


def run_worker(db: str, *args: str, **env: str) -> dict[str, Any]:
    """One real `deltamem worker ... --json` process; its report."""
    done = subprocess.run([*CLI, "worker", "--db", db, "--json", *args], env=cli_env(**env),
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def consolidated_sources(db: str, space: str = "default") -> Counter[str]:
    with memory(db, space) as mem:
        assert mem.check() == []
        return Counter(str(n.meta["consolidated_from"]) for n in mem.nodes() if n.lineage)


def test_dry_run_reports_and_writes_nothing_then_a_pass_consolidates(db: str) -> None:
    """--dry-run lists the due chains; --once compiles each once; the next pass is idle."""
    assert make_due(db) == 2
    dry = run_worker(db, "--dry-run")["spaces"]
    assert [(s["space"], s["status"], len(s["due"])) for s in dry] == [("default", "dry-run", 2)]
    assert {d["tree"] for d in dry[0]["due"]} == {"task", "env"}
    assert consolidated_sources(db) == Counter()
    done = run_worker(db, "--once")["spaces"]
    assert done[0]["status"] == "consolidated" and len(done[0]["consolidated"]) == 2
    sources = consolidated_sources(db)
    assert sorted(sources) == sorted(d["node"] for d in dry[0]["due"])
    assert set(sources.values()) == {1}
    assert run_worker(db, "--once")["spaces"][0]["status"] == "idle"


def test_a_worker_skips_a_space_whose_lease_is_held(db: str) -> None:
    """While this process holds a space's lease, a worker process skips it and writes nothing."""
    make_due(db, ("a", "b"))
    store = open_store(db)
    try:
        with consolidation_lease(store, "a") as won:
            assert won
            report = {s["space"]: s["status"] for s in run_worker(db, "--once")["spaces"]}
    finally:
        store.close()
    assert report == {"a": "skipped", "b": "consolidated"}
    assert consolidated_sources(db, "a") == Counter()
    assert len(consolidated_sources(db, "b")) == 2


@pytest.fixture
def slow_compiler() -> Iterator[SlowModel]:
    with SlowModel(delay=0.3) as server:
        yield server


@pytest.mark.postgres
def test_three_workers_at_once_compile_each_chain_exactly_once(
        pg_url: str, slow_compiler: SlowModel) -> None:  # noqa: F811 - fixture
    """Three worker processes with the LLM compiler over one PostgreSQL and three spaces: per
    space one worker consolidates (others skip or find nothing left), every due chain is
    compiled once, through the model endpoint."""
    spaces = ("a", "b", "c")
    due = make_due(pg_url, spaces)
    command = [*CLI, "worker", "--db", pg_url, "--once", "--json", "--extractor", "llm",
               "--base-url", slow_compiler.url, "--model", "fake-model"]
    procs = [subprocess.Popen(command, env=cli_env(), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(3)]
    try:
        outputs = [p.communicate(timeout=180) for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert all(p.returncode == 0 for p in procs), [err for _, err in outputs]
    reports = [json.loads(out.strip().splitlines()[-1])["spaces"] for out, _ in outputs]
    for space in spaces:
        statuses = Counter(s["status"] for r in reports for s in r if s["space"] == space)
        assert statuses["consolidated"] == 1, (space, statuses)
        assert set(statuses) <= {"consolidated", "skipped", "idle"}
    compiled = [c for r in reports for s in r for c in s["consolidated"]]
    assert len(compiled) == due == 6
    assert all(c["note"].startswith("compile_") for c in compiled)  # the model was asked
    assert slow_compiler.calls >= due
    for space in spaces:
        assert set(consolidated_sources(pg_url, space).values()) == {1}


def test_deferred_server_answers_learn_and_its_background_pass_consolidates(
        tmp_path: Path) -> None:
    """With --consolidate-every the server's learn compiles nothing; its own background pass
    does, soon after."""
    db = tmp_path / "bg.db"
    _, key = make_keys(db)
    app = create_app(db, embedder=HashingEmbedder(), settings=DEFERRED, consolidate_every=0.2)
    episode = {"task": "heat the apple", "env": "a kitchen", "success": True,
               "steps": [{"action": a, "observation": "ok"} for a in LONGER[::3]]}
    longer = {**episode, "steps": [{"action": a, "observation": "ok"} for a in LONGER]}
    with ServerThread(app) as running, httpx.Client(
            base_url=f"http://127.0.0.1:{running.port}",
            headers={"Authorization": f"Bearer {key}"}) as c:
        c.post("/v1/spaces/a/learn", json=episode).raise_for_status()
        answers = [c.post("/v1/spaces/a/learn", json=longer).json() for _ in range(4)]
        assert all(a["consolidated"] == [] for a in answers)
        deadline = time.monotonic() + 30
        while c.get("/v1/spaces/a/stats").json()["task"]["consolidated_roots"] == 0:
            assert time.monotonic() < deadline, "the background pass never consolidated"
            time.sleep(0.1)
    assert set(consolidated_sources(f"sqlite:{db}", "a").values()) == {1}


def test_worker_reports_a_space_it_cannot_open_and_goes_on(tmp_path: Path) -> None:
    """A space built with another embedder is an error entry; the other spaces still run."""
    db = f"sqlite:{tmp_path / 'mixed.db'}"
    make_due(db, ("good",))
    store = open_store(db)
    store.ensure_space("other", "another-embedder", 8)
    try:
        passes = Worker(store, lambda s: DeltaMem(store, HashingEmbedder(), TraceExtractor(),
                                                  space=s, settings=DEFERRED)).run_once()
    finally:
        store.close()
    by_space = {p.space: p for p in passes}
    assert by_space["other"].status == "error" and "EmbedderMismatch" in str(
        by_space["other"].error)
    assert by_space["good"].status == "consolidated"


def test_worker_once_exits_1_when_a_space_failed(tmp_path: Path) -> None:
    """`deltamem worker --once` with a space it cannot open prints the whole report once and
    exits 1 (it exited 0, so cron and CI never saw the failure)."""
    db = f"sqlite:{tmp_path / 'mixed.db'}"
    make_due(db, ("good",))
    store = open_store(db)
    store.ensure_space("other", "another-embedder", 8)
    store.close()
    done = subprocess.run([*CLI, "worker", "--db", db, "--once", "--json"], env=cli_env(),
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 1, done.stderr
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1
    by_space = {s["space"]: s for s in json.loads(lines[0])["spaces"]}
    assert by_space["other"]["status"] == "error"
    assert "EmbedderMismatch" in by_space["other"]["error"]
    assert by_space["good"]["status"] == "consolidated"


def test_a_looping_worker_reports_each_pass_and_stops_on_sigterm(tmp_path: Path) -> None:
    """`deltamem worker --interval` passes until SIGTERM, then exits 0 (no pass cut short)."""
    db = f"sqlite:{tmp_path / 'loop.db'}"
    make_due(db)
    proc = subprocess.Popen([*CLI, "worker", "--db", db, "--interval", "0.2", "--json"],
                            env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout is not None
        first = json.loads(proc.stdout.readline())
        second = json.loads(proc.stdout.readline())
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
    assert first["spaces"][0]["status"] == "consolidated"
    assert second["spaces"][0]["status"] == "idle"
