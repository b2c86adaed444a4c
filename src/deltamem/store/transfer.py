"""Export and import of a whole space as JSON Lines, exact to the bit.

Line 1 is a header (format, version, embedder, dimension); then one ``node`` record per node in
insertion order (parents first), vectors as base64 little-endian float32; then one ``episode``
record per learned episode. Importing an export into an empty space and exporting again yields
the same records.

An import is verified as a whole before anything is written: every record's fields and types,
text that both backends can store, parents that exist in the same tree, depths (hence no
cycles) within ``max_depth``, roots that hold content, chains that compose, and finite unit-norm
vectors of the space's width. A bad file is refused with one error naming its first bad record.
The tree is checked under the same write lock the records are written under, so a concurrent
delete cannot slip in between and leave an orphan.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from types import NoneType
from typing import Any

import numpy as np

from deltamem._util import jsonsafe
from deltamem.core.model import Node
from deltamem.core.tree import MAX_DEPTH, forest_problems
from deltamem.errors import InvalidExport, SpaceNotFound, StoreError
from deltamem.store.base import EpisodeRecord, Store, Vector
from deltamem.store.integrity import space_info, vector_problem
from deltamem.store.rows import (
    INT_RANGE,
    episode_from_row,
    episode_to_row,
    node_from_row,
    node_to_row,
)

FORMAT = "deltamem-export"
VERSION = 1
_BATCH = 500  # nodes whose vectors are fetched per round trip (stays under SQL parameter limits)
_JSON_COLUMNS = ("content", "patch", "lineage", "meta", "steps", "result")
# Nesting allowed in a record: an episode's meta (jsonsafe.MAX_NESTING) sits two levels down.
_RECORD_NESTING = jsonsafe.MAX_NESTING + 4

_NUMBER = (int, float)
NODE_FIELDS: dict[str, tuple[type, ...]] = {
    "id": (str,), "tree": (str,), "kind": (str,), "outcome": (str,), "parent_id": (str, NoneType),
    "depth": (int,), "key": (str,), "content": (dict, NoneType), "patch": (list, NoneType),
    "hits": (int,), "successes": (int,), "failures": (int,), "consolidated": (bool,),
    "lineage": (list,), "episode_id": (str, NoneType), "created_at": _NUMBER, "meta": (dict,),
    "vector": (str,),
}
EPISODE_FIELDS: dict[str, tuple[type, ...]] = {
    "id": (str,), "task": (str,), "env": (str,), "success": (bool,),
    "score": (int, float, NoneType), "steps": (list,), "meta": (dict,), "result": (dict,),
    "flat_chars": (int,), "created_at": _NUMBER,
}
_COUNTS = ("depth", "hits", "successes", "failures", "flat_chars")


def export_records(store: Store, space: str) -> Iterator[dict[str, Any]]:
    """The records of one space, header first.

    Raises:
        SpaceNotFound: the store has no such space.
    """
    info = space_info(store, space)
    if info is None:
        raise SpaceNotFound(f"no space {space!r} in {store.url}")
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


def export_lines(store: Store, space: str) -> Iterator[str]:
    """The export as JSON Lines (strict JSON: a value JSON cannot hold is a ``StoreError``)."""
    records = export_records(store, space)
    done = 0
    while True:
        try:
            record = next(records, None)
            line = None if record is None else jsonsafe.dumps(record) + "\n"
        except ValueError as exc:  # NaN or Infinity reached the database some other way
            raise StoreError(f"cannot export record {done + 1} of space {space!r}: {exc}; "
                             "run `deltamem check`") from exc
        if line is None:
            return
        done += 1
        yield line


def parse_lines(lines: Iterable[str | bytes], source: str = "line") -> Iterator[dict[str, Any]]:
    """Records from JSON Lines (blank lines skipped); a line that is not a JSON object is a
    ``StoreError`` naming ``source:line``."""
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = jsonsafe.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidExport(f"{source}:{lineno}: not JSON ({exc.msg} at column {exc.colno}); "
                             "expected a file written by export") from exc
        except ValueError as exc:  # NaN, Infinity, nesting
            raise InvalidExport(f"{source}:{lineno}: not strict JSON ({exc})") from exc
        if not isinstance(record, dict):
            raise InvalidExport(f"{source}:{lineno}: expected a JSON object")
        yield record


@dataclass
class _Parsed:
    nodes: list[tuple[int, Node, Vector]] = field(default_factory=list)
    episodes: list[tuple[int, EpisodeRecord]] = field(default_factory=list)


def import_records(store: Store, space: str, records: Iterable[dict[str, Any]], *,
                   max_depth: int | None = None) -> dict[str, int]:
    """Verify exported records as a whole, then load them into ``space`` in one transaction.

    Nodes may hang under nodes the space already holds. Nothing is written unless every record
    is sound (see the module docstring).

    Raises:
        EmbedderMismatch: the export was made with another embedder than the space uses.
        InvalidExport: a record is malformed or would damage the trees (the message names it).
        StoreError: a node or episode id already exists in the space.
    """
    depth_limit = MAX_DEPTH if max_depth is None else max_depth
    it = iter(records)
    embedder, dim = _header(next(it, None))
    info = space_info(store, space)
    if info is not None and (info.embedder, info.dim) != (embedder, dim):
        store.ensure_space(space, embedder, dim)  # raises EmbedderMismatch, saying what to do
    parsed = _Parsed()
    for line, record in enumerate(it, 2):
        try:
            _parse_one(record, dim, parsed, line)
        except (KeyError, TypeError, ValueError, OverflowError, binascii.Error) as exc:
            raise InvalidExport(f"record {line}{_naming(record)}: {exc}; nothing was imported") \
                from exc
    with store.write(space):  # checked under the lock it is written under: no delete between
        _verify(store, space, space_info(store, space) is not None, parsed, depth_limit)
        store.ensure_space(space, embedder, dim)
        for _, node, vector in parsed.nodes:
            store.add_node(space, node, vector)
        for _, episode in parsed.episodes:
            store.add_episode(space, episode)
    return {"nodes": len(parsed.nodes), "episodes": len(parsed.episodes)}


def _header(header: Any) -> tuple[str, int]:
    if not isinstance(header, dict) or header.get("format") != FORMAT \
            or header.get("version") != VERSION:
        raise InvalidExport(f"not a {FORMAT} v{VERSION} file (bad or missing header line)")
    embedder, dim = header.get("embedder"), header.get("dim")
    if not isinstance(embedder, str) or not embedder or jsonsafe.text_problem(embedder):
        raise InvalidExport("the header's 'embedder' must be the embedder's name")
    if isinstance(dim, bool) or not isinstance(dim, int) or not 0 < dim <= 65_536:
        raise InvalidExport("the header's 'dim' must be the vectors' width (a positive integer)")
    return embedder, dim


def _naming(record: Any) -> str:
    if isinstance(record, dict) and isinstance(record.get("id"), str):
        return f" ({record.get('record')} {record['id']!r})"
    return ""


def _parse_one(record: Any, dim: int, parsed: _Parsed, line: int) -> None:
    if not isinstance(record, dict):
        raise ValueError("a record must be a JSON object")
    kind = record.get("record")
    fields = NODE_FIELDS if kind == "node" else EPISODE_FIELDS if kind == "episode" else None
    if fields is None:
        raise ValueError(f"unknown record type {kind!r} (expected 'node' or 'episode')")
    row = {k: v for k, v in record.items() if k != "record"}
    _check_fields(row, fields)
    problem = jsonsafe.value_problem(row, "record", max_nesting=_RECORD_NESTING)
    if problem:
        raise ValueError(problem)
    if not row["id"]:
        raise ValueError("field 'id' must not be empty")
    if not 0 <= row["created_at"] < INT_RANGE.stop:
        raise ValueError(f"field 'created_at' must be a time in seconds since 1970, not "
                         f"{row['created_at']!r}")
    if kind == "node":
        vector = np.frombuffer(base64.b64decode(row.pop("vector"), validate=True), dtype="<f4")
        problem = vector_problem(vector, dim)
        if problem:
            raise ValueError(problem)
        lineage = row["lineage"]
        if not all(isinstance(i, str) for i in lineage):
            raise ValueError("field 'lineage' must be a list of node ids")
        parsed.nodes.append((line, node_from_row(_encode(row)), vector.astype(np.float32)))
    else:
        parsed.episodes.append((line, episode_from_row(_encode(row))))


def _check_fields(row: dict[str, Any], fields: dict[str, tuple[type, ...]]) -> None:
    missing = [k for k in fields if k not in row]
    if missing:
        raise ValueError(f"missing field {missing[0]!r}")
    unknown = sorted(set(row) - set(fields))
    if unknown:
        raise ValueError(f"unknown field {unknown[0]!r}")
    for name, types in fields.items():
        value = row[name]
        if isinstance(value, bool) and bool not in types or not isinstance(value, types):
            allowed = " or ".join("null" if t is NoneType else t.__name__ for t in types)
            raise ValueError(f"field {name!r} must be {allowed}, got {type(value).__name__}")
        if name in _COUNTS and isinstance(value, int) and not 0 <= value < INT_RANGE.stop:
            raise ValueError(f"field {name!r} must be in 0..{INT_RANGE.stop - 1}, got {value}")


def _verify(store: Store, space: str, exists: bool, parsed: _Parsed, max_depth: int) -> None:
    """Refuse the import if the space with these nodes added would not be sound."""
    existing = list(store.nodes(space)) if exists else []
    lines = {node.id: line for line, node, _ in parsed.nodes}
    held = {n.id for n in existing}
    for node_id, problem in forest_problems([*existing, *(n for _, n, _ in parsed.nodes)],
                                            max_depth=max_depth):
        if node_id in lines and node_id in held and problem == "duplicate id":
            raise StoreError(f"record {lines[node_id]} (node {node_id!r}): already in space "
                             f"{space!r} (was this file imported before?); import into an "
                             "empty space, or pick another --space")
        if node_id in lines:
            raise InvalidExport(f"record {lines[node_id]} (node {node_id!r}): {problem}; "
                                "nothing was imported")
        raise StoreError(f"space {space!r} holds a damaged node {node_id!r} ({problem}); "
                         "run `deltamem check`; nothing was imported")
    seen: set[str] = set()
    for line, episode in parsed.episodes:
        if episode.id in seen:
            raise InvalidExport(f"record {line} (episode {episode.id!r}): duplicate id; "
                             "nothing was imported")
        seen.add(episode.id)


def _decode(row: dict[str, Any]) -> dict[str, Any]:
    return {k: (json.loads(v) if k in _JSON_COLUMNS and isinstance(v, str) else v)
            for k, v in row.items()}


def _encode(row: dict[str, Any]) -> dict[str, Any]:
    out = dict(row)
    for key in _JSON_COLUMNS:
        if key in out and out[key] is not None:
            out[key] = jsonsafe.dumps(out[key])
    return out
