"""Recall latency of the exact numpy index vs a naive per-query scan, at 1k/10k/100k nodes.

What is timed, per query, for both trees (query embedding excluded):

* ``recall``  -- the real read path (``DeltaMem._recall_tree``): scan, chain fetch, composition,
  per-link similarities;
* ``scan``    -- the store's exact scan alone (numpy index kept in step with SQLite);
* ``naive``   -- the reference code's strategy, measured in the same run on the same data: keep
  node objects in memory and rebuild the similarity matrix from them at every query.

``speedup`` is naive / scan: the same work (a penalised top-1 over every node), two strategies.

Nodes are split evenly between the two trees ("100k nodes" = 50k per tree), with random unit
vectors (384-d, the default embedder's width) and a realistic forest shape (roots with delta
chains). Prints a table and one JSON object.

    python benchmarks/recall.py [--sizes 1000,10000,100000] [--queries 200]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from deltamem.config import Settings
from deltamem.core.delta import diff
from deltamem.core.model import Knowledge, Node, NodeKind, Outcome, Skill, Tree
from deltamem.embed.hashing import HashingEmbedder
from deltamem.extract.trace import TraceExtractor
from deltamem.memory import DeltaMem
from deltamem.store.sqlite import SQLiteStore

DIM = 384


class _FixedDim(HashingEmbedder):
    """Only its name and width matter here: the benchmark passes vectors in directly."""

    def __init__(self) -> None:
        super().__init__(DIM)


def populate(store: SQLiteStore, space: str, per_tree: int, rng: np.random.Generator) -> dict[
        Tree, list[tuple[str, np.ndarray, bool]]]:
    naive: dict[Tree, list[tuple[str, np.ndarray, bool]]] = {Tree.TASK: [], Tree.ENV: []}
    with store.write(space):
        for tree in Tree:
            parents: list[Node] = []
            for i in range(per_tree):
                vector = rng.normal(size=DIM).astype(np.float32)
                vector /= np.linalg.norm(vector)
                failure = tree is Tree.TASK and i % 5 == 4
                node = _node(tree, i, parents, failure)
                store.add_node(space, node, vector)
                naive[tree].append((node.id, vector, failure))
                parents = [node] if node.is_root else parents + [node]
                if len(parents) >= 5:
                    parents = []
    return naive


def _node(tree: Tree, i: int, chain: list[Node], failure: bool) -> Node:
    nid = f"{tree.value[0]}-{i}"
    outcome = Outcome.FAILURE if failure else Outcome.SUCCESS
    base: Any = (Skill(f"task {i}", tuple(f"step {j}" for j in range(6)), "done")
                 if tree is Tree.TASK else Knowledge(f"scene {i}", ("fact a", "fact b")))
    if not chain or i % 4 == 0:
        return Node(nid, tree, NodeKind.ROOT, outcome, f"key {i}", content=base)
    parent = chain[-1]
    changed = (Skill(base.activation, (*base.steps, "extra"), "done") if tree is Tree.TASK
               else Knowledge(base.trigger, ("fact a", "fact c")))
    return Node(nid, tree, NodeKind.DELTA, outcome, f"key {i}", parent_id=parent.id,
                depth=parent.depth + 1, patch=diff(base, changed) if parent.is_root else ())


def naive_scan(nodes: list[tuple[str, np.ndarray, bool]], q: np.ndarray, penalty: float) -> str:
    matrix = np.stack([v for _, v, _ in nodes])  # rebuilt per query, as the reference code does
    scores = matrix @ q - penalty * np.array([f for _, _, f in nodes], dtype=np.float32)
    return nodes[int(np.argmax(scores))][0]


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[int(0.95 * (len(ordered) - 1))]


def bench(total: int, queries: int, rng: np.random.Generator) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "bench.db")
        # Thresholds of -1 accept every best match, so each recall also fetches and composes.
        mem = DeltaMem(store, _FixedDim(), TraceExtractor(),
                       settings=Settings(tau_task=-1.0, tau_env=-1.0))
        started = time.perf_counter()
        naive = populate(store, mem.space, total // 2, rng)
        insert_s = time.perf_counter() - started
        qs = rng.normal(size=(queries, DIM)).astype(np.float32)
        qs /= np.linalg.norm(qs, axis=1, keepdims=True)
        mem._recall_tree(Tree.TASK, "warm", qs[0], 1)  # first scan loads the index
        mem._recall_tree(Tree.ENV, "warm", qs[0], 1)
        # Each strategy runs its own loop over the same queries (steady state for each), then
        # the answers are compared query by query.
        exact, scans, slow = [], [], []
        found: list[tuple[str, str]] = []
        for q in qs:
            t0 = time.perf_counter()
            a = mem._recall_tree(Tree.TASK, "q", q, 1)
            b = mem._recall_tree(Tree.ENV, "q", q, 1)
            exact.append((time.perf_counter() - t0) * 1000)
            assert a.node is not None and b.node is not None
            found.append((a.node.id, b.node.id))
        for q in qs:
            t0 = time.perf_counter()
            store.scan(mem.space, Tree.TASK, q, penalty=0.05)
            store.scan(mem.space, Tree.ENV, q, penalty=0.05)
            scans.append((time.perf_counter() - t0) * 1000)
        for q, ids in zip(qs, found, strict=True):
            t0 = time.perf_counter()
            na = naive_scan(naive[Tree.TASK], q, 0.05)
            nb = naive_scan(naive[Tree.ENV], q, 0.05)
            slow.append((time.perf_counter() - t0) * 1000)
            assert ids == (na, nb), "exact index disagrees with naive scan"
        mem.close()
    e50, e95 = percentiles(exact)
    s50, s95 = percentiles(scans)
    n50, n95 = percentiles(slow)
    return {"nodes": total, "insert_s": round(insert_s, 2), "recall_p50_ms": round(e50, 3),
            "recall_p95_ms": round(e95, 3), "scan_p50_ms": round(s50, 3),
            "scan_p95_ms": round(s95, 3), "naive_p50_ms": round(n50, 3),
            "naive_p95_ms": round(n95, 3), "speedup_p50": round(n50 / s50, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    rows = [bench(int(n), args.queries, rng) for n in args.sizes.split(",")]
    cols = ("recall_p50_ms", "recall_p95_ms", "scan_p50_ms", "scan_p95_ms", "naive_p50_ms",
            "naive_p95_ms")
    print(f"{'nodes':>8} " + " ".join(f"{c.removesuffix('_ms'):>11}" for c in cols)
          + f" {'speedup':>8}   (ms; both trees; query embedding excluded)")
    for r in rows:
        print(f"{r['nodes']:>8} " + " ".join(f"{r[c]:>11}" for c in cols)
              + f" {r['speedup_p50']:>7}x")
    info: dict[str, Any] = {"machine": platform.processor() or platform.machine(),
                            "python": platform.python_version(), "numpy": np.__version__}
    try:
        from threadpoolctl import threadpool_info

        info["blas"] = [(i.get("internal_api"), i.get("architecture"), i.get("num_threads"))
                        for i in threadpool_info()]
    except ImportError:
        pass
    print(json.dumps({"benchmark": "recall", "rows": rows, "env": info}))


if __name__ == "__main__":
    main()
