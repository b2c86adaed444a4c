"""End to end with the real embedder: recall with and without the query embedding, learn, memory.

Builds a memory by learning ``--episodes`` generated episodes (trace extractor, MiniLM), pads it
with ``--pad`` random-vector nodes so the scan has real work, then times, per query, for both
trees (``DeltaMem.recall`` with distinct first-time texts unless said otherwise):

* ``today``      -- the previous release's read path: MiniLM in numpy, no embedding cache;
* ``first``      -- this release on first-time texts: MiniLM on ONNX Runtime (one batched call);
* ``repeat``     -- this release on texts it has seen (the embedding comes from the cache);
* ``no_embed``   -- the recall path with the query vectors given (scan + chain + render);
* ``scan``       -- the store's exact scan of both trees alone.

Every runtime must recall the same nodes (vectors agree to 1e-5); the benchmark stops if not.
It also reports learn throughput (episodes/s, both configurations, same episodes) and memory
per node (the index's arrays, and the process RSS growth when a fresh handle loads the index).
Prints a table and one JSON object.

    python benchmarks/e2e.py [--episodes 200] [--pad 100000] [--queries 100]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from deltamem.config import Settings
from deltamem.core.model import Episode, Step, Tree
from deltamem.embed.minilm import MiniLMEmbedder
from deltamem.engine.memory import DeltaMem
from deltamem.extract.trace import TraceExtractor
from deltamem.store.sqlite import SQLiteStore

sys.path.insert(0, str(Path(__file__).parent))
from recall import percentiles, populate  # noqa: E402

from embed import OBJECTS, PLACES, VERBS  # noqa: E402


def episodes(n: int, seed: int) -> list[Episode]:
    """Generated ALFWorld-like episodes: a goal, a scene, a few actions, success or failure."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        verb, obj, place = rng.choice(VERBS), rng.choice(OBJECTS), rng.choice(PLACES)
        things = ", ".join(f"a {rng.choice(OBJECTS)}" for _ in range(rng.randint(2, 5)))
        steps = tuple(Step(action=f"{a} {obj}", observation=f"You {a} the {obj}.")
                      for a in ("go to", "take", verb, "put"))
        out.append(Episode(task=f"{verb} the {obj} and put it in the {place}",
                           env=f"You are in the {place}. You see {things}.",
                           steps=steps, success=rng.random() < 0.7))
    return out


def timed(samples: list[float], fn: Any, *args: Any) -> Any:
    t0 = time.perf_counter()
    out = fn(*args)
    samples.append((time.perf_counter() - t0) * 1000)
    return out


def recall_given(mem: DeltaMem, pairs: Any) -> None:
    """The read path with the query vectors given: scan, chain, render (no embedding)."""
    mem.reader.tree(pairs[0][0], pairs[0][1], pairs[0][2], 1)
    mem.reader.tree(pairs[1][0], pairs[1][1], pairs[1][2], 1)


def scan_given(mem: DeltaMem, pairs: Any) -> None:
    for tree, _, query in pairs:
        mem.store.scan(mem.space, tree, query, penalty=mem.settings.penalty)


def learn_rate(mem: DeltaMem, eps: list[Episode]) -> float:
    started = time.perf_counter()
    for episode in eps:
        mem.learn(episode)
    return len(eps) / (time.perf_counter() - started)


