"""REST server throughput and latency vs the same calls made in-process, measured in one run.

What is timed: ``recall`` and ``learn`` requests from C concurrent client threads (one httpx
client each, keep-alive) against the real server (uvicorn in a subprocess on loopback, with API
keys on), and the same operations from C threads calling one in-process ``DeltaMem`` (the
baseline). Both sides start from the same seeded memory and use the same embedder. Checks: no
request fails, and no episode is lost (episodes stored == seeded + sent).

    python benchmarks/server.py [--clients 4] [--requests 50] [--embedder minilm]

``--embedder hashing`` (the test double) isolates the server's own overhead from embedding cost.
Prints a table and one JSON object.
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


def in_process(db: Path, embedder: str, clients: int, requests: int) -> dict[str, Any]:
    mem = DeltaMem.open(db, embedder=embedder, settings=Settings(embedder=embedder))
    seed(mem)
    out = {"recall": summary(*run_clients(
        clients, requests, lambda w, i: mem.recall(**query(w, i)) and None)),
        "learn": summary(*run_clients(
            clients, requests, lambda w, i: mem.learn(episode_from_dict(episode(w, i))) and None))}
    out["episodes_stored"] = mem.stats()["episodes"]
    mem.close()
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def over_http(db: Path, embedder: str, clients: int, requests: int) -> dict[str, Any]:
    mem = DeltaMem.open(db, embedder=embedder, settings=Settings(embedder=embedder))
    seed(mem)
    mem.close()
    keys = open_keys(str(db))
    secret = keys.create(["default"], name="bench")[1]
    keys.close()
    port = free_port()
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(db), embedder, str(port)],
                              env={**os.environ, "PYTHONUNBUFFERED": "1"})
    base = f"http://127.0.0.1:{port}"
    try:
        wait_ready(base, server)
        pool = [httpx.Client(base_url=base, headers={"Authorization": f"Bearer {secret}"},
                             timeout=120) for _ in range(clients)]

        def post(path: str, body: dict[str, Any], w: int) -> None:
            pool[w].post(path, json=body).raise_for_status()

        out = {"recall": summary(*run_clients(
            clients, requests, lambda w, i: post("/v1/spaces/default/recall", query(w, i), w))),
            "learn": summary(*run_clients(
                clients, requests, lambda w, i: post("/v1/spaces/default/learn",
                                                     episode(w, i), w)))}
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--requests", type=int, default=50, help="per client per operation")
    parser.add_argument("--embedder", default="minilm")
    args = parser.parse_args()
    make_embedder(args.embedder)  # fail early on a bad spec or missing weights
    with tempfile.TemporaryDirectory() as tmp:
        base = in_process(Path(tmp) / "inproc.db", args.embedder, args.clients, args.requests)
        http = over_http(Path(tmp) / "server.db", args.embedder, args.clients, args.requests)
    sent = args.clients * args.requests
    report: dict[str, Any] = {
        "benchmark": "server", "embedder": args.embedder, "clients": args.clients,
        "requests_per_client": args.requests, "cpus": os.cpu_count(),
        "python": platform.python_version(), "in_process": base, "http": http,
        "lost_episodes": {"in_process": SEED + sent - base["episodes_stored"],
                          "http": SEED + sent - http["episodes_stored"]},
        "ratio_http_over_in_process": {
            op: {"p50": round(http[op]["p50_ms"] / base[op]["p50_ms"], 2),
                 "p95": round(http[op]["p95_ms"] / base[op]["p95_ms"], 2),
                 "rps": round(http[op]["rps"] / base[op]["rps"], 2)} for op in ("recall", "learn")
        },
    }
    print(f"{'op':8} {'side':11} {'req':>5} {'req/s':>8} {'p50 ms':>8} {'p95 ms':>8} {'errors':>6}")
    for op in ("recall", "learn"):
        for side, data in (("in-process", base), ("http", http)):
            row = data[op]
            print(f"{op:8} {side:11} {row['requests']:5d} {row['rps']:8.1f} "
                  f"{row['p50_ms']:8.2f} {row['p95_ms']:8.2f} {row['errors']:6d}")
    print(f"lost episodes: {report['lost_episodes']}")
    print(json.dumps(report))
    failed = any(d[op]["errors"] for d in (base, http) for op in ("recall", "learn"))
    if failed or any(report["lost_episodes"].values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
