"""Opening a memory: a fresh process's open + first scan of both trees, with and without index
snapshots (``deltamem.store.snapshot``), in one interleaved run.

For each size a SQLite file is filled as ``benchmarks/recall.py`` fills it (random unit vectors,
roots with delta chains, half the nodes per tree). Then, alternating, fresh Python processes
open the store and scan both trees once:

* ``rebuild``  -- snapshots off (``snapshot_every=0``): the index is read row by row from SQLite
  and quantised, as every release before snapshots did;
* ``snapshot`` -- snapshots on, a current snapshot on disk: the index is memory-mapped and only
  the rows after it are caught up;
* ``first``    -- once per size, the process that builds the index and writes the snapshot (the
  price paid once per ``SNAPSHOT_EVERY`` new rows).

Both answer the same nodes and scores (checked). Times exclude interpreter start and imports
(measured inside the child from just before ``SQLiteStore(...)``). Prints a table and JSON.

    python benchmarks/open.py [--sizes 10000,100000] [--repeats 7] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from recall import DIM, populate  # noqa: E402

from deltamem.store.sqlite import SQLiteStore  # noqa: E402

CHILD = r"""
import json, sys, time
import numpy as np
from deltamem.core.model import Tree
from deltamem.store.sqlite import SQLiteStore
path, every, DIM = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(7)
q = rng.normal(size=DIM).astype(np.float32); q /= np.linalg.norm(q)
t0 = time.perf_counter()
store = SQLiteStore(path, snapshot_every=every)
found = [[(c.id, round(c.score, 6)) for c in store.scan("default", t, q, penalty=0.05, k=3)]
         for t in Tree]
seconds = time.perf_counter() - t0
store.close()
print(json.dumps({"seconds": seconds, "found": found}))
"""


def child(path: Path, every: int) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-c", CHILD, str(path), str(every), str(DIM)], check=True,
                         capture_output=True, text=True)
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def run_size(size: int, repeats: int, workdir: Path) -> dict[str, Any]:
    path = workdir / f"open-{size}.db"
    store = SQLiteStore(path, snapshot_every=0)
    store.ensure_space("default", "hashing-384", DIM)
    populate(store, "default", size // 2, np.random.default_rng(0))
    store.close()
    first = child(path, size // 4)  # builds the index and writes the snapshot
    times: dict[str, list[float]] = {"rebuild": [], "snapshot": []}
    answers = {json.dumps(first["found"])}
    for i in range(repeats):
        for arm in (("rebuild", "snapshot") if i % 2 == 0 else ("snapshot", "rebuild")):
            got = child(path, 0 if arm == "rebuild" else size // 4)
            times[arm].append(got["seconds"])
            answers.add(json.dumps(got["found"]))
    if len(answers) != 1:
        raise SystemExit(f"answers differ at {size} nodes: {answers}")
    med = {arm: statistics.median(t) for arm, t in times.items()}
    return {"nodes": size, "first_s": first["seconds"], "rebuild_p50_s": med["rebuild"],
            "snapshot_p50_s": med["snapshot"], "speedup": med["rebuild"] / med["snapshot"],
            "snapshot_mb": sum(f.stat().st_size for f in Path(f"{path}.index").rglob("*")
                               if f.is_file()) / 2**20,
            "samples": times}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="deltamem-open-"))
    try:
        rows = [run_size(int(s), args.repeats, workdir) for s in args.sizes.split(",")]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"{'nodes':>8} {'rebuild p50':>12} {'snapshot p50':>13} {'speedup':>8} "
          f"{'first (build+save)':>19} {'snapshot MB':>12}")
    for r in rows:
        print(f"{r['nodes']:>8} {r['rebuild_p50_s']:>11.3f}s {r['snapshot_p50_s']:>12.3f}s "
              f"{r['speedup']:>7.1f}x {r['first_s']:>18.3f}s {r['snapshot_mb']:>12.1f}")
    report = {"benchmark": "open", "machine": platform.processor() or platform.machine(),
              "python": platform.python_version(), "repeats": args.repeats, "rows": rows}
    print(json.dumps(report))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
