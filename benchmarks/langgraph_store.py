"""Listing a LangGraph namespace of DeltaMemStore (``search(ns)`` without a query), at growing
sizes, against the listing it replaced, measured in one run.

The store holds N episodes put under N keys (plus one re-put and one deletion, so "latest per
key" and tombstones are exercised). Timed: ``search(ns, limit=10)`` (lists every key to sort by
time) and ``get(ns, key)``; the baseline is the former listing, which looked up each key's latest
episode with a scan of the whole log (O(keys x episodes)), run on the same store up to
``--baseline-max`` items (past that it is quadratic: minutes). Both listings must return the same
items.

    python benchmarks/langgraph_store.py [--sizes 150,1000,10000] [--baseline-max 1000]

Prints a table and one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from deltamem.config import Settings
from deltamem.engine.memory import DeltaMem
from deltamem.formats.episodes import episode_from_dict
from deltamem.integrations.langgraph import DELETED_FIELD, KEY_FIELD, DeltaMemStore, _episode_item

NS = ("bench", "listing")


def fill(store: DeltaMemStore, n: int) -> None:
    """N episodes under N keys, learned in batches through the facade (as N puts would)."""
    mem = store.memory(NS)
    batch = 500
    for start in range(0, n, batch):
        mem.learn_many([episode_from_dict({
            "task": f"put object {i} in receptacle {i % 7}", "env": f"a room with shelf {i % 13}",
            "success": True, "steps": [{"action": f"take object {i}", "observation": "Taken."}],
            "meta": {KEY_FIELD: f"k{i}"}}) for i in range(start, min(n, start + batch))])
    store.put(NS, "k0", {"task": "put object 0 again", "env": "a room", "success": True,
                         "steps": [{"action": "take object 0", "observation": "Taken."}]})
    store.delete(NS, "k1")


def former_listing(mem: DeltaMem) -> list[Any]:
    """The listing before: each key's latest episode found by a scan of the whole log."""
    def latest(key: str) -> Any:
        found = None
        for record in mem.episodes():
            if record.meta.get(KEY_FIELD) == key and (
                    found is None or record.created_at >= found.created_at):
                found = record
        return None if found is None or found.meta.get(DELETED_FIELD) else found

    keys = {r.meta[KEY_FIELD] for r in mem.episodes() if KEY_FIELD in r.meta}
    items = [_episode_item(NS, key, rec) for key in keys if (rec := latest(key)) is not None]
    items.sort(key=lambda item: item.updated_at, reverse=True)
    return items[:10]


def timed(fn: Callable[[], Any], runs: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(runs):
        started = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times), out


def one_size(n: int, folder: Path, baseline_max: int) -> dict[str, Any]:
    settings = Settings(embedder="static")
    with DeltaMemStore(folder / f"lg{n}.db", embedder="static", settings=settings) as store:
        started = time.perf_counter()
        fill(store, n)
        row: dict[str, Any] = {"items": n, "fill_s": round(time.perf_counter() - started, 2)}
        runs = 3 if n <= 1000 else 1
        listed_s, listed = timed(lambda: store.search(NS, limit=10), runs)
        row["list_s"] = round(listed_s, 4)
        row["get_s"] = round(timed(lambda: store.get(NS, f"k{n - 1}"), runs)[0], 4)
        assert len(listed) == 10 and listed[0].key == "k0"
        if n <= baseline_max:
            before_s, before = timed(lambda: former_listing(store.memory(NS)), 1)
            row["former_list_s"] = round(before_s, 4)
            row["speedup"] = round(before_s / max(listed_s, 1e-9), 1)
            assert [(i.key, i.value) for i in before] == [(i.key, i.value) for i in listed]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="150,1000,10000")
    parser.add_argument("--baseline-max", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [one_size(int(n), Path(tmp), args.baseline_max) for n in args.sizes.split(",")]
    print(f"{'items':>7} {'list s':>8} {'former s':>9} {'speedup':>8} {'get s':>7} {'fill s':>7}")
    for r in rows:
        former = f"{r['former_list_s']:9.3f}" if "former_list_s" in r else f"{'-':>9}"
        speedup = f"{r['speedup']:8.1f}" if "speedup" in r else f"{'-':>8}"
        print(f"{r['items']:7d} {r['list_s']:8.4f} {former} {speedup} {r['get_s']:7.4f} "
              f"{r['fill_s']:7.1f}")
    if len(rows) > 1:
        first, last = rows[0], rows[-1]
        growth = (last["list_s"] / max(first["list_s"], 1e-9)) / (last["items"] / first["items"])
        print(f"list time per item, largest over smallest: {growth:.2f} (1.0 = linear)")
    print(json.dumps({"benchmark": "langgraph_store", "cpus": os.cpu_count(),
                      "python": platform.python_version(), "rows": rows}))


if __name__ == "__main__":
    main()
