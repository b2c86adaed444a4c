"""Scale curve, 1k -> 1M nodes: exact scan vs the approximate index, load time, memory per node.

Per size (nodes split evenly between the two trees, 384-d), in one process:

* the nodes are inserted through the real SQLite store (one write block, ``add_node`` per node,
  roots with delta chains as in ``recall.py``);
* a **fresh store handle** then loads each tree's index on its first scan: ``load_s`` (read every
  row from SQLite, build the float32 and int8 copies), RSS growth per node, index bytes per node;
* ``exact``: the store's exact scan (int8 pass + exact float32 re-scoring), both trees;
  ``rescored``: how many rows per tree the int8 error bound left to re-score;
* ``ann``: the same scan through the faiss IVF index (``store/ann.py``; only from
  ``--ann-min`` nodes), whose candidates are re-scored exactly; ``ann_build_s`` is the time the
  first such scan takes to train and fill it (the index is rebuilt on open, not persisted);
  ``recall@1`` is how often its best node is the exact scan's best node (same run, same queries);
  ``agree`` how often recall decides the same (accept the same node, or reject both) under the
  default thresholds;
* ``recall``: the memory's read path (``Reader.tree``: scan, chain fetch, composition)
  with the default ``Settings.ann_from``, i.e. what a user gets at that size.

Vectors: ``--centres`` cluster centres per tree, every node a noisy copy of one (cosine ~0.8 to
its centre, ~0.64 between nodes of one cluster), like many memories of a few thousand kinds of
task. Two query sets: ``near`` -- perturbed copies of stored nodes (cosine ~0.9 to the stored
one: a task seen before, reworded), the realistic case; ``uniform`` -- random unit vectors, the
worst case for an IVF index (their best match is noise-level, far below the thresholds). Prints a
table and one JSON object.

    python benchmarks/scale.py [--sizes 1000,10000,100000,1000000] [--queries 200]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from deltamem.config import Settings
from deltamem.core.model import Node, Tree
from deltamem.engine.memory import DeltaMem
from deltamem.extract.trace import TraceExtractor
from deltamem.store.sqlite import SQLiteStore

sys.path.insert(0, str(Path(__file__).parent))
from recall import DIM, PENALTY, _FixedDim, _node, percentiles  # noqa: E402

CHUNK = 16384
SPREAD = 0.75  # noise norm relative to the (unit) centre
QUERY_NOISE = 0.5  # noise norm relative to the stored node a "near" query copies


def _unit(x: np.ndarray) -> np.ndarray:
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


def _rss() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def populate(store: SQLiteStore, space: str, per_tree: int, centres: int, queries: int,
             rng: np.random.Generator) -> dict[Tree, np.ndarray]:
    """Insert ``per_tree`` clustered nodes per tree; return ``near`` queries for each tree."""
    near: dict[Tree, np.ndarray] = {}
    with store.write(space):
        for tree in Tree:
            centre = _unit(rng.standard_normal((centres, DIM), dtype=np.float32))
            picked = np.sort(rng.choice(per_tree, size=queries, replace=per_tree < queries))
            copies = []
            parents: list[Node] = []
            for lo in range(0, per_tree, CHUNK):
                hi = min(per_tree, lo + CHUNK)
                noise = _unit(rng.standard_normal((hi - lo, DIM), dtype=np.float32))
                block = _unit(centre[rng.integers(0, centres, size=hi - lo)] + SPREAD * noise)
                inside = picked[(picked >= lo) & (picked < hi)]
                copies.append(block[inside - lo].copy())
                for i in range(lo, hi):
                    failure = tree is Tree.TASK and i % 5 == 4
                    node = _node(tree, i, parents, failure)
                    store.add_node(space, node, block[i - lo])
                    parents = [node] if node.is_root else parents + [node]
                    if len(parents) >= 5:
                        parents = []
            stored = np.concatenate(copies)
            noise = _unit(rng.standard_normal(stored.shape, dtype=np.float32))
            near[tree] = _unit(stored + QUERY_NOISE * noise)
    return near


def _timed(fn: Any, qs: dict[Tree, np.ndarray]) -> tuple[list[float], list[list[Any]]]:
    """Per query: ms for both trees together, and each tree's answer."""
    times, answers = [], []
    for i in range(len(qs[Tree.TASK])):
        t0 = time.perf_counter()
        out = [fn(tree, qs[tree][i]) for tree in Tree]
        times.append((time.perf_counter() - t0) * 1000)
        answers.append(out)
    return times, answers


