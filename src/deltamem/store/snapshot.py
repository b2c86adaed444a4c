"""Index snapshots: a SQLite store's per-tree index saved beside the database, so that a new
process opens a large memory without rebuilding its index row by row.

Building a tree's index from the database reads every row's vector and quantises it (about 1 s
for 100k rows here, ``benchmarks/open.py``). A snapshot is the finished index -- the float32
rows, their int8 codes and scales, failure flags, depths and ids, and the error bound's maxima --
written as plain ``.npy`` files in ``<database>.index/<space>.<tree>/`` and memory-mapped when it
is loaded: the first scan then reads the codes it needs from the page cache, and rows appended
since the snapshot are caught up from the database as usual.

**Never stale.** A snapshot records the space's ``generation`` (bumped by every deletion), the
space's creation time, the store position it was caught up to, how many rows of the tree it
holds and the id of the last one. It is used only when all of them still hold in the database:
the same generation and creation time, and exactly ``rows`` rows of that tree at or before the
position, the last one with that id. Rows are append-only with ids drawn at random, so a database
whose history up to the position differs in any way -- a deletion, another file at the same
path, a restored backup -- fails the check, and the index is rebuilt from the database (and the
snapshot rewritten). A snapshot that cannot be read (a missing or torn file, another width) is
ignored the same way. Snapshots are written to a temporary folder and renamed into place, so a
reader never sees half of one.

Snapshots are a cache: deleting the folder loses nothing. ``SQLiteStore(..., snapshots=False)``
turns them off.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from deltamem.store.cache import TreeIndex

FORMAT = 1
# Rows appended since the last snapshot (or built from nothing) before a new one is written.
SNAPSHOT_EVERY = 20_000
_ARRAYS = ("matrix", "codes", "scales", "failures", "depths")


@dataclass(frozen=True, slots=True)
class Stamp:
    """What the database must still say for a snapshot to be used (see the module docstring)."""

    generation: int
    created_at: float
    position: int
    rows: int  # the tree's rows in the database up to ``position``
    last_id: str


def folder(database: str, space: str, tree: str) -> Path:
    """Where the snapshot of one (space, tree) of ``database`` lives."""
    return Path(f"{database}.index") / f"{space}.{tree}"


def save(where: Path, index: TreeIndex, stamp: Stamp) -> None:
    """Write ``index`` (caught up to ``stamp.position``) atomically to ``where``.

    Best effort: a snapshot is a cache, so a full disk or a read-only folder only means the next
    process rebuilds; the error is swallowed here and the old snapshot, if any, stays.
    """
    n = index.size
    where.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # the vectors: the user's alone
    tmp = Path(tempfile.mkdtemp(prefix=f".{where.name}.", dir=where.parent))
    try:
        arrays = {"matrix": index._matrix[:n], "codes": index._codes[:n],
                  "scales": index._scales[:n], "failures": index._failures[:n],
                  "depths": index._depths[:n]}
        for name, array in arrays.items():
            np.save(tmp / f"{name}.npy", np.ascontiguousarray(array))
        meta = {"format": FORMAT, "dim": index.dim, "ids": index.ids[:n],
                "bound": [index._residual, index._decoded, index._norm],
                "stamp": [stamp.generation, stamp.created_at, stamp.position, stamp.rows,
                          stamp.last_id]}
        (tmp / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
        old = where.with_name(f".{where.name}.old")
        if where.exists():
            os.replace(where, old)
        os.replace(tmp, where)
        shutil.rmtree(old, ignore_errors=True)
    except OSError:
        pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def peek(where: Path) -> tuple[dict[str, Any], Stamp] | None:
    """A snapshot's metadata and stamp, or None when there is none or it cannot be read."""
    try:
        meta = json.loads((where / "meta.json").read_text(encoding="utf-8"))
        generation, created_at, position, rows, last_id = meta["stamp"]
        if meta.get("format") != FORMAT:
            return None
        return meta, Stamp(int(generation), float(created_at), int(position), int(rows),
                           str(last_id))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def load(where: Path, meta: dict[str, Any], stamp: Stamp, dim: int) -> TreeIndex | None:
    """The snapshot at ``where`` as an index caught up to ``stamp.position`` (its arrays
    memory-mapped, copied on the first append), or None when it cannot be read whole."""
    if int(meta.get("dim", -1)) != dim:
        return None
    try:
        arrays = {name: np.load(where / f"{name}.npy", mmap_mode="r") for name in _ARRAYS}
    except (OSError, ValueError):
        return None
    n = len(meta["ids"])  # the rows kept (a damaged vector is left out of every index)
    shapes = {"matrix": (n, dim), "codes": (n, dim), "scales": (n,), "failures": (n,),
              "depths": (n,)}
    if any(arrays[name].shape != shape for name, shape in shapes.items()):
        return None
    index = TreeIndex(dim, stamp.generation)
    index.adopt(ids=list(meta["ids"]), **arrays, bound=tuple(meta["bound"]))
    index.position = stamp.position
    return index
