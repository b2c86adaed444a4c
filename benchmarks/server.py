"""REST server throughput and latency vs the same calls made in-process, per operation, on
SQLite and on PostgreSQL, measured in one run.

What is timed: every operation of the table a client calls often -- ``recall``, ``show``,
``list_nodes``, ``stats``, ``consolidate`` (dry run), ``record_outcome``, ``correct`` and
``learn`` -- from C concurrent client threads (one keep-alive httpx client each) against the real
server (uvicorn, one worker, in a subprocess on loopback, API keys on), and the same calls from C
threads on one in-process ``DeltaMem`` (the baseline). Both sides start from the same seeded
memory and use the same embedder. Checks: no request fails, and no episode is lost (episodes
stored == seeded + sent).

    python benchmarks/server.py [--clients 1] [--requests 200] [--embedder static] \
        [--db sqlite,postgres] [--url postgresql://...]

Without ``--url`` (or $DELTAMEM_BENCH_PG_URL) a PostgreSQL server is started with scripts/pg.sh
for ``--db postgres`` and stopped afterwards. ``--embedder hashing`` (the test double) isolates
the server's own overhead from embedding cost. Prints a table and one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from deltamem.config import Settings
from deltamem.embed import make_embedder
from deltamem.engine.memory import DeltaMem
from deltamem.faces.server.keys import open_keys
from deltamem.formats.episodes import episode_from_dict

SEED = 40
SERVER = """
import sys, uvicorn
from deltamem.config import Settings
from deltamem.faces.server.rest import create_app
db, embedder, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
app = create_app(db, embedder=embedder, settings=Settings(embedder=embedder))
uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)
"""


def episode(worker: int, i: int) -> dict[str, Any]:
    """A distinct episode (new task and scene words) so every learn really writes."""
    return {"task": f"put object {worker}-{i} in receptacle {i % 7}",
            "env": f"a room {worker} with shelf {i} and a drawer {i % 5}",
            "success": i % 4 != 0, "score": None,
            "steps": [{"action": f"go to shelf {i}", "observation": f"You see object {i}."},
                      {"action": f"take object {worker}-{i}", "observation": "Taken."},
                      {"action": f"put object in receptacle {i % 7}", "observation": "Done."}]}


def query(worker: int, i: int) -> dict[str, Any]:
    return {"task": f"put object {i % SEED} in receptacle {i % 7}",
            "env": f"a room with shelf {i % SEED}"}


def run_clients(clients: int, requests: int,
                call: Callable[[int, int], None]) -> tuple[list[float], float, int]:
    """Run ``call(worker, i)`` from ``clients`` threads; return latencies (ms), wall s, errors."""
    latencies: list[list[float]] = [[] for _ in range(clients)]
    errors = [0] * clients
    barrier = threading.Barrier(clients + 1)

    def work(w: int) -> None:
        barrier.wait()
        for i in range(requests):
            started = time.perf_counter()
            try:
                call(w, i)
            except Exception:  # counted, reported; the benchmark must show errors = 0
                errors[w] += 1
            latencies[w].append((time.perf_counter() - started) * 1000)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(clients)]
    for t in threads:
        t.start()
    barrier.wait()
    started = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    return [x for row in latencies for x in row], wall, sum(errors)


def summary(latencies: list[float], wall: float, errors: int) -> dict[str, Any]:
    ordered = sorted(latencies)
    return {"requests": len(ordered), "rps": round(len(ordered) / wall, 1),
            "p50_ms": round(statistics.median(ordered), 3),
            "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))], 3), "errors": errors}


def seed(mem: DeltaMem) -> None:
    for i in range(SEED):
        mem.learn(episode_from_dict(episode(999, i)))


BENCH_OPS = ("recall", "show", "list_nodes", "stats", "consolidate", "record_outcome", "correct",
             "learn")


def local_calls(mem: DeltaMem, ids: list[str]) -> dict[str, Callable[[int, int], object]]:
    """Each operation as the library calls it (the baseline)."""
    return {
        "recall": lambda w, i: mem.recall(**query(w, i)),
        "show": lambda w, i: mem.show(ids[i % len(ids)]),
        "list_nodes": lambda w, i: mem.list_nodes(limit=20),
        "stats": lambda w, i: mem.stats(),
        "consolidate": lambda w, i: mem.consolidate(dry_run=True),
        "record_outcome": lambda w, i: mem.record_outcome([ids[i % len(ids)]], True),
        "correct": lambda w, i: mem.correct(ids[i % len(ids)], steps=[f"step {w}-{i}"]),
        "learn": lambda w, i: mem.learn(episode_from_dict(episode(w, i))),
    }


def http_calls(pool: list[httpx.Client], ids: list[str]) -> dict[str, Callable[[int, int], object]]:
    """Each operation as a client sends it over HTTP (the same inputs)."""
    space = "/v1/spaces/default"

    def send(method: str, w: int, path: str, **kwargs: Any) -> None:
        pool[w].request(method, space + path, **kwargs).raise_for_status()

    return {
        "recall": lambda w, i: send("POST", w, "/recall", json=query(w, i)),
        "show": lambda w, i: send("GET", w, f"/nodes/{ids[i % len(ids)]}"),
        "list_nodes": lambda w, i: send("GET", w, "/nodes", params={"limit": 20}),
        "stats": lambda w, i: send("GET", w, "/stats"),
        "consolidate": lambda w, i: send("POST", w, "/consolidate", params={"dry_run": "true"}),
        "record_outcome": lambda w, i: send("POST", w, "/outcome", json={
            "nodes": [ids[i % len(ids)]], "success": True}),
        "correct": lambda w, i: send("POST", w, f"/nodes/{ids[i % len(ids)]}/correct",
                                     json={"steps": [f"step {w}-{i}"]}),
        "learn": lambda w, i: send("POST", w, "/learn", json=episode(w, i)),
    }


def run_all(calls: dict[str, Callable[[int, int], object]], clients: int,
            requests: int) -> dict[str, Any]:
    return {op: summary(*run_clients(clients, requests, calls[op])) for op in BENCH_OPS}


def seeded(db: str, embedder: str) -> list[str]:
    """Seed the memory at ``db``; the ids of its task-tree nodes."""
    with DeltaMem.open(db, embedder=embedder, settings=Settings(embedder=embedder)) as mem:
        seed(mem)
        return [row["id"] for row in mem.list_nodes("task")]


def in_process(db: str, embedder: str, clients: int, requests: int) -> dict[str, Any]:
    ids = seeded(db, embedder)
    mem = DeltaMem.open(db, embedder=embedder, settings=Settings(embedder=embedder))
    out = run_all(local_calls(mem, ids), clients, requests)
    out["episodes_stored"] = mem.stats()["episodes"]
    mem.close()
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def over_http(db: str, embedder: str, clients: int, requests: int) -> dict[str, Any]:
    ids = seeded(db, embedder)
    keys = open_keys(db)
    secret = keys.create(["default"], name="bench")[1]
    keys.close()
    port = free_port()
    server = subprocess.Popen([sys.executable, "-c", SERVER, db, embedder, str(port)],
                              env={**os.environ, "PYTHONUNBUFFERED": "1"})
    base = f"http://127.0.0.1:{port}"
    try:
        wait_ready(base, server)
        pool = [httpx.Client(base_url=base, headers={"Authorization": f"Bearer {secret}"},
                             timeout=120) for _ in range(clients)]
        out = run_all(http_calls(pool, ids), clients, requests)
        out["episodes_stored"] = pool[0].get("/v1/spaces/default/stats").json()["episodes"]
        for client in pool:
            client.close()
        return out
    finally:
        server.terminate()
        server.wait(timeout=30)


def wait_ready(base: str, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError("server exited during start-up")
        try:
            if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.1)
    raise RuntimeError("server did not become ready")


def databases(kinds: list[str], folder: Path, url: str | None
              ) -> tuple[dict[str, tuple[str, str]], Callable[[], None]]:
    """Per database kind, the in-process and the HTTP side's database (fresh, apart)."""
    out: dict[str, tuple[str, str]] = {}
    stop: Callable[[], None] = lambda: None  # noqa: E731
    if "sqlite" in kinds:
        out["sqlite"] = (str(folder / "inproc.db"), str(folder / "server.db"))
    if "postgres" in kinds:
        from recall_pg import start_server, with_schema

        if not url:
            url, stop = start_server()
        out["postgres"] = (with_schema(url, "bench_inproc"), with_schema(url, "bench_http"))
    return out, stop


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=1)
    parser.add_argument("--requests", type=int, default=200, help="per client per operation")
    parser.add_argument("--embedder", default="static")
    parser.add_argument("--db", default="sqlite,postgres", help="sqlite, postgres or both")
    parser.add_argument("--url", default=os.environ.get("DELTAMEM_BENCH_PG_URL"))
    args = parser.parse_args()
    make_embedder(args.embedder)  # fail early on a bad spec or missing weights
    sent = args.clients * args.requests
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        dbs, stop = databases(args.db.split(","), Path(tmp), args.url)
        try:
            for kind, (local_db, served_db) in dbs.items():
                base = in_process(local_db, args.embedder, args.clients, args.requests)
                http = over_http(served_db, args.embedder, args.clients, args.requests)
                results[kind] = {
                    "in_process": base, "http": http,
                    "lost_episodes": {"in_process": SEED + sent - base["episodes_stored"],
                                      "http": SEED + sent - http["episodes_stored"]},
                    "ratio_rps_http_over_in_process": {
                        op: round(http[op]["rps"] / base[op]["rps"], 2) for op in BENCH_OPS}}
        finally:
            stop()
    report: dict[str, Any] = {
        "benchmark": "server", "embedder": args.embedder, "clients": args.clients,
        "requests_per_client": args.requests, "cpus": os.cpu_count(),
        "python": platform.python_version(), "workers": 1, "results": results}
    print(f"{'db':9} {'op':15} {'in-proc r/s':>11} {'http r/s':>9} {'ratio':>6} "
          f"{'p50 in':>8} {'p50 http':>8} {'errors':>6}")
    for kind, data in results.items():
        for op in BENCH_OPS:
            base, http = data["in_process"][op], data["http"][op]
            print(f"{kind:9} {op:15} {base['rps']:11.1f} {http['rps']:9.1f} "
                  f"{data['ratio_rps_http_over_in_process'][op]:6.2f} {base['p50_ms']:8.2f} "
                  f"{http['p50_ms']:8.2f} {base['errors'] + http['errors']:6d}")
        print(f"{kind}: lost episodes {data['lost_episodes']}")
    print(json.dumps(report))
    failed = any(d[side][op]["errors"] for d in results.values()
                 for side in ("in_process", "http") for op in BENCH_OPS)
    if failed or any(v for d in results.values() for v in d["lost_episodes"].values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
