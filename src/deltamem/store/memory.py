"""The reference store: :class:`InMemoryStore`, the :class:`~deltamem.store.base.Store`
contract in plain Python, in one process.

It is what the contract means, written as directly as it can be: a scan is
:func:`deltamem.core.scoring.top_k` over the tree's nodes in insertion order, a chain is a
walk up the parents, a write block works on a copy of the state that replaces the committed
one on success. It keeps rows exactly as the SQL stores do (``store.rows``), so it refuses the
same text and integers. The conformance suite diffs every backend against it on random trees
(``deltamem.testing.conformance``). Nothing is persisted; use it for tests and experiments, not
as a database (each write block copies the space's indexes: O(nodes) per block).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from deltamem._util.jsonsafe import dumps, text_problem
from deltamem.core.model import Experience, Node, Tree
from deltamem.core.ranking import Candidate
from deltamem.core.scoring import top_k
from deltamem.core.tree import chains_from
from deltamem.errors import EmbedderMismatch, StoreError
from deltamem.store.base import (
    EpisodeRecord,
    Footprint,
    SpaceInfo,
    Store,
    Vector,
    check_vector,
)
from deltamem.store.rows import (
    episode_from_row,
    episode_to_row,
    history_of,
    node_from_row,
    node_to_row,
    retired_record,
)
from deltamem.store.texts import node_texts, referenced


@dataclass(slots=True)
class _State:
    """Everything a store holds; a write block works on a copy."""

    spaces: dict[str, SpaceInfo] = field(default_factory=dict)
    nodes: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)  # insertion order
    vectors: dict[str, dict[str, Vector]] = field(default_factory=dict)
    episodes: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    audit: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    texts: dict[str, dict[int, str]] = field(default_factory=dict)  # store.texts, by number
    last_text: int = 0  # numbers are never reused

    def copy(self) -> _State:
        return _State(dict(self.spaces), {s: dict(v) for s, v in self.nodes.items()},
                      {s: dict(v) for s, v in self.vectors.items()},
                      {s: dict(v) for s, v in self.episodes.items()},
                      {s: list(v) for s, v in self.audit.items()},
                      {s: dict(v) for s, v in self.texts.items()}, self.last_text)

    def intern(self, space: str, texts: list[str]) -> dict[str, int]:
        """The numbers of ``texts`` in ``space``, adding those it lacks."""
        held = self.texts.setdefault(space, {})
        known = {t: i for i, t in held.items()}
        for text in texts:
            if text not in known:
                self.last_text += 1
                held[self.last_text], known[text] = text, self.last_text
        return {t: known[t] for t in texts}

    def drop_unreferenced_texts(self, space: str) -> None:
        rows = self.nodes.get(space, {}).values()
        keep = referenced((r["content"], r["patch"]) for r in rows)
        held = self.texts.get(space, {})
        self.texts[space] = {i: t for i, t in held.items() if i in keep}


@dataclass(slots=True)
class _Block:
    space: str
    state: _State


class InMemoryStore(Store):
    """The reference :class:`~deltamem.store.base.Store` (see the module docstring)."""

    url = "memory:"

    def __init__(self) -> None:
        self._state = _State()
        self._writer = threading.Lock()  # serialises write blocks
        self._local = threading.local()

    # -- blocks -----------------------------------------------------------------------------
    def _block(self) -> _Block | None:
        block: _Block | None = getattr(self._local, "block", None)
        return block

    def _view(self) -> _State:
        block = self._block()
        return block.state if block is not None else self._state

    @contextmanager
    def write(self, space: str) -> Iterator[None]:
        if self._block() is not None:
            raise StoreError("write blocks do not nest")
        with self._writer:
            block = _Block(space, self._state.copy())
            self._local.block = block
            try:
                yield
                self._state = block.state
            finally:
                self._local.block = None

    @contextmanager
    def _mutation(self, space: str) -> Iterator[_State]:
        block = self._block()
        if block is None:
            with self.write(space):
                yield self._view()
        elif block.space != space:
            raise StoreError(f"cannot change space {space!r} inside a write block for "
                             f"{block.space!r}")
        else:
            yield block.state

    # -- spaces -----------------------------------------------------------------------------
    def ensure_space(self, space: str, embedder: str, dim: int) -> SpaceInfo:
        for what, text in (("space name", space), ("embedder name", embedder)):
            problem = text_problem(text)
            if problem:
                raise StoreError(f"{what} {text!r} {problem}")
        info = self._view().spaces.get(space)
        if info is None:
            with self._mutation(space) as state:
                info = state.spaces.setdefault(space, SpaceInfo(space, embedder, dim))
        if (info.embedder, info.dim) != (embedder, dim):
            raise EmbedderMismatch(
                f"space {space!r} was built with embedder {info.embedder!r} ({info.dim}-d); "
                f"open it with embedder={info.embedder!r}, or use another space for {embedder!r}"
            )
        return info

    def spaces(self) -> list[SpaceInfo]:
        return sorted(self._view().spaces.values(), key=lambda s: s.space)

    # -- nodes ------------------------------------------------------------------------------
    def add_node(self, space: str, node: Node, vector: Vector) -> None:
        row = node_to_row(node)  # refuses what no backend can hold, before anything is kept
        texts = node_texts(node)
        with self._mutation(space) as state:
            info = state.spaces.get(space)
            if info is None:
                raise StoreError(f"unknown space {space!r}: call ensure_space first")
            check_vector(space, node.id, vector, info.dim)
            rows = state.nodes.setdefault(space, {})
            if node.id in rows:
                raise StoreError(f"node {node.id!r} already in {space!r}")
            rows[node.id] = node_to_row(node, state.intern(space, texts)) if texts else row
            state.vectors.setdefault(space, {})[node.id] = np.array(vector, dtype=np.float32)

    def _rows(self, space: str) -> dict[str, dict[str, Any]]:
        return self._view().nodes.get(space, {})

    def _node(self, space: str, row: dict[str, Any]) -> Node:
        return node_from_row(row, self._view().texts.get(space, {}))

    def get_nodes(self, space: str, node_ids: Sequence[str]) -> dict[str, Node]:
        rows = self._rows(space)
        return {i: self._node(space, rows[i]) for i in dict.fromkeys(node_ids) if i in rows}

    def metas(self, space: str, node_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        rows = self._rows(space)
        return {i: json.loads(rows[i]["meta"]) for i in dict.fromkeys(node_ids) if i in rows}

    def chains(self, space: str, node_ids: Sequence[str]) -> dict[str, list[Node]]:
        return chains_from((self._node(space, r) for r in self._rows(space).values()),
                           list(dict.fromkeys(node_ids)))

    def children(self, space: str, node_id: str) -> list[Node]:
        return [self._node(space, r) for r in self._rows(space).values()
                if r["parent_id"] == node_id]

    def nodes(self, space: str, tree: Tree | None = None) -> Iterator[Node]:
        return iter([self._node(space, r) for r in self._rows(space).values()
                     if tree is None or r["tree"] == tree.value])

    def vectors(self, space: str, node_ids: list[str]) -> dict[str, Vector]:
        held = self._view().vectors.get(space, {})
        return {i: held[i].copy() for i in node_ids if i in held}

    def bump(self, space: str, node_id: str, *, hits: int = 0, successes: int = 0,
             failures: int = 0) -> None:
        with self._mutation(space) as state:
            rows = state.nodes.get(space, {})
            if node_id in rows:
                row = rows[node_id]
                rows[node_id] = {**row, "hits": row["hits"] + hits,
                                 "successes": row["successes"] + successes,
                                 "failures": row["failures"] + failures}

    def mark_consolidated(self, space: str, node_id: str) -> None:
        with self._mutation(space) as state:
            rows = state.nodes.get(space, {})
            if node_id in rows:
                rows[node_id] = {**rows[node_id], "consolidated": True}

    def delete_subtree(self, space: str, node_id: str) -> list[str]:
        with self._mutation(space) as state:
            rows = state.nodes.get(space, {})
            ids: list[str] = []
            if node_id in rows:
                ids.append(node_id)
                for current in ids:  # grows while walking: breadth first
                    depth = rows[current]["depth"]
                    ids += [i for i, r in rows.items()
                            if r["parent_id"] == current and r["depth"] > depth and i not in ids]
            for i in ids:
                del rows[i]
                state.vectors.get(space, {}).pop(i, None)
            state.drop_unreferenced_texts(space)
            log = state.audit.get(space, [])
            drop = set(history_of(((i, e["detail"]) for i, e in enumerate(log)
                                   if e["action"] == "retire"), ids))
            state.audit[space] = [e for i, e in enumerate(log) if i not in drop]
            _log(state, space, "delete_subtree", {"root": node_id, "deleted": ids})
        return ids

    def retire(self, space: str, into: str, retired: Sequence[tuple[Node, Experience]],
               moved: Sequence[Node]) -> None:
        records = [retired_record(node, exp) for node, exp in retired]
        with self._mutation(space) as state:
            rows = state.nodes.get(space, {})
            for node, _ in retired:
                rows.pop(node.id, None)
                state.vectors.get(space, {}).pop(node.id, None)
            for node in moved:
                if node.id in rows:
                    texts = node_texts(node)
                    row = node_to_row(node, state.intern(space, texts) if texts else None)
                    rows[node.id] = {**rows[node.id], "parent_id": row["parent_id"],
                                     "depth": row["depth"], "patch": row["patch"]}
            state.drop_unreferenced_texts(space)
            _log(state, space, "retire", {"into": into, "nodes": records})

    def forget_space(self, space: str) -> int:
        with self._mutation(space) as state:
            count = len(state.nodes.pop(space, {}))
            state.vectors.pop(space, None)
            state.episodes.pop(space, None)
            state.texts.pop(space, None)
            state.audit[space] = [e for e in state.audit.get(space, [])
                                  if e["action"] != "retire"]
            _log(state, space, "forget_space", {"nodes": count})
        return count

    def footprint(self, space: str) -> Footprint:
        sizes = {tree: 0 for tree in Tree}
        for row in self._rows(space).values():
            sizes[Tree(row["tree"])] += len(row["content"] or "") + len(row["patch"] or "")
        texts = self._view().texts.get(space, {})
        return Footprint(task=sizes[Tree.TASK], env=sizes[Tree.ENV],
                         texts=sum(map(len, texts.values())), text_count=len(texts))

    # -- retrieval --------------------------------------------------------------------------
    def scan(self, space: str, tree: Tree, query: Vector, *, penalty: float, k: int = 1,
             approximate_from: int = 0) -> list[Candidate]:
        state = self._view()
        info = state.spaces.get(space)
        if info is None:
            return []
        if np.shape(query) != (info.dim,):
            raise StoreError(f"query vector has shape {np.shape(query)}; the space is "
                             f"{info.dim}-d")
        rows = [r for r in state.nodes.get(space, {}).values() if r["tree"] == tree.value]
        if not rows:
            return []
        held = state.vectors[space]
        matrix = np.stack([held[r["id"]] for r in rows]).astype(np.float32)
        failures = np.array([r["outcome"] == "failure" for r in rows], dtype=bool)
        depths = np.array([r["depth"] for r in rows], dtype=np.int32)
        return [Candidate(rows[s.position]["id"], s.similarity, s.failure,
                          int(depths[s.position]), s.score)
                for s in top_k(matrix, failures, depths, np.asarray(query, dtype=np.float32),
                               penalty=penalty, k=k)]

    # -- episodes ---------------------------------------------------------------------------
    def add_episode(self, space: str, record: EpisodeRecord) -> None:
        row = episode_to_row(record)
        with self._mutation(space) as state:
            episodes = state.episodes.setdefault(space, {})
            if record.id in episodes:
                raise StoreError(f"episode {record.id!r} already in {space!r}")
            episodes[record.id] = row

    def episodes(self, space: str) -> Iterator[EpisodeRecord]:
        return iter([episode_from_row(r) for r in self._view().episodes.get(space, {}).values()])

    def count_episodes(self, space: str) -> int:
        return len(self._view().episodes.get(space, {}))

    # -- audit ------------------------------------------------------------------------------
    def audit_log(self, space: str) -> list[dict[str, Any]]:
        return [dict(e) for e in self._view().audit.get(space, [])]

    def compact(self) -> list[str]:
        """Nothing to drop: a replaced value is gone with its Python object."""
        return []

    def close(self) -> None:
        """Nothing to release (the state lives as long as the object)."""


def _log(state: _State, space: str, action: str, detail: dict[str, Any]) -> None:
    state.audit.setdefault(space, []).append(
        {"action": action, "detail": json.loads(dumps(detail)), "at": time.time()})
