"""Recall and learn through 1, 2 and 4 server replicas over one PostgreSQL, vs in-process.

What is timed: C client threads (one keep-alive httpx client per replica each) send ``recall``
and then ``learn`` requests, each request to the next replica in turn, against R real
``deltamem serve`` processes (API keys on) over one PostgreSQL; the baseline is the same calls
from C threads into one in-process ``DeltaMem`` over the same PostgreSQL. Every configuration
starts from the same seeded memory in a fresh schema, with the same embedder. Checks: no request
fails, no episode is lost (stored == seeded + sent), and the trees pass ``check()``.

    python benchmarks/serve_scale.py [--replicas 1,2,4] [--clients 8] [--requests 25]
                                     [--embedder minilm] [--pg-url URL]

Without ``--pg-url`` a throwaway PostgreSQL is started with scripts/pg.sh (and stopped). The
machine's CPU count and load average are part of the report: replicas cannot add throughput
beyond the cores that run them and the database. Prints a table and one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import psycopg

from deltamem.config import Settings
from deltamem.embed import make_embedder
from deltamem.engine.memory import DeltaMem
from deltamem.faces.server.keys import open_keys
from deltamem.formats.episodes import episode_from_dict
from server import SEED, episode, free_port, query, run_clients, summary, wait_ready

ROOT = Path(__file__).resolve().parents[1]
OPS = ("recall", "learn")


@contextmanager
def postgres(url: str | None) -> Iterator[str]:
    """The given server, or a throwaway one started with scripts/pg.sh."""
    if url:
        yield url
        return
    folder = tempfile.mkdtemp(prefix="deltamem-bench-pg-")
    started = subprocess.run([str(ROOT / "scripts" / "pg.sh"), "start", folder,
                              str(free_port())], capture_output=True, text=True, timeout=180)
    if started.returncode != 0:
        sys.exit(f"could not start PostgreSQL: {started.stderr}")
    try:
        yield started.stdout.strip().splitlines()[-1]
    finally:
        subprocess.run([str(ROOT / "scripts" / "pg.sh"), "stop", folder], capture_output=True,
                       timeout=120)
        shutil.rmtree(folder, ignore_errors=True)


def fresh_schema(base: str) -> str:
    """A new, empty schema on the server; its URL."""
    name = "bench_" + uuid.uuid4().hex[:10]
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute(f"CREATE SCHEMA {name}")
    sep = "&" if "?" in base else "?"
    return f"{base}{sep}options={quote(f'-csearch_path={name},public', safe='')}"


def seeded(base: str, embedder: str) -> str:
    url = fresh_schema(base)
    with DeltaMem.open(url, embedder=embedder, settings=Settings(embedder=embedder)) as mem:
        for i in range(SEED):
            mem.learn(episode_from_dict(episode(999, i)))
    return url


def check(url: str, embedder: str) -> tuple[int, list[str]]:
    with DeltaMem.open(url, embedder=embedder, settings=Settings(embedder=embedder)) as mem:
        return mem.stats().episodes, mem.check()


def in_process(base: str, embedder: str, clients: int, requests: int) -> dict[str, Any]:
    url = seeded(base, embedder)
    mem = DeltaMem.open(url, embedder=embedder, settings=Settings(embedder=embedder))
    try:
        out: dict[str, Any] = {
            "recall": summary(*run_clients(
                clients, requests, lambda w, i: mem.recall(**query(w, i)) and None)),
            "learn": summary(*run_clients(
                clients, requests,
                lambda w, i: mem.learn(episode_from_dict(episode(w, i))) and None))}
    finally:
        mem.close()
    out["episodes_stored"], out["problems"] = check(url, embedder)
    return out


def replicas(base: str, embedder: str, count: int, clients: int,
             requests: int, logs: Path) -> dict[str, Any]:
    url = seeded(base, embedder)
    keys = open_keys(url)
    secret = keys.create(["default"], name="bench")[1]
    keys.close()
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "DELTAMEM_EMBEDDER": embedder,
           "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    with ExitStack() as stack:
        urls = []
        for n in range(count):
            port = free_port()
            log = stack.enter_context((logs / f"r{count}-{n}.log").open("wb"))
            proc = subprocess.Popen([sys.executable, "-m", "deltamem", "serve", "--db", url,
                                     "--port", str(port)], env=env, stdout=log,
                                    stderr=subprocess.STDOUT)
            stack.callback(_stop, proc)
            urls.append(f"http://127.0.0.1:{port}")
            wait_ready(urls[-1], proc)
        pool = [[stack.enter_context(httpx.Client(
            base_url=u, timeout=300, headers={"Authorization": f"Bearer {secret}"}))
            for u in urls] for _ in range(clients)]

        def post(w: int, i: int, path: str, body: dict[str, Any]) -> None:
            pool[w][(w + i) % count].post(path, json=body).raise_for_status()

        out: dict[str, Any] = {
            "recall": summary(*run_clients(clients, requests, lambda w, i: post(
                w, i, "/v1/spaces/default/recall", query(w, i)))),
            "learn": summary(*run_clients(clients, requests, lambda w, i: post(
                w, i, "/v1/spaces/default/learn", episode(w, i))))}
    out["episodes_stored"], out["problems"] = check(url, embedder)
    return out


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", default="1,2,4")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--requests", type=int, default=25, help="per client per operation")
    parser.add_argument("--embedder", default="minilm")
    parser.add_argument("--pg-url", default=None)
    args = parser.parse_args()
    counts = [int(x) for x in args.replicas.split(",")]
    make_embedder(args.embedder)  # fail early on a bad spec or missing weights
    load_before = os.getloadavg()
    sent = args.clients * args.requests
    results: dict[str, dict[str, Any]] = {}
    with postgres(args.pg_url) as base, tempfile.TemporaryDirectory() as logs:
        results["in-process"] = in_process(base, args.embedder, args.clients, args.requests)
        for count in counts:
            results[f"{count} replica(s)"] = replicas(base, args.embedder, count, args.clients,
                                                      args.requests, Path(logs))
    lost = {side: SEED + sent - r["episodes_stored"] for side, r in results.items()}
    report: dict[str, Any] = {
        "benchmark": "serve_scale", "embedder": args.embedder, "clients": args.clients,
        "requests_per_client": args.requests, "cpus": os.cpu_count(),
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(), "results": results, "lost_episodes": lost,
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    print(f"{'op':7} {'side':13} {'req':>5} {'req/s':>8} {'p50 ms':>8} {'p95 ms':>8} "
          f"{'errors':>6}")
    for op in OPS:
        for side, data in results.items():
            row = data[op]
            print(f"{op:7} {side:13} {row['requests']:5d} {row['rps']:8.1f} "
                  f"{row['p50_ms']:8.2f} {row['p95_ms']:8.2f} {row['errors']:6d}")
    print(f"lost episodes: {lost}; cpus {os.cpu_count()}, load before {load_before}")
    print(json.dumps(report))
    failed = any(d[op]["errors"] for d in results.values() for op in OPS)
    if failed or any(lost.values()) or any(d["problems"] for d in results.values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
