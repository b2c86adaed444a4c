"""deltamem next to the stores a user would pick instead, in one interleaved run.

**Vector search.** The same 384-d unit vectors (``scale.py``'s distribution: clustered rows at
cosine ~0.8 to their centre, "near" queries that are perturbed stored rows) go into every
system; then each query goes to every system in turn, the order rotated by one system per
query. For each system both k values run back to back (which k goes first alternates): the
first call is **cold** (the other systems, and every 25 queries a buffer sweep, ran just before
it and evicted the caches), the second **warm**. Systems:

* ``deltamem``: ``SQLiteStore.scan`` on a fresh handle (its exact int8 + float32 scan), the
  store as this tree ships it; ``deltamem-state-query``: the same with the per-scan store state
  query forced on (``_reuse_state = False``), which is what every scan paid before;
* ``numpy``: ``X @ q`` + argpartition (float32);
* ``faiss-flat``: faiss ``IndexFlatIP`` (exact; 1 thread);
* ``hnswlib``: M=16, ef_construction=100, ef=100 (approximate);
* ``sqlite-vec``: a ``vec0`` table on ``pysqlite3`` (exact; ``mmap_size`` on);
* ``chroma``: ``PersistentClient``, ``hnsw:space=ip``, defaults otherwise (approximate;
  telemetry off);
* ``lancedb``: a table with no index (its exact flat scan; ``dot`` distance).

Recall@k is measured against a float64 exact top-k. Ratios are time ÷ deltamem's, per p50.

**Learn.** ``--learns`` generated episodes (``e2e.py``'s), one at a time, interleaved:
deltamem's ``learn`` with the static embedder (trace extractor, SQLite) against LanceDB's
per-episode add (one embed call with the same embedder + ``tasks.add`` + ``scenes.add``), and
deltamem's learn with the store reading as before its node cache and state reuse (every node
decoded on every read, a state query per scan), and with ``--baseline-src`` another checkout's
learn (a subprocess that times its own ``learn``), all after ``--prefill`` episodes.
Episodes/s = 1 / mean.

The peers are the ``bench-peers`` extra (``pip install deltamem[bench-peers]``); a missing one is
named and left out, never faked. Prints tables and one JSON object (also to ``--out``).

    python benchmarks/peers.py [--n 10000] [--queries 200] [--learns 150] [--out peers.json]
    python benchmarks/peers.py --smoke
    git worktree add /tmp/prev <previous release> && \\
        python benchmarks/peers.py --baseline-src /tmp/prev/src
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from deltamem.core.model import Node, Tree
from deltamem.embed import make_embedder
from deltamem.engine.memory import DeltaMem
from deltamem.extract.trace import TraceExtractor
from deltamem.store.sqlite import SQLiteStore

sys.path.insert(0, str(Path(__file__).parent))
from e2e import episodes  # noqa: E402
from recall import DIM, PENALTY, _node, percentiles  # noqa: E402

SPACE = "bench"
SPREAD = 0.75  # as scale.py
QUERY_NOISE = 0.5
SWEEP_EVERY = 25
SWEEP_BYTES = 64 << 20
BASELINE = "baseline checkout learn (static)"


def _unit(x: np.ndarray) -> np.ndarray:
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


def data(n: int, queries: int, centres: int, rng: np.random.Generator
         ) -> tuple[np.ndarray, np.ndarray]:
    centre = _unit(rng.standard_normal((centres, DIM), dtype=np.float32))
    noise = _unit(rng.standard_normal((n, DIM), dtype=np.float32))
    x = _unit(centre[rng.integers(0, centres, size=n)] + SPREAD * noise)
    picked = rng.choice(n, size=queries, replace=n < queries)
    qn = _unit(rng.standard_normal((queries, DIM), dtype=np.float32))
    return x, _unit(x[picked] + QUERY_NOISE * qn)


# -- the systems: build(x) once, then search(q, k) -> row numbers ------------------------------
class System:
    key = ""
    exact = True

    def build(self, x: np.ndarray, tmp: Path) -> None: ...

    def search(self, q: np.ndarray, k: int) -> list[int]:
        raise NotImplementedError


class DeltamemScan(System):
    key = "deltamem"

    def __init__(self, reuse_state: bool = True, shared: dict[str, Any] | None = None):
        self.reuse_state = reuse_state
        self.shared = shared if shared is not None else {}

    def build(self, x: np.ndarray, tmp: Path) -> None:
        path = self.shared.get("path")
        if path is None:  # the first handle writes the database; the second reuses it
            path = self.shared["path"] = tmp / "deltamem.db"
            writer = SQLiteStore(path, snapshot_every=0)
            writer.ensure_space(SPACE, "fixed", DIM)
            parents: list[Node] = []
            with writer.write(SPACE):
                for i in range(len(x)):
                    node = _node(Tree.ENV, i, parents, False)
                    writer.add_node(SPACE, node, x[i])
                    parents = [node] if node.is_root else parents + [node]
                    if len(parents) >= 5:
                        parents = []
            writer.close()
        self.store = SQLiteStore(path, snapshot_every=0)  # a fresh handle
        self.store._reuse_state = self.reuse_state
        self.store.scan(SPACE, Tree.ENV, x[0], penalty=PENALTY)  # loads the index

    def search(self, q: np.ndarray, k: int) -> list[int]:
        return [int(c.id[2:]) for c in self.store.scan(SPACE, Tree.ENV, q, penalty=PENALTY,
                                                       k=k)]


class StateQueryScan(DeltamemScan):
    key = "deltamem-state-query"


class Numpy(System):
    key = "numpy"

    def build(self, x: np.ndarray, tmp: Path) -> None:
        self.x = x

    def search(self, q: np.ndarray, k: int) -> list[int]:
        s = self.x @ q
        top = np.argpartition(-s, k - 1)[:k]
        return top[np.argsort(-s[top])].tolist()


class FaissFlat(System):
    key = "faiss-flat"

    def build(self, x: np.ndarray, tmp: Path) -> None:
        import faiss

        faiss.omp_set_num_threads(1)
        self.ix = faiss.IndexFlatIP(DIM)
        self.ix.add(x)

    def search(self, q: np.ndarray, k: int) -> list[int]:
        return [int(i) for i in self.ix.search(q[None, :], k)[1][0]]


class Hnswlib(System):
    key = "hnswlib"
    exact = False

    def build(self, x: np.ndarray, tmp: Path) -> None:
        import hnswlib

        self.ix = hnswlib.Index(space="ip", dim=DIM)
        self.ix.init_index(max_elements=len(x), M=16, ef_construction=100, random_seed=1)
        self.ix.add_items(x, np.arange(len(x)), num_threads=1)
        self.ix.set_ef(100)
        self.ix.set_num_threads(1)

    def search(self, q: np.ndarray, k: int) -> list[int]:
        return [int(i) for i in self.ix.knn_query(q, k=k)[0][0]]


class SqliteVec(System):
    key = "sqlite-vec"

    def build(self, x: np.ndarray, tmp: Path) -> None:
        import sqlite_vec
        from pysqlite3 import dbapi2

        self.con = dbapi2.connect(str(tmp / "vec.db"))
        self.con.enable_load_extension(True)
        sqlite_vec.load(self.con)
        self.con.enable_load_extension(False)
        self.con.execute("PRAGMA mmap_size=4294967296")
        self.con.execute(f"CREATE VIRTUAL TABLE v USING vec0(embedding float[{DIM}])")
        with self.con:
            self.con.executemany("INSERT INTO v(rowid, embedding) VALUES (?, ?)",
                                 ((i, x[i].tobytes()) for i in range(len(x))))

    def search(self, q: np.ndarray, k: int) -> list[int]:
        rows = self.con.execute("SELECT rowid, distance FROM v WHERE embedding MATCH ? AND k = ? "
                                "ORDER BY distance", (q.tobytes(), k)).fetchall()
        return [int(r[0]) for r in rows]


class Chroma(System):
    key = "chroma"
    exact = False

    def build(self, x: np.ndarray, tmp: Path) -> None:
        import chromadb
        from chromadb.config import Settings as ChromaSettings

        client = chromadb.PersistentClient(path=str(tmp / "chroma"),
                                           settings=ChromaSettings(anonymized_telemetry=False))
        self.col = client.create_collection("vectors", metadata={"hnsw:space": "ip"},
                                            embedding_function=None)
        step = client.get_max_batch_size()
        for lo in range(0, len(x), step):
            hi = min(len(x), lo + step)
            self.col.add(ids=[str(i) for i in range(lo, hi)], embeddings=x[lo:hi])

    def search(self, q: np.ndarray, k: int) -> list[int]:
        out = self.col.query(query_embeddings=[q], n_results=k, include=["distances"])
        return [int(i) for i in out["ids"][0]]


class LanceDB(System):
    key = "lancedb"

    def build(self, x: np.ndarray, tmp: Path) -> None:
        import lancedb
        import pyarrow as pa

        db = lancedb.connect(str(tmp / "lance"))
        vectors = pa.FixedSizeListArray.from_arrays(pa.array(x.reshape(-1)), DIM)
        self.tbl = db.create_table("v", data=pa.table({"id": np.arange(len(x)),
                                                       "vector": vectors}))

    def search(self, q: np.ndarray, k: int) -> list[int]:
        out = (self.tbl.search(q).distance_type("dot").limit(k)
               .select(["id", "_distance"]).to_arrow())
        return [int(i) for i in out.column("id").to_pylist()]


PEERS: dict[str, tuple[type[System], str]] = {  # key -> (class, the module it needs)
    "numpy": (Numpy, "numpy"),
    "faiss-flat": (FaissFlat, "faiss"),
    "hnswlib": (Hnswlib, "hnswlib"),
    "sqlite-vec": (SqliteVec, "sqlite_vec"),
    "chroma": (Chroma, "chromadb"),
    "lancedb": (LanceDB, "lancedb"),
}


def available(names: list[str]) -> tuple[list[str], dict[str, str]]:
    import importlib

    found, missing = [], {}
    for name in names:
        needs = [PEERS[name][1]] + (["pysqlite3"] if name == "sqlite-vec" else [])
        try:
            for module in needs:
                importlib.import_module(module)
        except ImportError as exc:
            missing[name] = f"{exc} (pip install deltamem[bench-peers])"
        else:
            found.append(name)
    return found, missing


def _sweep(big: np.ndarray) -> None:
    big += 1  # touch every byte: evicts the caches the systems warmed


def vector_run(args: argparse.Namespace, peers: list[str], tmp: Path,
               rng: np.random.Generator) -> dict[str, Any]:
    x, near = data(args.n, args.queries, args.centres, rng)
    ks = [int(k) for k in args.k.split(",")]
    shared: dict[str, Any] = {}
    systems: list[System] = [DeltamemScan(True, shared)]
    systems += [PEERS[name][0]() for name in peers]
    # The before/after pair sit apart in the rotation: a neighbour would run the same code just
    # before, warming what "cold" is meant to find cold.
    systems.insert(max(1, (len(systems) + 1) // 2), StateQueryScan(False, shared))
    build_s: dict[str, float] = {}
    for s in systems:
        t0 = time.perf_counter()
        s.build(x, tmp)
        build_s[s.key] = time.perf_counter() - t0
        gc.collect()
    x64 = x.astype(np.float64)
    truth = [np.argsort(-(x64 @ q.astype(np.float64)), kind="stable")[:max(ks)] for q in near]
    times: dict[str, dict[str, list[float]]] = {s.key: {} for s in systems}
    hits: dict[str, dict[int, float]] = {s.key: dict.fromkeys(ks, 0.0) for s in systems}
    big = np.zeros(SWEEP_BYTES // 8)
    for i, q in enumerate(near):
        if i % SWEEP_EVERY == 0:
            _sweep(big)
        order = systems[i % len(systems):] + systems[:i % len(systems)]
        for s in order:
            for pos, k in enumerate(ks if i % 2 == 0 else ks[::-1]):
                t0 = time.perf_counter()
                ids = s.search(q, k)
                dt = (time.perf_counter() - t0) * 1000
                times[s.key].setdefault(f"k{k}_{'warm' if pos else 'cold'}", []).append(dt)
                hits[s.key][k] += len(set(ids[:k]) & set(truth[i][:k].tolist())) / k
    base = {name: percentiles(v)[0] for name, v in times["deltamem"].items()}
    out: dict[str, Any] = {}
    for s in systems:
        row: dict[str, Any] = {"exact": s.exact, "build_s": round(build_s[s.key], 3),
                               "insert_rows_per_s": None if isinstance(s, StateQueryScan)
                               else round(args.n / build_s[s.key])}  # the second reuses the db
        for name, samples in sorted(times[s.key].items()):
            p50, p95 = percentiles(samples)
            row[f"{name}_p50_ms"], row[f"{name}_p95_ms"] = round(p50, 4), round(p95, 4)
            row[f"{name}_ratio"] = round(p50 / base[name], 2)
        for k in ks:
            row[f"recall@{k}"] = round(hits[s.key][k] / len(near), 4)
        out[s.key] = row
    return out


# -- learn throughput ----------------------------------------------------------------------------
# A learner of another checkout (--baseline-src: its src/), in its own process: it learns the
# episodes it is sent, one a line, and answers each with the milliseconds its learn took.
_WORKER = """
import json, sys, time
from deltamem.core.model import Episode, Step
from deltamem.embed import make_embedder
from deltamem.extract.trace import TraceExtractor
from deltamem.engine.memory import DeltaMem
from deltamem.store.sqlite import SQLiteStore
mem = DeltaMem(SQLiteStore(sys.argv[1]), make_embedder("static"), TraceExtractor())
for line in sys.stdin:
    d = json.loads(line)
    ep = Episode(task=d["task"], env=d["env"], success=d["success"],
                 steps=tuple(Step(action=a, observation=o) for a, o in d["steps"]))
    t0 = time.perf_counter()
    mem.learn(ep)
    print((time.perf_counter() - t0) * 1000, flush=True)
