"""Recall latency of the quantized exact index vs float32 scans and a naive rebuild, 1k-100k nodes.

What is timed, per query, for both trees (query embedding excluded):

* ``recall``  -- the real read path (``Reader.tree``): scan, chain fetch, composition,
  per-link similarities;
* ``scan``    -- the store's exact scan alone (int8 index + exact float32 re-scoring, kept in step
  with SQLite);
* ``f32``     -- the plain float32 reference scan (``core.scoring.top_k``) over a prebuilt matrix;
* ``blas``    -- the previous release's scan: a BLAS matrix-vector product over a prebuilt matrix,
  then argmax (its tie-breaking is not exact, so its answers are compared by score);
* ``naive``   -- the reference code's strategy, measured in the same run on the same data: keep
  node objects in memory and rebuild the similarity matrix from them at every query.

``speedup`` is naive / scan: the same work (a penalised top-1 over every node), two strategies;
``x f32`` and ``x blas`` are f32 / scan and blas / scan. ``scan``, ``f32`` and ``naive`` must
return identical nodes, similarities and scores; the benchmark stops if they do not.

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
from deltamem.core.scoring import Scored, top_k
from deltamem.embed.hashing import HashingEmbedder
from deltamem.engine.memory import DeltaMem
from deltamem.extract.trace import TraceExtractor
from deltamem.store.sqlite import SQLiteStore

DIM = 384
PENALTY = 0.05


class _FixedDim(HashingEmbedder):
    """Only its name and width matter here: the benchmark passes vectors in directly."""

    def __init__(self) -> None:
        super().__init__(DIM)


def populate(store: SQLiteStore, space: str, per_tree: int, rng: np.random.Generator) -> dict[
        Tree, list[tuple[str, np.ndarray, bool, int]]]:
    naive: dict[Tree, list[tuple[str, np.ndarray, bool, int]]] = {Tree.TASK: [], Tree.ENV: []}
    with store.write(space):
        for tree in Tree:
            parents: list[Node] = []
            for i in range(per_tree):
                vector = rng.normal(size=DIM).astype(np.float32)
                vector /= np.linalg.norm(vector)
                failure = tree is Tree.TASK and i % 5 == 4
                node = _node(tree, i, parents, failure)
                store.add_node(space, node, vector)
                naive[tree].append((node.id, vector, failure, node.depth))
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


def naive_scan(nodes: list[tuple[str, np.ndarray, bool, int]], q: np.ndarray,
               penalty: float) -> Scored:
    matrix = np.stack([n[1] for n in nodes])  # rebuilt per query, as the reference code does
    failures = np.array([n[2] for n in nodes])
    depths = np.array([n[3] for n in nodes], dtype=np.int32)
    return top_k(matrix, failures, depths, q, penalty=penalty)[0]


def blas_scan(matrix: np.ndarray, penalties: np.ndarray, q: np.ndarray) -> tuple[int, float]:
    scores = matrix @ q - penalties
    best = int(np.argmax(scores))
    return best, float(scores[best])


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[int(0.95 * (len(ordered) - 1))]


def bench(total: int, queries: int, rng: np.random.Generator) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "bench.db")
        # Thresholds of -1 accept every best match, so each recall also fetches and composes.
        mem = DeltaMem(store, _FixedDim(), TraceExtractor(),
                       settings=Settings(tau_task=-1.0, tau_env=-1.0, penalty=PENALTY))
        # Why: the facade creates its space on the first learn; this fills the store directly.
        store.ensure_space(mem.space, mem.embedder.name, mem.embedder.dim)
        started = time.perf_counter()
        naive = populate(store, mem.space, total // 2, rng)
        insert_s = time.perf_counter() - started
        qs = rng.normal(size=(queries, DIM)).astype(np.float32)
        qs /= np.linalg.norm(qs, axis=1, keepdims=True)
        mem.reader.tree(Tree.TASK, "warm", qs[0], 1)  # first scan loads the index
        mem.reader.tree(Tree.ENV, "warm", qs[0], 1)
        prebuilt = {tree: (np.stack([n[1] for n in naive[tree]]),
                           np.array([n[2] for n in naive[tree]]),
                           np.array([n[3] for n in naive[tree]], dtype=np.int32)) for tree in Tree}
        blas_pen = {tree: np.float32(PENALTY) * f.astype(np.float32)
                    for tree, (_, f, _) in prebuilt.items()}
        # Each strategy runs its own loop over the same queries (steady state for each), then
        # the answers are compared query by query.
        times: dict[str, list[float]] = {"recall": [], "scan": [], "f32": [], "blas": [],
                                         "naive": []}
        answers: dict[str, list[Any]] = {name: [] for name in times}

        def timed(name: str, fn: Any) -> None:
            for q in qs:
                t0 = time.perf_counter()
                out = [fn(tree, q) for tree in Tree]
                times[name].append((time.perf_counter() - t0) * 1000)
                answers[name].append(out)

        timed("recall", lambda tree, q: mem.reader.tree(tree, "q", q, 1).recall.best)
        timed("scan", lambda tree, q: store.scan(mem.space, tree, q, penalty=PENALTY)[0])
        timed("f32", lambda tree, q: top_k(*prebuilt[tree], q, penalty=PENALTY)[0])
        timed("blas", lambda tree, q: blas_scan(prebuilt[tree][0], blas_pen[tree], q))
        timed("naive", lambda tree, q: naive_scan(naive[tree], q, PENALTY))
        blas_rounding_ties = check_answers(answers, naive)
        mem.close()
    row: dict[str, Any] = {"nodes": total, "insert_s": round(insert_s, 2)}
    for name, samples in times.items():
        p50, p95 = percentiles(samples)
        row[f"{name}_p50_ms"], row[f"{name}_p95_ms"] = round(p50, 3), round(p95, 3)
    row["speedup_p50"] = round(row["naive_p50_ms"] / row["scan_p50_ms"], 1)
    row["x_f32"] = round(row["f32_p50_ms"] / row["scan_p50_ms"], 1)
    row["x_blas"] = round(row["blas_p50_ms"] / row["scan_p50_ms"], 1)
    row["blas_rounding_ties"] = blas_rounding_ties
    return row


def check_answers(answers: dict[str, list[Any]],
                  naive: dict[Tree, list[tuple[str, np.ndarray, bool, int]]]) -> int:
    """Stop unless every exact strategy returned the same nodes, similarities and scores.

    Returns how often the BLAS baseline picked another node at a score within float32 rounding
    of the exact best (its sums differ from the reference's in the last bits).
    """
    blas_ties = 0
    for i, scans in enumerate(answers["scan"]):
        for t, tree in enumerate(Tree):
            got = scans[t]
            ids = {naive[tree][answers[name][i][t].position][0] for name in ("f32", "naive")}
            recalled = answers["recall"][i][t]
            assert ids == {got.id} and recalled is not None and recalled.id == got.id, (
                f"exact strategies disagree at query {i}, tree {tree.value}")
            for name in ("f32", "naive"):
                exact = answers[name][i][t]
                assert (exact.similarity, exact.score) == (got.similarity, got.score)
            position, score = answers["blas"][i][t]
            if naive[tree][position][0] != got.id:
                assert abs(score - got.score) < 1e-5, "BLAS baseline found another best node"
                blas_ties += 1
    return blas_ties


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    rows = [bench(int(n), args.queries, rng) for n in args.sizes.split(",")]
    cols = [f"{name}_{p}_ms" for name in ("recall", "scan", "f32", "blas", "naive")
            for p in ("p50", "p95")]
    print(f"{'nodes':>8} " + " ".join(f"{c.removesuffix('_ms'):>11}" for c in cols)
          + f" {'speedup':>8} {'x f32':>6} {'x blas':>6}   (ms; both trees; no query embedding)")
    for r in rows:
        print(f"{r['nodes']:>8} " + " ".join(f"{r[c]:>11}" for c in cols)
              + f" {r['speedup_p50']:>7}x {r['x_f32']:>5}x {r['x_blas']:>5}x")
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
