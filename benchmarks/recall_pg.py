"""Recall latency on PostgreSQL + pgvector next to SQLite, and migration throughput.

For each size (default 10k and 100k nodes, half per tree, dim 384 random unit vectors, chains up to
depth 4), both stores get the same nodes through the Store API in big write blocks. A recall is
what ``DeltaMem.recall`` does after embedding: scan both trees (k=1), then load the best node's
chain in each. We report p50/p95 over random queries (warm: after the first scan built each
process-local index; the first scan is reported as ``cold_ms``), plus a reference row for a
server-side exact scan in SQL (``ORDER BY embedding <#> q LIMIT 1``), which is what scanning
without the process-local index would cost. Migration: ``migrate_stores`` SQLite -> Postgres and
back, in nodes per second. SQLite is the baseline for every ratio.

Usage: python benchmarks/recall_pg.py [--sizes 10000,100000] [--queries 200] [--url URL]
Without --url (or $DELTAMEM_BENCH_PG_URL) a server is started with scripts/pg.sh and stopped.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

from deltamem.core.delta import diff
from deltamem.core.model import Knowledge, Node, NodeKind, Outcome, Skill, Tree
from deltamem.store.base import Store
from deltamem.store.copy import copy_between
from deltamem.store.postgres import PostgresStore
from deltamem.store.sqlite import SQLiteStore

DIM = 384
BLOCK = 5000
ROOT = Path(__file__).resolve().parents[1]


def unit(rng: np.random.Generator, n: int) -> np.ndarray:
    m = rng.standard_normal((n, DIM)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def make_nodes(n: int, rng: np.random.Generator) -> list[tuple[Node, np.ndarray]]:
    """``n`` nodes, alternating trees; ~70% are deltas under an earlier node of depth < 4."""
    vectors = unit(rng, n)
    out: list[tuple[Node, np.ndarray]] = []
    shallow: dict[Tree, list[Node]] = {Tree.TASK: [], Tree.ENV: []}
    for i in range(n):
        tree = Tree.TASK if i % 2 == 0 else Tree.ENV
        base: Skill | Knowledge = (Skill(f"task {i}", ("go", "take")) if tree is Tree.TASK
                                   else Knowledge(f"env {i}"))
        # Environment nodes are always successes (the store refuses to import a failed one);
        # the draw is made for every node so the task tree's outcomes stay as they were.
        failed = rng.random() < 0.1
        outcome = Outcome.FAILURE if failed and tree is Tree.TASK else Outcome.SUCCESS
        pool = shallow[tree]
        if pool and rng.random() < 0.7:
            parent = pool[int(rng.integers(len(pool)))]
            after = (Skill(f"task {i}", ("go", "open", "take")) if tree is Tree.TASK
                     else Knowledge(f"env {i}", ("a note",)))
            node = Node(f"n{i}", tree, NodeKind.DELTA, outcome, f"key {i}", parent_id=parent.id,
                        depth=parent.depth + 1, patch=diff(base, after), created_at=float(i))
        else:
            node = Node(f"n{i}", tree, NodeKind.ROOT, outcome, f"key {i}", content=base,
                        created_at=float(i))
        if node.depth < 4:
            pool.append(node)
        out.append((node, vectors[i]))
    return out


def fill(store: Store, space: str, nodes: list[tuple[Node, np.ndarray]]) -> float:
    """Insert in write blocks of BLOCK nodes; return nodes per second."""
    store.ensure_space(space, "bench-random", DIM)
    started = time.perf_counter()
    for start in range(0, len(nodes), BLOCK):
        with store.write(space):
            for node, vector in nodes[start:start + BLOCK]:
                store.add_node(space, node, vector)
    return len(nodes) / (time.perf_counter() - started)


def recall_once(store: Store, space: str, q_task: np.ndarray, q_env: np.ndarray) -> None:
    for tree, q in ((Tree.TASK, q_task), (Tree.ENV, q_env)):
        best = store.scan(space, tree, q, penalty=0.05, k=1)
        store.chain(space, best[0].id)


def timed(fn: Callable[[], Any], runs: int) -> dict[str, float]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return {"p50_ms": float(np.percentile(times, 50)), "p95_ms": float(np.percentile(times, 95))}


def sql_scan(url: str, space: str, queries: np.ndarray) -> Callable[[], None]:
    """A server-side exact scan of both trees per call (reference only; no chain)."""
    conn = psycopg.connect(url, autocommit=True)
    from deltamem.store._pg_vector import register_vector_adapters

    register_vector_adapters(conn)
    it = iter(range(10**9))

    def run() -> None:
        q = queries[next(it) % len(queries)]
        for tree in ("task", "env"):
            conn.execute(
                "SELECT id FROM nodes WHERE space = %s AND tree = %s ORDER BY "
                "(embedding <#> %b) + CASE WHEN outcome = 'failure' THEN 0.05 ELSE 0 END LIMIT 1",
                (space, tree, q),
            ).fetchone()

    return run


def bench_size(n: int, server_url: str, folder: Path, queries: int) -> dict[str, Any]:
    rng = np.random.default_rng(n)
    nodes = make_nodes(n, rng)
    space = f"bench{n}"
    pg_url = with_schema(server_url, f"bench{n}")
    lite, pg = SQLiteStore(folder / f"bench{n}.db"), PostgresStore(pg_url)
    row: dict[str, Any] = {"nodes": n}
    try:
        row["insert_nodes_per_s"] = {"sqlite": fill(lite, space, nodes), "postgres": fill(pg, space,
                                                                                          nodes)}
        qs = unit(rng, 2 * queries)
        for name, store in (("sqlite", lite), ("postgres", pg)):
            fresh = type(store)(folder / f"bench{n}.db") if name == "sqlite" else PostgresStore(
                pg_url)
            started = time.perf_counter()
            recall_once(fresh, space, qs[0], qs[1])
            cold = (time.perf_counter() - started) * 1000
            fresh.close()
            it = iter(range(queries))

            def one(store: Store = store, it: Any = it) -> None:
                i = next(it)
                recall_once(store, space, qs[2 * i], qs[2 * i + 1])

            recall_once(store, space, qs[0], qs[1])  # warm this handle's index
            row[name] = {**timed(one, queries), "cold_ms": cold}
        row["postgres_sql_scan"] = timed(sql_scan(pg_url, space, qs), min(queries, 30))
        row["migration"] = migration(lite, server_url, space, n, folder)
    finally:
        lite.close()
        pg.close()
    return row


def with_schema(url: str, schema: str) -> str:
    """``url`` (without a query string) using a fresh schema ``schema``."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        conn.execute(f"CREATE SCHEMA {schema}")
    return f"{url}?options=-csearch_path%3D{schema}%2Cpublic"