"""


class Baseline:
    """Learns in a subprocess running another checkout; ``learn`` returns its own ms."""

    def __init__(self, src: str, db: Path):
        import subprocess

        env = {**os.environ, "PYTHONPATH": src}
        self.proc = subprocess.Popen([sys.executable, "-c", _WORKER, str(db)], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def learn(self, ep: Any) -> float:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({
            "task": ep.task, "env": ep.env, "success": ep.success,
            "steps": [(s.action, s.observation) for s in ep.steps]}) + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        if not answer:
            raise SystemExit("the baseline learner stopped (see its error above)")
        return float(answer)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def _lance_adder(tmp: Path, embedder: Any, pre: list[Any]) -> Callable[[Any], None]:
    """LanceDB's per-episode add: one embed call, then a row into each of two tables."""
    import lancedb
    import pyarrow as pa

    db = lancedb.connect(str(tmp / "learn-lance"))

    def table(name: str, texts: list[str]) -> Any:
        vecs = embedder.embed(texts) if texts else np.zeros((0, embedder.dim), np.float32)
        return db.create_table(name, data=pa.table({
            "id": [f"{name}-{i}" for i in range(len(texts))], "text": texts,
            "vector": pa.FixedSizeListArray.from_arrays(
                pa.array(np.asarray(vecs, np.float32).reshape(-1)), embedder.dim)}))

    tasks = table("tasks", [e.task for e in pre] or ["start"])
    scenes = table("scenes", [e.env for e in pre] or ["start"])
    count = [0]

    def lance_add(ep: Any) -> None:
        vt, ve = embedder.embed([ep.task, ep.env])
        count[0] += 1
        tasks.add([{"id": f"t{count[0]}", "text": ep.task, "vector": vt.tolist()}])
        scenes.add([{"id": f"s{count[0]}", "text": ep.env, "vector": ve.tolist()}])

    return lance_add


