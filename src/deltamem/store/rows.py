"""Node and episode <-> flat row conversion, and the column orders, shared by every SQL backend."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from deltamem._util import jsonsafe
from deltamem._util.jsonsafe import dumps
from deltamem.core.delta import patch_from_json, patch_to_json
from deltamem.core.model import (
    Experience,
    Node,
    NodeKind,
    Outcome,
    Tree,
    experience_from_dict,
    experience_to_dict,
)
from deltamem.errors import StoreError
from deltamem.store.base import EpisodeRecord
from deltamem.store.texts import decode_content, decode_patch, encode_content, encode_patch

NODE_COLUMNS = (
    "id", "tree", "kind", "outcome", "parent_id", "depth", "key", "content", "patch", "hits",
    "successes", "failures", "consolidated", "lineage", "episode_id", "created_at", "meta",
)
EPISODE_COLUMNS = (
    "id", "task", "env", "success", "score", "steps", "meta", "result", "flat_chars", "created_at",
)
# Integer columns (depth, counters, flat_chars) are 32-bit in PostgreSQL: the narrower backend
# decides what every backend stores.
INT_RANGE = range(-(2**31), 2**31)
KEY_COLUMNS = (
    "id", "name", "salt", "hash", "spaces", "scopes", "rate_limit", "created_at", "last_used_at",
    "revoked_at",
)


def node_to_row(node: Node, texts: Mapping[str, int] | None = None) -> dict[str, Any]:
    """A node's row; with ``texts`` (text -> number, ``store.texts``), those texts of its
    experience lists are written as their numbers."""
    content = None if node.content is None else experience_to_dict(node.content)
    patch = None if node.patch is None else patch_to_json(node.patch)
    if texts:
        content = None if content is None else encode_content(content, texts)
        patch = None if patch is None else encode_patch(patch, texts)
    return _storable(f"node {node.id!r}", {
        "id": node.id,
        "tree": node.tree.value,
        "kind": node.kind.value,
        "outcome": node.outcome.value,
        "parent_id": node.parent_id,
        "depth": node.depth,
        "key": node.key,
        "content": None if content is None else dumps(content),
        "patch": None if patch is None else dumps(patch),
        "hits": node.hits,
        "successes": node.successes,
        "failures": node.failures,
        "consolidated": bool(node.consolidated),
        "lineage": dumps(list(node.lineage)),
        "episode_id": node.episode_id,
        "created_at": node.created_at,
        "meta": dumps(node.meta),
    })


def node_from_row(row: Mapping[str, Any], texts: Mapping[int, str] | None = None) -> Node:
    """The node of a row; with ``texts`` (a store's, ``store.texts``), the text numbers in its
    JSON are read from it (``StoreError`` for a number it lacks); without, a number is an
    invalid item (``ValueError``), as in an export file."""
    content = None if row["content"] is None else json.loads(row["content"])
    patch = None if row["patch"] is None else json.loads(row["patch"])
    if texts is not None:
        try:
            content, patch = decode_content(content, texts), decode_patch(patch, texts)
        except KeyError as exc:
            raise StoreError(f"node {row['id']!r} refers to text {exc}, which is not "
                             "stored") from exc
    return Node(
        id=row["id"],
        tree=Tree(row["tree"]),
        kind=NodeKind(row["kind"]),
        outcome=Outcome(row["outcome"]),
        parent_id=row["parent_id"],
        depth=int(row["depth"]),
        key=row["key"],
        content=None if content is None else experience_from_dict(content),
        patch=None if patch is None else patch_from_json(patch),
        hits=int(row["hits"]),
        successes=int(row["successes"]),
        failures=int(row["failures"]),
        consolidated=bool(row["consolidated"]),
        lineage=tuple(json.loads(row["lineage"])),
        episode_id=row["episode_id"],
        created_at=float(row["created_at"]),
        meta=json.loads(row["meta"]),
    )


def retired_record(node: Node, experience: Experience) -> dict[str, Any]:
    """What the audit log keeps of a node consolidation retired (``Store.retire``): the node
    as it was, with the whole experience it composed to instead of its patch."""
    return {"id": node.id, "tree": node.tree.value, "kind": node.kind.value,
            "outcome": node.outcome.value, "parent": node.parent_id, "depth": node.depth,
            "key": node.key, "experience": experience_to_dict(experience), "hits": node.hits,
            "successes": node.successes, "failures": node.failures,
            "episode": node.episode_id, "created_at": node.created_at, "meta": node.meta}


def history_of(entries: Iterable[tuple[Any, dict[str, Any]]], deleted: Iterable[str]
               ) -> list[Any]:
    """The keys of the ``"retire"`` audit entries (``(key, detail)``) that go with the
    ``deleted`` node ids: those retired into a deleted node, or into a node retired into one
    (transitively)."""
    entries = list(entries)
    gone, drop, found = set(deleted), [], True
    while found:
        found = False
        for key, detail in entries:
            if key not in drop and detail.get("into") in gone:
                drop.append(key)
                gone |= {str(n.get("id")) for n in detail.get("nodes", []) if isinstance(n, dict)}
                found = True
    return drop


def episode_to_row(record: EpisodeRecord) -> dict[str, Any]:
    return _storable(f"episode {record.id!r}", {
        "id": record.id,
        "task": record.task,
        "env": record.env,
        "success": bool(record.success),
        "score": record.score,
        "steps": dumps(record.steps),
        "meta": dumps(record.meta),
        "result": dumps(record.result),
        "flat_chars": record.flat_chars,
        "created_at": record.created_at,
    })


def _storable(what: str, row: dict[str, Any]) -> dict[str, Any]:
    """Refuse values no backend can hold the same way: text with NUL or a lone surrogate (SQLite
    would keep a NUL that PostgreSQL refuses, and neither can encode a surrogate), and integers
    outside ``INT_RANGE`` (SQLite would keep what PostgreSQL refuses)."""
    for column, value in row.items():
        problem = jsonsafe.text_problem(value) if isinstance(value, str) else None
        if isinstance(value, int) and not isinstance(value, bool) and value not in INT_RANGE:
            problem = f"is out of range: {value} is not a 32-bit integer"
        if problem:
            raise StoreError(f"{what}: column {column!r} {problem}")
    return row


def episode_from_row(row: Mapping[str, Any]) -> EpisodeRecord:
    return EpisodeRecord(
        id=row["id"],
        task=row["task"],
        env=row["env"],
        success=bool(row["success"]),
        score=None if row["score"] is None else float(row["score"]),
        steps=json.loads(row["steps"]),
        meta=json.loads(row["meta"]),
        result=json.loads(row["result"]),
        flat_chars=int(row["flat_chars"]),
        created_at=float(row["created_at"]),
    )