def rss() -> int:
    """This process's resident set size in bytes (Linux /proc)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def memory_per_node(db: Path, space: str) -> dict[str, Any]:
    """Index bytes per node, and RSS growth of a fresh handle loading the index."""
    before = rss()
    store = SQLiteStore(db)
    started = time.perf_counter()
    for tree in Tree:
        store.scan(space, tree, np.ones(384, np.float32) / np.sqrt(384), penalty=0.05)
    load_s = time.perf_counter() - started
    grown = rss() - before
    indexes = list(store._indexes.values())
    nodes = sum(i.size for i in indexes)
    arrays = sum(i.size * (i.dim * 4 + i.dim + 4 + 1 + 4) for i in indexes)
    ids = sum(sys.getsizeof(x) + 8 for i in indexes for x in i.ids)
    store.close()
    return {"nodes": nodes, "index_load_s": round(load_s, 2),
            "index_bytes_per_node": round((arrays + ids) / nodes),
            "rss_growth_per_node": round(grown / nodes)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--pad", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args()
    settings = Settings()
    today_emb, new_emb = MiniLMEmbedder(runtime="numpy"), MiniLMEmbedder(runtime="onnx")
    today_emb.embed(["warm up"]), new_emb.embed(["warm up"])
    result: dict[str, Any] = {"episodes": args.episodes, "pad_nodes": args.pad}
    with tempfile.TemporaryDirectory() as tmp:
        learned = episodes(args.episodes, seed=1)
        # Learn throughput: the same episodes into two fresh memories, one per configuration.
        for name, emb, cache in (("today", today_emb, 0), ("new", new_emb, settings.embed_cache)):
            mem = DeltaMem(SQLiteStore(Path(tmp) / f"learn-{name}.db"), emb, TraceExtractor(),
                           settings=settings.with_(embed_cache=cache))
            result[f"learn_eps_per_s_{name}"] = round(learn_rate(mem, learned), 1)
            mem.close()
        db = Path(tmp) / "learn-new.db"
        store = SQLiteStore(db)
        today = DeltaMem(store, today_emb, TraceExtractor(),
                         settings=settings.with_(embed_cache=0))
        new = DeltaMem(store, new_emb, TraceExtractor(), settings=settings)
        if args.pad:
            populate(store, new.space, args.pad // 2, np.random.default_rng(0))
        result["memory"] = memory_per_node(db, new.space)
        queries = [(e.task, e.env) for e in episodes(args.queries, seed=2)]
        new.recall(*queries[0])  # loads the index
        times: dict[str, list[float]] = {k: [] for k in ("today", "first", "repeat", "no_embed",
                                                         "scan")}
        mismatches = 0
        for task, env in queries:  # interleaved, so load on the machine hits both alike
            a = timed(times["today"], today.recall, task, env)
            b = timed(times["first"], new.recall, task, env)
            if [(r.best.id if r.best else None) for r in (a.task, a.env)] != [
                    (r.best.id if r.best else None) for r in (b.task, b.env)]:
                mismatches += 1
            timed(times["repeat"], new.recall, task, env)
            qt, qe = b.task.query, b.env.query
            assert qt is not None and qe is not None
            pairs = ((Tree.TASK, task, qt), (Tree.ENV, env, qe))
            timed(times["no_embed"], recall_given, new, pairs)
            timed(times["scan"], scan_given, new, pairs)
        # ONNX and numpy vectors differ by <1e-5, so a flip needs a near-exact tie; none expected.
        assert mismatches == 0, f"{mismatches} queries recalled other nodes across runtimes"
        store.close()
    for name, samples in times.items():
        p50, p95 = percentiles(samples)
        result[f"{name}_p50_ms"], result[f"{name}_p95_ms"] = round(p50, 3), round(p95, 3)
    result["first_vs_today_x"] = round(result["today_p50_ms"] / result["first_p50_ms"], 2)
    result["repeat_vs_scan_x"] = round(result["repeat_p50_ms"] / result["scan_p50_ms"], 2)
    result["env"] = {"python": platform.python_version(), "numpy": np.__version__,
                     "cpus": os.cpu_count(), "load_avg": os.getloadavg()}
    nodes = result["memory"]["nodes"]
    print(f"{nodes} nodes ({args.episodes} learned episodes + {args.pad} padding), "
          f"{args.queries} queries, both trees; load average {result['env']['load_avg'][0]:.1f}")
    print(f"{'path':>10} {'p50 ms':>9} {'p95 ms':>9}")
    for name in times:
        print(f"{name:>10} {result[f'{name}_p50_ms']:>9} {result[f'{name}_p95_ms']:>9}")
    print(f"first-time recall {result['first_vs_today_x']}x faster than today; repeated recall "
          f"{result['repeat_vs_scan_x']}x the scan alone")
    print(f"learn: {result['learn_eps_per_s_new']} episodes/s (today "
          f"{result['learn_eps_per_s_today']}); memory: {result['memory']}")
    print(json.dumps({"benchmark": "e2e", **result}))


if __name__ == "__main__":
    main()
