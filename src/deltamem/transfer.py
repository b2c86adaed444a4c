"""Export and import of a whole space as JSON Lines, exact to the bit.

Line 1 is a header (format, version, embedder, dimension); then one ``node`` record per node in
insertion order (parents first), vectors as base64 little-endian float32; then one ``episode``
record per learned episode. Importing an export into an empty space and exporting again yields
the same records.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from deltamem.errors import ConfigError, EmbedderMismatch, StoreError
from deltamem.store.base import Store
from deltamem.store.rows import episode_from_row, episode_to_row, node_from_row, node_to_row

FORMAT = "deltamem-export"
VERSION = 1
_BATCH = 500  # nodes whose vectors are fetched per round trip (stays under SQL parameter limits)
_JSON_COLUMNS = ("content", "patch", "lineage", "meta", "steps", "result")


def export_records(store: Store, space: str) -> Iterator[dict[str, Any]]:
    """The records of one space, header first."""
    info = next((s for s in store.spaces() if s.space == space), None)
    if info is None:
        raise ConfigError(f"no space {space!r} in {store.url}")
    yield {"format": FORMAT, "version": VERSION, "space": space, "embedder": info.embedder,
           "dim": info.dim}
    nodes = list(store.nodes(space))
    for start in range(0, len(nodes), _BATCH):
        batch = nodes[start : start + _BATCH]
        vectors = store.vectors(space, [n.id for n in batch])
        for node in batch:
            row = _decode(node_to_row(node))
            row["vector"] = base64.b64encode(
                np.asarray(vectors[node.id], dtype="<f4").tobytes()).decode()
            yield {"record": "node", **row}
    for episode in store.episodes(space):
        yield {"record": "episode", **_decode(episode_to_row(episode))}


def import_records(store: Store, space: str, records: Iterable[dict[str, Any]]) -> dict[str, int]:
    """Load exported records into ``space`` in one transaction (all or nothing).

    Raises:
        EmbedderMismatch: the export was made with another embedder than the space uses.
        StoreError: a record is malformed or a node id already exists.
    """
    it = iter(records)
    header = next(it, None)
    if not header or header.get("format") != FORMAT or header.get("version") != VERSION:
        raise StoreError(f"not a {FORMAT} v{VERSION} file (bad or missing header line)")
    info = store.ensure_space(space, str(header["embedder"]), int(header["dim"]))
    counts = {"nodes": 0, "episodes": 0}
    with store.write(space):
        for i, record in enumerate(it, 2):
            try:
                _import_one(store, space, record, info.dim, counts)
            except (KeyError, TypeError, ValueError) as exc:
                raise StoreError(f"record {i}: {exc}") from exc
    return counts


def _import_one(store: Store, space: str, record: dict[str, Any], dim: int,
                counts: dict[str, int]) -> None:
    kind = record.get("record")
    row = _encode({k: v for k, v in record.items() if k != "record"})
    if kind == "node":
        vector = np.frombuffer(base64.b64decode(row.pop("vector")), dtype="<f4")
        if vector.shape[0] != dim:
            raise EmbedderMismatch(f"vector of {vector.shape[0]} dimensions in a {dim}-d space")
        node = node_from_row(row)
        if store.get_node(space, node.id) is not None:
            raise StoreError(f"node {node.id!r} is already in space {space!r} (was this file "
                             "imported before?); import into an empty space, or pick another "
                             "--space")
        store.add_node(space, node, vector.astype(np.float32))
        counts["nodes"] += 1
    elif kind == "episode":
        store.add_episode(space, episode_from_row(row))
        counts["episodes"] += 1
    else:
        raise ValueError(f"unknown record type {kind!r}")


def _decode(row: dict[str, Any]) -> dict[str, Any]:
    return {k: (json.loads(v) if k in _JSON_COLUMNS and isinstance(v, str) else v)
            for k, v in row.items()}


def _encode(row: dict[str, Any]) -> dict[str, Any]:
    out = dict(row)
    for key in _JSON_COLUMNS:
        if key in out and out[key] is not None:
            out[key] = json.dumps(out[key], ensure_ascii=False, separators=(",", ":"))
    return out
