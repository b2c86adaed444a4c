"""Concurrent writers with the real MiniLM embedder: one BLAS thread per embedding call vs all.

``W`` processes each learn ``N`` episodes into their own SQLite file, first with
``embed_threads=0`` (the BLAS library's default: every core per call, the old behaviour), then
with ``embed_threads=1`` (the default now), in the same run. Prints a table and a JSON record:
wall time per setting, episodes/s and the speed-up.

Usage::

    python benchmarks/blas_threads.py [--writers 4] [--episodes 25] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

from deltamem.config import Settings
from deltamem.core.model import Episode, Step
from deltamem.engine.memory import DeltaMem

VERBS = ["heat", "cool", "clean", "put", "take", "open", "slice", "wash", "boil", "find"]
THINGS = ["apple", "mug", "tomato", "knife", "book", "pan", "egg", "vase", "key", "lamp"]


def episodes(n: int, seed: int) -> list[Episode]:
    out = []
    for i in range(n):
        verb, thing = VERBS[(i + seed) % len(VERBS)], THINGS[(i * 3 + seed) % len(THINGS)]
        steps = tuple(Step(f"{v} {thing}", f"You {v} the {thing}.")
                      for v in ("go to", verb, "put"))
        out.append(Episode(task=f"{verb} the {thing}", env=f"a kitchen with a {thing}",
                           steps=steps, success=i % 4 != 3))
    return out


def writer(args: tuple[str, int, int, int]) -> float:
    db, n, seed, threads = args
    settings = Settings(embedder="minilm", embed_threads=threads)
    with DeltaMem.open(db, settings=settings) as mem:
        mem.recall("warm up", "the model")  # load the weights outside the timing
        started = time.perf_counter()
        for episode in episodes(n, seed):
            mem.learn(episode)
        return time.perf_counter() - started


def run(writers: int, n: int, threads: int, folder: Path) -> dict[str, Any]:
    jobs = [(str(folder / f"t{threads}-w{w}.db"), n, w, threads) for w in range(writers)]
    started = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(writers) as pool:
        per_writer = pool.map(writer, jobs)
    wall = time.perf_counter() - started
    return {"embed_threads": threads, "wall_s": round(wall, 2),
            "learn_s_per_writer": [round(t, 2) for t in per_writer],
            "episodes_per_s": round(writers * n / max(per_writer), 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--episodes", type=int, default=25)
    parser.add_argument("--json-out", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [run(args.writers, args.episodes, threads, Path(tmp)) for threads in (0, 1)]
    baseline, ours = rows
    speedup = round(max(baseline["learn_s_per_writer"]) / max(ours["learn_s_per_writer"]), 2)
    print(f"{'embed_threads':>14} {'slowest writer s':>17} {'episodes/s':>11}")
    for row in rows:
        label = "0 (all cores)" if row["embed_threads"] == 0 else "1"
        print(f"{label:>14} {max(row['learn_s_per_writer']):>17.2f} {row['episodes_per_s']:>11}")
    print(f"speed-up of one BLAS thread per call: {speedup}x")
    record = {"benchmark": "blas_threads", "writers": args.writers, "episodes": args.episodes,
              "cpus": os.cpu_count(), "machine": platform.machine(), "rows": rows,
              "speedup": speedup}
    print(json.dumps(record))
    if args.json_out:
        args.json_out.write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