def bench(total: int, args: argparse.Namespace, rng: np.random.Generator) -> dict[str, Any]:
    per_tree = total // 2
    row: dict[str, Any] = {"nodes": total}
    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
        path = Path(tmp) / "scale.db"
        writer = SQLiteStore(path)
        mem = DeltaMem(writer, _FixedDim(), TraceExtractor())
        writer.ensure_space(mem.space, mem.embedder.name, DIM)
        started = time.perf_counter()
        near = populate(writer, mem.space, per_tree, args.centres, args.queries, rng)
        row["insert_s"] = round(time.perf_counter() - started, 1)
        row["insert_nodes_per_s"] = round(total / row["insert_s"])
        space = mem.space
        mem.close()
        row["db_bytes_per_node"] = round(path.stat().st_size / total)
        uniform = {tree: _unit(rng.standard_normal((args.queries, DIM), dtype=np.float32))
                   for tree in Tree}

        store = SQLiteStore(path)  # a fresh handle: nothing loaded yet
        before = _rss()
        started = time.perf_counter()
        for tree in Tree:
            store.scan(space, tree, near[tree][0], penalty=PENALTY)
        row["load_s"] = round(time.perf_counter() - started, 2)
        row["rss_bytes_per_node"] = round((_rss() - before) / total)
        indexes = [store._indexes.get((space, tree.value)) for tree in Tree]
        row["index_bytes_per_node"] = round(sum(
            sum(a.nbytes for a in (ix._matrix, ix._codes, ix._scales, ix._failures, ix._depths))
            for ix in indexes if ix is not None) / total)

        def exact(tree: Tree, q: np.ndarray) -> Any:
            return store.scan(space, tree, q, penalty=PENALTY)[0]

        def approximate(tree: Tree, q: np.ndarray) -> Any:
            return store.scan(space, tree, q, penalty=PENALTY, approximate_from=1)[0]

        results: dict[str, Any] = {}
        for name, qs in (("near", near), ("uniform", uniform)):
            results[f"exact_{name}"] = _timed(exact, qs)
            row[f"exact_{name}_rescored"] = _rescored(indexes, qs)
        if total >= args.ann_min:
            started = time.perf_counter()
            for tree in Tree:
                approximate(tree, near[tree][0])
            row["ann_build_s"] = round(time.perf_counter() - started, 2)
            ann = [ix.approximate for ix in indexes if ix is not None]
            row["ann_lists"], row["ann_probes"] = ann[0].lists, ann[0].probes
            row["rss_bytes_per_node_with_ann"] = round((_rss() - before) / total)
            for name, qs in (("near", near), ("uniform", uniform)):
                results[f"ann_{name}"] = _timed(approximate, qs)
                row[f"ann_{name}_recall1"], row[f"ann_{name}_agree"] = _agreement(
                    results[f"exact_{name}"][1], results[f"ann_{name}"][1])
        recaller = DeltaMem(store, _FixedDim(), TraceExtractor(),
                            settings=Settings(tau_task=-1.0, tau_env=-1.0, penalty=PENALTY))
        results["recall_near"] = _timed(
            lambda tree, q: recaller.reader.tree(tree, "q", q, 1).recall.best, near)
        row["recall_path"] = "ann" if per_tree > Settings().ann_from else "exact"
        recaller.close()
    for name, (samples, _) in results.items():
        p50, p95 = percentiles(samples)
        row[f"{name}_p50_ms"], row[f"{name}_p95_ms"] = round(p50, 3), round(p95, 3)
    return row


def _rescored(indexes: list[Any], qs: dict[Tree, np.ndarray]) -> float | None:
    """Mean rows per tree the int8 pass left to re-score exactly (first 20 queries; None: the
    index scans float32 directly at this size; -1 counts a fallback to the full scan)."""
    counts = []
    for ix, tree in zip(indexes, Tree, strict=True):
        if ix is None or ix.size < ix.quantize_from:
            return None
        for q in qs[tree][:20]:
            rows = ix._candidates(q, PENALTY, 1)
            counts.append(ix.size if rows is None else len(rows))
    return round(float(np.mean(counts)), 1)


def _agreement(exact: list[list[Any]], approx: list[list[Any]]) -> tuple[float, float]:
    """recall@1 (same best node) and decision agreement under the default thresholds."""
    settings = Settings()
    same = agree = count = 0
    for e_pair, a_pair in zip(exact, approx, strict=True):
        for tree, e, a in zip(Tree, e_pair, a_pair, strict=True):
            tau = settings.threshold(tree)
            count += 1
            same += e.id == a.id
            assert a.score <= e.score, "the approximate scan beat the exact scan"
            e_ok, a_ok = e.score >= tau, a.score >= tau
            agree += (e_ok == a_ok) and (not e_ok or e.id == a.id)
    return round(same / count, 4), round(agree / count, 4)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000,1000000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--centres", type=int, default=2000, help="cluster centres per tree")
    parser.add_argument("--ann-min", type=int, default=100_000,
                        help="smallest size (nodes) at which the approximate index is measured")
    parser.add_argument("--tmp", default=None, help="directory for the database files")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    load = os.getloadavg()
    rows = []
    for n in args.sizes.split(","):
        rows.append(bench(int(n), args, rng))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    cols = ["exact_near", "exact_uniform", "ann_near", "ann_uniform", "recall_near"]
    print(f"{'nodes':>8} {'load s':>7} {'B/node':>7} " + " ".join(f"{c:>15}" for c in cols)
          + f" {'ann build s':>11} {'r@1 near':>8} {'r@1 unif':>8} {'agree unif':>10}"
          + "   (p50/p95 ms, both trees)")
    for r in rows:
        cells = [f"{r[c + '_p50_ms']}/{r[c + '_p95_ms']}" if c + "_p50_ms" in r else "-"
                 for c in cols]
        print(f"{r['nodes']:>8} {r['load_s']:>7} {r['rss_bytes_per_node']:>7} "
              + " ".join(f"{c:>15}" for c in cells)
              + f" {r.get('ann_build_s', '-'):>11} {r.get('ann_near_recall1', '-'):>8}"
              + f" {r.get('ann_uniform_recall1', '-'):>8} {r.get('ann_uniform_agree', '-'):>10}")
    info: dict[str, Any] = {"machine": platform.processor() or platform.machine(),
                            "python": platform.python_version(), "numpy": np.__version__,
                            "cpus": os.cpu_count(), "load_before": [round(x, 2) for x in load],
                            "load_after": [round(x, 2) for x in os.getloadavg()]}
    print(json.dumps({"benchmark": "scale", "rows": rows, "env": info}))


if __name__ == "__main__":
    main()