def migration(lite: SQLiteStore, server_url: str, space: str, n: int,
              folder: Path) -> dict[str, float]:
    """SQLite -> a fresh Postgres schema -> a fresh SQLite file, in nodes per second."""
    dst = PostgresStore(with_schema(server_url, f"mig{n}"))
    back = SQLiteStore(folder / f"back{n}.db")
    try:
        started = time.perf_counter()
        copy_between(lite, dst, space=space)
        to_pg = n / (time.perf_counter() - started)
        started = time.perf_counter()
        copy_between(dst, back, space=space)
        to_lite = n / (time.perf_counter() - started)
    finally:
        dst.close()
        back.close()
    return {"sqlite_to_postgres_nodes_per_s": to_pg, "postgres_to_sqlite_nodes_per_s": to_lite}


def start_server() -> tuple[str, Callable[[], None]]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    pg_dir = tempfile.mkdtemp(prefix="deltamem-bench-pg-")
    script = str(ROOT / "scripts" / "pg.sh")
    url = subprocess.run([script, "start", pg_dir, str(port)], check=True, capture_output=True,
                         text=True).stdout.strip()

    def stop() -> None:
        subprocess.run([script, "stop", pg_dir], check=False, capture_output=True)
        subprocess.run(["rm", "-rf", pg_dir], check=False)

    return url, stop


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--url", default=os.environ.get("DELTAMEM_BENCH_PG_URL"))
    args = parser.parse_args()
    stop: Callable[[], None] = lambda: None  # noqa: E731
    url = args.url
    if not url:
        url, stop = start_server()
    try:
        with tempfile.TemporaryDirectory(prefix="deltamem-bench-") as tmp:
            rows = [bench_size(int(n), url, Path(tmp), args.queries)
                    for n in args.sizes.split(",")]
    finally:
        stop()
    report(rows)


def report(rows: list[dict[str, Any]]) -> None:
    print(f"{'nodes':>7} {'store':<22} {'p50 ms':>8} {'p95 ms':>8} {'cold ms':>8} "
          f"{'p50 x sqlite':>12} {'insert n/s':>11}")
    for r in rows:
        base = r["sqlite"]["p50_ms"]
        for name in ("sqlite", "postgres", "postgres_sql_scan"):
            m = r[name]
            r.setdefault("ratios", {})[name] = m["p50_ms"] / base
            ins = r["insert_nodes_per_s"].get(name)
            print(f"{r['nodes']:>7} {name:<22} {m['p50_ms']:>8.2f} {m['p95_ms']:>8.2f} "
                  f"{m.get('cold_ms', float('nan')):>8.0f} {m['p50_ms'] / base:>12.2f} "
                  f"{(f'{ins:,.0f}' if ins else '-'):>11}")
        mig = r["migration"]
        print(f"{r['nodes']:>7} migration: sqlite->postgres "
              f"{mig['sqlite_to_postgres_nodes_per_s']:,.0f} nodes/s, postgres->sqlite "
              f"{mig['postgres_to_sqlite_nodes_per_s']:,.0f} nodes/s")
    print(json.dumps({"benchmark": "recall_pg", "dim": DIM, "blas": _blas(),
                      "load_average": os.getloadavg(), "rows": rows}, indent=1))


def _blas() -> Any:
    """The BLAS kernel in use (its choice changes scan speed)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return None
    return [{k: i.get(k) for k in ("internal_api", "version", "architecture", "num_threads")}
            for i in threadpool_info()]


if __name__ == "__main__":
    sys.exit(main())
