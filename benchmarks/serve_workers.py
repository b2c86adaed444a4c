"""`deltamem serve --workers N` against one worker, and both against in-process, in one run.

What is timed: ``recall`` requests from C concurrent client threads (one keep-alive httpx client
each, so the kernel spreads the connections over the worker processes) against a real
``deltamem serve`` subprocess over one SQLite file, with API keys on, once with ``--workers 1``
and once with ``--workers N``; the baseline is the same calls from C threads into one in-process
``DeltaMem`` over a copy of the same seeded memory. Checks: no request fails, and every answer
of the N-worker server equals the in-process answer (cost accounting aside).

    python benchmarks/serve_workers.py [--workers 2] [--clients 8] [--requests 50]
                                       [--embedder hashing]

A server cannot use more cores than the machine gives it: the report carries the CPU count and
the load average. Prints a table and one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
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
from deltamem.engine.memory import DeltaMem
from deltamem.faces.server.keys import open_keys
from deltamem.formats.episodes import episode_from_dict

SEED = 60
TASKS = ["heat the apple", "cool the milk", "clean the mug", "slice the bread", "open the safe",
         "water the plant"]


def episode(i: int) -> dict[str, Any]:
    task = f"{TASKS[i % len(TASKS)]} number {i}"
    return {"task": task, "env": f"room {i % 7} with a table", "success": i % 5 != 0,
            "steps": [{"action": f"step {j} of {task}", "observation": "ok"} for j in range(4)]}


def query(w: int, i: int) -> dict[str, Any]:
    return {"task": f"{TASKS[(w + i) % len(TASKS)]} number {(w * 7 + i) % SEED}",
            "env": f"room {i % 7} with a table"}


def run_clients(clients: int, requests: int,
                call: Callable[[int, int], Any]) -> tuple[list[float], float, int, list[Any]]:
    latencies: list[float] = []
    answers: list[Any] = []
    errors = 0
    lock = threading.Lock()

    def work(w: int) -> None:
        nonlocal errors
        for i in range(requests):
            start = time.perf_counter()
            try:
                answer = call(w, i)
                ok = True
            except Exception:  # counted, and the run fails at the end
                answer, ok = None, False
            elapsed = time.perf_counter() - start
            with lock:
                latencies.append(elapsed)
                answers.append((w, i, answer))
                errors += not ok

    threads = [threading.Thread(target=work, args=(w,)) for w in range(clients)]
    began = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return latencies, time.perf_counter() - began, errors, sorted(answers, key=lambda a: a[:2])


def summary(latencies: list[float], wall: float, errors: int) -> dict[str, Any]:
    ordered = sorted(latencies)
    return {"requests": len(ordered), "errors": errors, "rps": round(len(ordered) / wall, 1),
            "p50_ms": round(statistics.median(ordered) * 1000, 2),
            "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))] * 1000, 2)}


def strip(answer: Any) -> Any:
    if isinstance(answer, dict):
        return {k: v for k, v in answer.items() if k != "usage"}
    return answer


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def served(db: Path, embedder: str, workers: int, clients: int,
           requests: int) -> tuple[dict[str, Any], list[Any]]:
    keys = open_keys(str(db))
    secret = keys.create(["default"], name="bench")[1]
    keys.close()
    port = free_port()
    env = {**os.environ, "DELTAMEM_EMBEDDER": embedder, "PYTHONUNBUFFERED": "1"}
    server = subprocess.Popen(
        [sys.executable, "-m", "deltamem", "serve", "--db", str(db),
         "--port", str(port), "--workers", str(workers)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("server did not start")
            time.sleep(0.2)
        pool = [httpx.Client(base_url=base, headers={"Authorization": f"Bearer {secret}"},
                             timeout=120) for _ in range(clients)]

        def post(w: int, i: int) -> Any:
            response = pool[w].post("/v1/spaces/default/recall", json=query(w, i))
            response.raise_for_status()
            return response.json()

        post(0, 0)  # every worker loads lazily; the first answers warm one of them
        lat, wall, errors, answers = run_clients(clients, requests, post)
        for client in pool:
            client.close()
        return summary(lat, wall, errors), answers
    finally:
        server.terminate()
        server.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--requests", type=int, default=50, help="per client")
    parser.add_argument("--embedder", default="hashing")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        seeded = Path(tmp) / "seed.db"
        settings = Settings(embedder=args.embedder)
        with DeltaMem.open(seeded, embedder=args.embedder, settings=settings) as mem:
            for i in range(SEED):
                mem.learn(episode_from_dict(episode(i)))
        dbs = {name: Path(tmp) / f"{name}.db" for name in ("inproc", "one", "many")}
        for path in dbs.values():
            shutil.copy(seeded, path)
        with DeltaMem.open(dbs["inproc"], embedder=args.embedder, settings=settings) as mem:
            mem.recall(**query(0, 0))
            lat, wall, errors, own = run_clients(
                args.clients, args.requests, lambda w, i: mem.recall(**query(w, i)).to_dict())
            base = summary(lat, wall, errors)
        one, _ = served(dbs["one"], args.embedder, 1, args.clients, args.requests)
        many, answers = served(dbs["many"], args.embedder, args.workers, args.clients,
                               args.requests)
    same = [strip(a[2]) for a in answers] == [strip(a[2]) for a in own]
    rows = {"in-process": base, "serve 1 worker": one, f"serve {args.workers} workers": many}
    report: dict[str, Any] = {
        "benchmark": "serve_workers", "embedder": args.embedder, "workers": args.workers,
        "clients": args.clients, "requests_per_client": args.requests, "cpus": os.cpu_count(),
        "load_average": os.getloadavg(), "python": platform.python_version(),
        "recall": rows, "same_answers": same,
        "ratio_rps": {"workers_over_one": round(many["rps"] / one["rps"], 2),
                      "workers_over_in_process": round(many["rps"] / base["rps"], 2),
                      "one_over_in_process": round(one["rps"] / base["rps"], 2)},
    }
    print(f"{'recall':18} {'req':>5} {'req/s':>8} {'p50 ms':>8} {'p95 ms':>8} {'errors':>6}")
    for name, row in rows.items():
        print(f"{name:18} {row['requests']:5d} {row['rps']:8.1f} {row['p50_ms']:8.2f} "
              f"{row['p95_ms']:8.2f} {row['errors']:6d}")
    print(f"same answers as in-process: {same}; cpus {os.cpu_count()}, "
          f"load {report['load_average'][0]:.1f}")
    print(json.dumps(report))
    if not same or any(r["errors"] for r in rows.values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
