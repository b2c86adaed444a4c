"""Three real `deltamem serve` processes over one PostgreSQL, driven at once by several clients.

Every client sends each request to the next replica in turn, so consecutive writes of one task
land on different processes and racing writers place variations of the same tasks (roots,
deltas, dedups, consolidations) from three processes. Afterwards: every acknowledged episode is
stored once, no task has two learned roots, no chain was consolidated twice, no space sees
another's episodes, the trees pass check(), and every replica gives the same answers (their
index caches follow the revision mechanism). Keys live in the database: one created and one
revoked with the CLI hold on every replica.
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_live import CLI, ServeProcess, cli_env

from deltamem.embed.hashing import HashingEmbedder
from deltamem.engine.memory import DeltaMem
from deltamem.extract.trace import TraceExtractor
from deltamem.store import open_store
from helpers import TEST_SETTINGS
from pg_fixture import pg_server, pg_url  # noqa: F401 - fixtures

pytestmark = [pytest.mark.server, pytest.mark.postgres, pytest.mark.timeout(600)]

REPLICAS = 3
CLIENTS = 6
PER_CLIENT = 12
SPACES = ("a", "b")
TASKS = {
    "heat the apple": ("go to kitchen", "take apple", "heat apple"),
    "cool the mug": ("go to kitchen", "take mug", "open fridge", "cool mug"),
    "clean the plate": ("go to sink", "take plate", "clean plate"),
}
EXTRAS = ("look around", "open drawer", "wait")


def episode(space: str, client: int, i: int) -> dict[str, Any]:
    """Overlapping variations of a few tasks (the space is named in the task: leaks show)."""
    name = list(TASKS)[(client + i) % len(TASKS)]
    actions = list(TASKS[name])
    variant = (i // len(TASKS) + client) % 4
    if variant >= 2:
        actions.insert(1, EXTRAS[variant - 2])
    return {"task": f"{name} in {space}", "env": f"a kitchen of {space} with a fridge and a sink",
            "success": variant != 3, "score": None, "meta": {"client": client, "i": i},
            "steps": [{"action": a, "observation": f"You {a}."} for a in actions]}


def cli(*args: str) -> dict[str, Any]:
    done = subprocess.run([*CLI, *args, "--json"], env=cli_env(), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    data: dict[str, Any] = json.loads(done.stdout)
    return data


def drive(urls: list[str], key: str) -> tuple[dict[str, list[str]], list[str]]:
    """CLIENTS threads, each learning PER_CLIENT episodes per space (and recalling) through the
    replicas in turn. Returns the acknowledged episode ids per space, and any failures."""
    acked: dict[str, list[str]] = {s: [] for s in SPACES}
    failures: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(CLIENTS)

    def client(n: int) -> None:
        clients = [httpx.Client(base_url=u, headers={"Authorization": f"Bearer {key}"},
                                timeout=120) for u in urls]
        try:
            start.wait(timeout=60)
            turn = n
            for i in range(PER_CLIENT):
                for space in SPACES:
                    c = clients[turn % len(clients)]
                    turn += 1
                    r = c.post(f"/v1/spaces/{space}/learn", json=episode(space, n, i))
                    with lock:
                        if r.status_code == 200:
                            acked[space].append(r.json()["episode"])
                        else:
                            failures.append(f"learn {r.status_code}: {r.text}")
                    q = clients[turn % len(clients)].post(
                        f"/v1/spaces/{space}/recall", json={"task": episode(space, n, i)["task"]})
                    if q.status_code != 200:
                        with lock:
                            failures.append(f"recall {q.status_code}: {q.text}")
        finally:
            for c in clients:
                c.close()

    threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=480)
    assert not any(t.is_alive() for t in threads), "a client hung"
    return acked, failures


def check_space(url: str, space: str, acked: list[str]) -> None:
    mem = DeltaMem(open_store(url), HashingEmbedder(), TraceExtractor(), space=space,
                   settings=TEST_SETTINGS)
    try:
        stored = [e.id for e in mem.store.episodes(space)]
        assert sorted(stored) == sorted(acked)  # none lost, none duplicated
        assert len(set(stored)) == len(stored) == CLIENTS * PER_CLIENT
        assert all(e.task.endswith(f" in {space}") for e in mem.store.episodes(space))
        nodes = list(mem.nodes())
        assert all(n.key.endswith(space) or f" of {space} " in n.key for n in nodes)
        # One learned root per key and outcome: a failure lesson is a root of its own.
        learned_roots = Counter((n.tree, n.key, n.outcome) for n in nodes
                                if n.is_root and not n.lineage)
        assert all(c == 1 for c in learned_roots.values()), learned_roots
        sources = Counter(n.meta["consolidated_from"] for n in nodes if n.lineage)
        assert sources and all(c == 1 for c in sources.values()), sources
        assert mem.check() == []
    finally:
        mem.close()


def same_everywhere(urls: list[str], key: str, method: str, path: str,
                    body: dict[str, Any] | None = None) -> Any:
    """The answer of every replica to one request; they must agree (timings left out)."""
    answers = []
    for url in urls:
        r = httpx.request(method, url + path, json=body, timeout=60,
                          headers={"Authorization": f"Bearer {key}"})
        assert r.status_code == 200, r.text
        data = r.json()
        data.pop("usage", None)
        answers.append(data)
    assert all(a == answers[0] for a in answers), answers
    return answers[0]


def test_three_replicas_over_one_postgres(pg_url: str, tmp_path: Path) -> None:  # noqa: F811
    admin = cli("keys", "create", "--db", pg_url, "--space", "*", "--scope", "read",
                "--scope", "write", "--scope", "admin")["key"]
    only_a = cli("keys", "create", "--db", pg_url, "--space", "a")
    with ExitStack() as stack:
        replicas = [stack.enter_context(ServeProcess(pg_url, tmp_path / f"serve-{i}.log"))
                    for i in range(REPLICAS)]
        urls = [r.url for r in replicas]
        acked, failures = drive(urls, admin)
        assert failures == []
        for space in SPACES:
            check_space(pg_url, space, acked[space])
            stats = same_everywhere(urls, admin, "GET", f"/v1/spaces/{space}/stats")
            assert stats["episodes"] == CLIENTS * PER_CLIENT
            assert stats["task"]["consolidated_roots"] > 0
            for name in TASKS:
                recall = same_everywhere(urls, admin, "POST", f"/v1/spaces/{space}/recall",
                                         {"task": f"{name} in {space}", "top_k": 3})
                assert recall["task"]["matched"]
        # A key made with the CLI works on every replica, only on its space; revoked, nowhere.
        for url in urls:
            with httpx.Client(base_url=url, headers={
                    "Authorization": f"Bearer {only_a['key']}"}) as c:
                assert c.get("/v1/spaces/a/stats").status_code == 200
                assert c.get("/v1/spaces/b/stats").status_code == 403
        assert cli("keys", "revoke", only_a["id"], "--db", pg_url)["revoked"] is True
        for url in urls:
            r = httpx.get(f"{url}/v1/spaces/a/stats",
                          headers={"Authorization": f"Bearer {only_a['key']}"})
            assert r.status_code == 401
        for replica in replicas:  # SIGTERM: a graceful stop (uvicorn re-raises the signal)
            assert replica.stop() in (0, -15), replica.output()
            assert "Application shutdown complete" in replica.output()
        keys = [line for r in replicas for line in r.output().splitlines() if "dmk_" in line]
        assert keys == []  # no secret in any log