def _interleave(units: dict[str, Callable[[Any], Any]], eps: list[Any]
                ) -> dict[str, list[float]]:
    """ms per call of each unit on each episode, in an order rotated per episode (the
    baseline's own time where it reports one)."""
    names = list(units)
    times: dict[str, list[float]] = {n: [] for n in names}
    for i, ep in enumerate(eps):
        for name in names[i % len(names):] + names[:i % len(names)]:
            t0 = time.perf_counter()
            reported = units[name](ep)
            elapsed = (time.perf_counter() - t0) * 1000
            times[name].append(reported if name == BASELINE else elapsed)
    return times


def learn_run(args: argparse.Namespace, lance: bool, tmp: Path) -> dict[str, Any]:
    embedder = make_embedder("static")
    pre = episodes(args.prefill, seed=1)
    new = episodes(args.learns, seed=2)
    mem = DeltaMem(SQLiteStore(tmp / "learn.db", snapshot_every=0), embedder, TraceExtractor())
    # The same learn with the store reading as it did before the node cache and the state
    # reuse: every node decoded on every read, a state query on every scan.
    old_store = SQLiteStore(tmp / "learn-old.db", snapshot_every=0)
    old_store._node_cache.size, old_store._reuse_state = 0, False
    old = DeltaMem(old_store, embedder, TraceExtractor())
    baseline = Baseline(args.baseline_src, tmp / "learn-base.db") if args.baseline_src else None
    for ep in pre:
        mem.learn(ep)
        old.learn(ep)
        if baseline is not None:
            baseline.learn(ep)
    units: dict[str, Callable[[Any], Any]] = {
        "deltamem learn (static)": mem.learn,
        "deltamem learn, no node cache": old.learn}
    if lance:
        units["lancedb add, task + scene"] = _lance_adder(tmp, embedder, pre)
    units["embedding alone (2 texts)"] = lambda ep: embedder.embed([ep.task, ep.env])
    if baseline is not None:
        units[BASELINE] = baseline.learn
    times = _interleave(units, new)
    # Recall of the learned tasks (their embeddings are cached by now: the store path decides),
    # with and without the node cache, interleaved.
    times.update(_interleave({
        "deltamem recall, repeated text": lambda ep: mem.recall(ep.task, ep.env),
        "deltamem recall, no node cache": lambda ep: old.recall(ep.task, ep.env)}, new))
    names = list(times)
    mem.close()
    old.close()
    if baseline is not None:
        baseline.close()
    out: dict[str, Any] = {}
    for name in names:
        p50, p95 = percentiles(times[name])
        out[name] = {"p50_ms": round(p50, 3), "p95_ms": round(p95, 3),
                     "episodes_per_s": round(1000 / float(np.mean(times[name])), 1)}
    out["recall: no node cache ÷ deltamem, p50"] = round(
        out["deltamem recall, no node cache"]["p50_ms"]
        / out["deltamem recall, repeated text"]["p50_ms"], 2)
    out["deltamem ÷ no node cache, episodes/s"] = round(
        out["deltamem learn (static)"]["episodes_per_s"]
        / out["deltamem learn, no node cache"]["episodes_per_s"], 2)
    if baseline is not None:
        out["deltamem ÷ baseline checkout, episodes/s"] = round(
            out["deltamem learn (static)"]["episodes_per_s"]
            / out[BASELINE]["episodes_per_s"], 2)
    if lance:
        out["lancedb ÷ deltamem, episodes/s"] = round(
            out["lancedb add, task + scene"]["episodes_per_s"]
            / out["deltamem learn (static)"]["episodes_per_s"], 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000, help="rows (one tree)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--centres", type=int, default=2000)
    parser.add_argument("--k", default="1,5")
    parser.add_argument("--learns", type=int, default=150, help="0: no learn comparison")
    parser.add_argument("--prefill", type=int, default=500)
    parser.add_argument("--peers", default=",".join(PEERS))
    parser.add_argument("--baseline-src", default=None,
                        help="another checkout's src/ (e.g. the previous release, from `git "
                        "worktree add`): its learn runs in the same rotation, in a subprocess")
    parser.add_argument("--smoke", action="store_true", help="seconds: 500 rows, 10 queries")
    parser.add_argument("--tmp", default=None)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    if args.smoke:
        args.n, args.queries, args.centres, args.learns, args.prefill = 500, 10, 20, 4, 10
    peers, missing = available([p for p in args.peers.split(",") if p])
    for name, why in missing.items():
        print(f"missing peer {name}: {why}; left out")
    rng = np.random.default_rng(0)
    tmp = Path(tempfile.mkdtemp(dir=args.tmp))
    try:
        result: dict[str, Any] = {
            "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cpus",
            "python": platform.python_version(), "n": args.n, "queries": args.queries,
            "missing_peers": missing, "versions": _versions(peers)}
        result["search"] = vector_run(args, peers, tmp, rng)
        if args.learns:
            result["learn"] = learn_run(args, "lancedb" in peers, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    _print(result, args)
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


def _versions(peers: list[str]) -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    dists = {"faiss-flat": "faiss-cpu", "hnswlib": "hnswlib", "sqlite-vec": "sqlite-vec",
             "chroma": "chromadb", "lancedb": "lancedb", "numpy": "numpy"}
    out = {}
    for p in peers:
        try:
            out[p] = version(dists[p])
        except PackageNotFoundError:
            out[p] = "?"
    return out


def _print(result: dict[str, Any], args: argparse.Namespace) -> None:
    ks = [int(k) for k in args.k.split(",")]
    print(f"\nvector search, {result['n']} rows x {DIM}-d, {result['queries']} near queries "
          "(ms; ratio = time / deltamem's, p50)")
    cols = [f"k{k}_{w}" for k in ks for w in ("warm", "cold")]
    print(f"{'system':22}" + "".join(f"{c + ' p50/p95':>22}{'ratio':>7}" for c in cols)
          + "".join(f"{'R@' + str(k):>7}" for k in ks) + f"{'insert/s':>12}")
    for key, row in result["search"].items():
        line = f"{key:22}"
        for c in cols:
            line += f"{row[c + '_p50_ms']:>12.3f} /{row[c + '_p95_ms']:>8.3f}{row[c + '_ratio']:>7}"
        line += "".join(f"{row[f'recall@{k}']:>7.3f}" for k in ks)
        print(line + f"{row['insert_rows_per_s'] or '-':>12}")
    print("\nlearn, one episode at a time (static embedder)")
    for name, row in result.get("learn", {}).items():
        if isinstance(row, dict):
            print(f"  {name:30} p50 {row['p50_ms']:8.3f} ms  p95 {row['p95_ms']:8.3f} ms  "
                  f"{row['episodes_per_s']:8.1f} episodes/s")
        else:
            print(f"  {name:30} {row}")
    if result["missing_peers"]:
        print("missing peers (left out):", ", ".join(result["missing_peers"]))
    print()


if __name__ == "__main__":
    main()
