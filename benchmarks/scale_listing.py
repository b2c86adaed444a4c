"""Listing, export and import grow linearly: time per item at 1k, 10k and 100k items.

Per size N, in one process, a SQLite memory holds N nodes split evenly between the two trees
(roots with delta chains of depth up to 5, as ``recall.py`` writes them; 384-d random vectors)
and N / 2 episodes. Skills share their keys ten at a time (ten variations of one task), so the
file names ``skills export`` gives them collide as they do in a real memory. Timed, each once:

* ``list_nodes``   -- ``DeltaMem.list_nodes()``: every node as a row;
* ``export``       -- ``DeltaMem.iter_export()`` read to the end (header, nodes, episodes);
* ``import``       -- ``DeltaMem.import_lines`` of that export into a fresh database;
* ``skills export``-- ``deltamem.faces.skills.export_skills`` (a SKILL.md folder per skill root,
  a file per knowledge root);
* ``files alone``  -- the reference for it, in the same run: making as many folders and writing
  as many files of the same sizes, nothing else (the file system's own cost per file, which
  on a loaded machine is most of it and varies from run to run).

The figure is microseconds per item (nodes, or nodes + episodes for the export and import);
``growth`` is the per-item time at the largest size over the smallest: 1 means linear, a
quadratic path grows it ~N-fold. Prints a table and one JSON object.

    python benchmarks/scale_listing.py [--sizes 1000,10000,100000]
    python benchmarks/scale_listing.py --tiny        # seconds: what the test suite runs
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from deltamem.core.delta import diff
from deltamem.core.model import Knowledge, Node, NodeKind, Outcome, Skill, Tree
from deltamem.engine.memory import DeltaMem
from deltamem.extract.trace import TraceExtractor
from deltamem.faces.skills import export_skills
from deltamem.store.base import EpisodeRecord
from deltamem.store.sqlite import SQLiteStore

sys.path.insert(0, str(Path(__file__).parent))
from recall import DIM, _FixedDim  # noqa: E402

SPACE = "listing"
VARIATIONS = 10  # skills per key


def _node(tree: Tree, i: int, parent: Node | None) -> Node:
    key = f"task {i // VARIATIONS}" if tree is Tree.TASK else f"scene {i}"
    base: Any = (Skill(key, tuple(f"step {j} of {i}" for j in range(6)), "done")
                 if tree is Tree.TASK else Knowledge(key, (f"fact a {i}", f"fact b {i}")))
    nid = f"{tree.value[0]}-{i}"
    if parent is None:
        return Node(nid, tree, NodeKind.ROOT, Outcome.SUCCESS, key, content=base,
                    episode_id=f"ep-{i // 2}", created_at=float(i))
    changed = (Skill(key, (*base.steps, "extra"), "done") if tree is Tree.TASK
               else Knowledge(key, (f"fact a {i}", "fact c")))
    # A delta of the root edits it; deeper ones add nothing (an empty patch composes too).
    patch = diff(parent.content, changed) if parent.content is not None else ()
    return Node(nid, tree, NodeKind.DELTA, Outcome.SUCCESS, key, parent_id=parent.id,
                depth=parent.depth + 1, patch=patch, episode_id=f"ep-{i // 2}",
                created_at=float(i))


def fill(mem: DeltaMem, n: int, rng: np.random.Generator) -> None:
    """N nodes (half per tree) and N / 2 episodes, in one write block."""
    store = mem.store
    with mem.transaction():
        for tree in Tree:
            parent: Node | None = None
            for i in range(n // 2):
                vector = rng.normal(size=DIM).astype(np.float32)
                vector /= np.linalg.norm(vector)
                node = _node(tree, i, parent if i % 4 else None)
                store.add_node(mem.space, node, vector)
                parent = node if node.depth < 5 else None
        for i in range(n // 2):
            store.add_episode(mem.space, EpisodeRecord(
                id=f"ep-{i}", task=f"task {i // VARIATIONS}", env=f"scene {i}", success=True,
                score=None, steps=[{"action": "look", "observation": "a room"}], meta={},
                result={}, flat_chars=100, created_at=float(i)))


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def measure(n: int, tmp: Path, rng: np.random.Generator) -> dict[str, Any]:
    mem = DeltaMem(SQLiteStore(tmp / f"src{n}.db"), _FixedDim(), TraceExtractor(), space=SPACE)
    fill(mem, n, rng)
    items = {"nodes": n, "episodes": n // 2}
    out: dict[str, Any] = {"size": n, **items}
    seconds, rows = timed(lambda: mem.list_nodes().nodes)
    assert len(rows) == n
    out["list_nodes"] = seconds
    lines: list[str] = []
    seconds, _ = timed(lambda: lines.extend(mem.iter_export()))
    out["export"] = seconds
    copy = DeltaMem(SQLiteStore(tmp / f"dst{n}.db"), _FixedDim(), TraceExtractor(), space=SPACE)
    seconds, counts = timed(lambda: copy.import_lines(lines))
    assert counts.nodes == n, counts
    out["import"] = seconds
    copy.close()
    seconds, written = timed(lambda: export_skills(mem, tmp / f"skills{n}"))
    out["skills_export"] = seconds
    out["skill_files"] = len(written["skills"]) + len(written["knowledge"])
    out["files_alone"] = files_alone(tmp / f"skills{n}", tmp / f"files{n}")
    mem.close()
    return out


def files_alone(written: Path, target: Path) -> float:
    """Seconds to write files of the sizes under ``written`` (one folder each) into ``target``."""
    sizes = [p.stat().st_size for p in written.rglob("*.md")]
    t0 = time.perf_counter()
    for i, size in enumerate(sizes):
        folder = target / f"f{i}"
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text("x" * size, encoding="utf-8")
    return time.perf_counter() - t0


PER = {"list_nodes": "nodes", "export": "records", "import": "records",
       "skills_export": "skill_files", "files_alone": "skill_files"}


def per_item_us(row: dict[str, Any], what: str) -> float:
    count = row["nodes"] + row["episodes"] if PER[what] == "records" else row[PER[what]]
    return 1e6 * float(row[what]) / max(int(count), 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--tiny", action="store_true", help="a few seconds (the test suite)")
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args()
    sizes = [200, 2000] if args.tiny else [int(s) for s in args.sizes.split(",")]
    rng = np.random.default_rng(args.seed)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            rows.append(measure(n, Path(tmp), rng))
    print(f"listing, export and import, µs per item ({platform.processor() or platform.machine()},"
          f" {os.cpu_count()} cpus, load {os.getloadavg()[0]:.2f})")
    print(f"{'operation':<14}" + "".join(f"{n:>12,}" for n in sizes) + f"{'growth':>9}")
    growth = {}
    for what in PER:
        per = [per_item_us(r, what) for r in rows]
        growth[what] = per[-1] / per[0]
        print(f"{what:<14}" + "".join(f"{p:>12.1f}" for p in per) + f"{growth[what]:>9.2f}")
    print(json.dumps({"benchmark": "scale_listing", "sizes": sizes, "rows": rows,
                      "per_item_us": {w: [per_item_us(r, w) for r in rows] for w in PER},
                      "growth": growth, "load": os.getloadavg()[0]}))


if __name__ == "__main__":
    main()
