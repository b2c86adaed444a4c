"""The cost of a metadata filter on recall: filtered recalls of growing rarity against the
unfiltered recall of the same memory, measured in the same run.

A memory of ``--nodes`` task-tree roots whose episode meta names one of seven users, plus a
``rare`` user on one node in a hundred. A filtered recall is exact: its scan widens ×4 past
non-matching candidates (reading only their stored meta, ``Store.metas``) until it holds enough
matching ones or the tree is exhausted, so a rare filter costs up to a scan of the whole tree.
Prints a table and one JSON object.

    python benchmarks/filtered_recall.py [--nodes 5000] [--queries 20] [--db PATH_OR_URL]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from deltamem.config import Settings
from deltamem.core.model import Skill, Tree
from deltamem.embed.hashing import HashingEmbedder
from deltamem.engine.memory import DeltaMem
from deltamem.extract.trace import TraceExtractor
from deltamem.store import open_store

WORDS = ("heat", "cool", "apple", "milk", "kitchen", "fridge", "bread", "slice", "wash", "plate",
         "open", "drawer", "find", "knife", "put", "table", "lamp", "desk", "book", "pen")
CASES: tuple[tuple[str, dict[str, Any] | None], ...] = (
    ("unfiltered (baseline)", None),
    ("user=u3 (1 in 7)", {"user": "u3"}),
    ("user=rare (1 in 100)", {"user": "rare"}),
    ("user=nobody (none)", {"user": "nobody"}),
)


def build(db: str, nodes: int) -> DeltaMem:
    rng = random.Random(1)
    mem = DeltaMem(open_store(db), HashingEmbedder(), TraceExtractor(), space="bench",
                   settings=Settings(tau_task=0.6, tau_env=0.6, embedder="hashing",
                                     embed_cache=0))
    roots = []
    for i in range(nodes):
        key = " ".join(rng.sample(WORDS, 4))
        user = "rare" if i % 100 == 0 else f"u{i % 7}"
        roots.append((Tree.TASK, key, Skill(key, (f"step {i}",)),
                      {"episode_meta": {"user": user}}))
    mem.add_roots(roots)
    return mem


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--db", default="")
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="deltamem-filters-")
    db = args.db or str(Path(folder) / "bench.db")
    mem = build(db, args.nodes)
    rng = random.Random(2)
    queries = [" ".join(rng.sample(WORDS, 3)) for _ in range(args.queries)]
    rows = []
    for label, filters in CASES:
        mem.recall(queries[0], top_k=5, filters=filters)  # warm the index
        times = []
        for query in queries:
            started = time.perf_counter()
            mem.recall(query, top_k=5, filters=filters)
            times.append((time.perf_counter() - started) * 1000)
        rows.append({"case": label, "filters": filters, "median_ms": statistics.median(times),
                     "max_ms": max(times)})
    mem.close()
    base = rows[0]["median_ms"]
    print(f"{'case':24s} {'median ms':>10s} {'max ms':>8s} {'x baseline':>10s}")
    for row in rows:
        row["x_baseline"] = row["median_ms"] / base if base else None
        print(f"{row['case']:24s} {row['median_ms']:10.2f} {row['max_ms']:8.2f} "
              f"{row['x_baseline']:10.1f}")
    print(json.dumps({"benchmark": "filtered_recall", "nodes": args.nodes,
                      "queries": args.queries, "store": db.split(":")[0] if ":" in db
                      else "sqlite", "rows": rows}))


if __name__ == "__main__":
    main()
