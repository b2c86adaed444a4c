"""LangGraph: a ``BaseStore`` backed by deltamem (``pip install 'deltamem[langgraph]'``).

LangGraph graphs, LangMem and Deep Agents keep long-term memory in a store handed to the graph
(``graph.compile(store=...)``, ``create_deep_agent(store=...)``). :class:`DeltaMemStore` is such
a store whose items are *experiences*::

    from deltamem.integrations.langgraph import DeltaMemStore

    store = DeltaMemStore("memory.db")
    store.put(("agent", "alice"), "run-42", {"task": "heat the apple", "env": "a kitchen",
                                             "success": True, "steps": [...]})
    hits = store.search(("agent", "alice"), query="warm up an apple")

* **Namespaces are spaces.** ``("agent", "alice")`` is the space ``lg.agent.alice`` of the
  database (labels escaped to the space alphabet, reversibly); spaces never see each other.
  ``search`` and ``list_namespaces`` cover every space under a prefix.
* **put** learns a finished episode: deltamem's episode JSON (``task``, ``steps``, ``success``,
  ``env``, ``score``, ``meta``) or an OpenAI-style transcript (``messages`` with ``success``,
  optional ``task``, ``env``). Anything else is refused with a ``ValueError`` naming the fields
  (pair this store with ``InMemoryStore`` or ``PostgresStore`` for arbitrary values). A second
  put under the same key learns that episode too (experience accumulates); ``get`` then returns
  the latest one.
* **get** of a put key returns the episode as learned (``Item.value``); get of a node id
  (``t-...``, ``e-...``, as ``search`` returns them) returns that experience.
* **search** with ``query`` recalls: the best skills (task tree) and scene knowledge (environment
  tree) for the text, ranked by score (the failure penalty included), each an item whose key is
  the node id and whose value holds the composed ``experience``, ``context`` (the text to put in
  a prompt), the node's ``outcome`` and counters. Without ``query`` it lists the episodes put.
  ``filter`` keeps items whose value matches, as in LangGraph's ``InMemoryStore``: equality
  (nested objects key by key), or the operators ``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``,
  ``$lte``. Listing reads the episode log once (linear in the episodes), and a search reads
  the matched nodes in one batch.
* **delete** of a put key forgets what that episode taught: the nodes learned from it, with
  their subtrees (a delta means nothing without its parent); the deletion is recorded in the
  space's episode log, and ``get`` then returns None. Delete of a node id deletes that subtree.

Sync and async: :meth:`batch` runs the operations in order; :meth:`abatch` runs the same in a
worker thread, so async graphs never block their event loop.
"""

from __future__ import annotations

from deltamem._util.extras import require

require("langgraph", "deltamem.integrations.langgraph")

# ruff: noqa: E402  (the extra check above must run before these imports)
import asyncio
import contextlib
import operator
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from deltamem.config import Settings
from deltamem.core.model import Experience, Node
from deltamem.core.render import render_experience
from deltamem.embed.base import Embedder
from deltamem.engine.memory import DeltaMem
from deltamem.errors import DeltaMemError, NodeNotFound
from deltamem.extract.base import Extractor
from deltamem.formats.episodes import episode_from_dict
from deltamem.formats.transcripts import episode_from_messages
from deltamem.store import open_store
from deltamem.store.base import EpisodeRecord, Store

PREFIX = "lg"
KEY_FIELD = "langgraph_key"  # in an episode's meta: the key it was put under
DELETED_FIELD = "langgraph_deleted"
_NODE_ID = re.compile(r"^[te]-[0-9a-f]{16}$")
_PLAIN = re.compile(r"[A-Za-z0-9-]")
_MAX_SPACE = 64


def space_for(namespace: tuple[str, ...]) -> str:
    """The deltamem space of a LangGraph namespace: ``lg.`` then the labels joined by ``.``,
    each character outside ``[A-Za-z0-9-]`` written ``_xx`` (its UTF-8 bytes in hex)."""
    if not namespace or any(not isinstance(label, str) or not label for label in namespace):
        raise InvalidNamespaceError(f"namespace {namespace!r}: labels must be non-empty strings")
    labels = ["".join(c if _PLAIN.fullmatch(c) else "".join(f"_{b:02x}" for b in c.encode())
                      for c in label) for label in namespace]
    space = ".".join([PREFIX, *labels])
    if len(space) > _MAX_SPACE:
        raise InvalidNamespaceError(f"namespace {namespace!r} is too long for a deltamem space "
                                    f"({len(space)} > {_MAX_SPACE} characters once escaped)")
    return space


def namespace_for(space: str) -> tuple[str, ...] | None:
    """The namespace a space stands for, or None for a space this store did not name."""
    head, _, rest = space.partition(".")
    if head != PREFIX or not rest:
        return None
    out = []
    for label in rest.split("."):
        raw = bytearray()
        i = 0
        try:
            while i < len(label):
                if label[i] == "_":
                    raw += bytes.fromhex(label[i + 1:i + 3])
                    i += 3
                else:
                    raw += label[i].encode()
                    i += 1
            out.append(raw.decode())
        except ValueError:  # not an escape this store writes: a space named by hand
            return None
    return tuple(out)


class DeltaMemStore(BaseStore):
    """A LangGraph store whose items are experiences learned by deltamem (see the module docs).

    Args:
        db: a database (SQLite path, ``sqlite:PATH``, ``postgresql://...``) or an open Store.
        embedder: an :class:`Embedder` or a spec (``"minilm"``, the default).
        extractor: ``"trace"`` (no model) or an :class:`Extractor`.
        settings: thresholds and constants (``Settings.from_env()`` by default).
    """

    __slots__ = ("_store", "_embedder", "_extractor", "_settings", "_mems", "_lock", "_owned")

    def __init__(self, db: str | Path | Store = "deltamem.db", *,
                 embedder: str | Embedder | None = None, extractor: str | Extractor = "trace",
                 settings: Settings | None = None) -> None:
        from deltamem.embed import make_embedder
        from deltamem.extract import make_extractor

        self._settings = settings or Settings.from_env()
        self._embedder = (embedder if isinstance(embedder, Embedder)
                          else make_embedder(embedder or self._settings.embedder))
        self._extractor = make_extractor(extractor)
        self._owned = isinstance(db, str | Path)
        self._store: Store = open_store(str(db)) if isinstance(db, str | Path) else db
        self._mems: dict[str, DeltaMem] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        """Close the database (when this store opened it)."""
        if self._owned:
            self._store.close()

    def __enter__(self) -> DeltaMemStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def memory(self, namespace: tuple[str, ...]) -> DeltaMem:
        """The deltamem facade of one namespace (its space), for anything the store API lacks
        (``record_outcome``, ``consolidate``, ``export``...)."""
        space = space_for(namespace)
        with self._lock:
            mem = self._mems.get(space)
            if mem is None:
                mem = DeltaMem(self._store, self._embedder, self._extractor, space=space,
                               settings=self._settings)
                self._mems[space] = mem
            return mem

    # -- the two entry points LangGraph calls -----------------------------------------------
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations in order; one result per operation."""
        return [self._run(op) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` in a worker thread."""
        return await asyncio.to_thread(self.batch, list(ops))

    def _run(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            return self._get(op.namespace, op.key)
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, PutOp):
            if op.value is None:
                self._delete(op.namespace, op.key)
            else:
                self._put(op.namespace, op.key, op.value)
            return None
        if isinstance(op, ListNamespacesOp):
            return self._list_namespaces(op)
        raise ValueError(f"unknown store operation {type(op).__name__}")

    # -- operations --------------------------------------------------------------------------
    def _put(self, namespace: tuple[str, ...], key: str, value: Mapping[str, Any]) -> None:
        mem = self.memory(namespace)
        if not isinstance(value, Mapping):
            raise ValueError(f"a DeltaMemStore value is an episode (a dict), not "
                             f"{type(value).__name__}")
        meta = {**(value.get("meta") or {}), KEY_FIELD: key}
        try:
            if "messages" in value and "steps" not in value:
                episode = episode_from_messages(
                    value["messages"], success=bool(value.get("success", False)),
                    task=value.get("task"), env=str(value.get("env", "")),
                    score=value.get("score"), meta=meta)
            else:
                episode = episode_from_dict({**value, "meta": meta})
        except DeltaMemError as exc:
            raise ValueError(f"a DeltaMemStore value is an episode ({{'task', 'steps' or "
                             f"'messages', 'success', 'env', 'score', 'meta'}}): {exc}") from exc
        mem.learn(episode)

    def _get(self, namespace: tuple[str, ...], key: str) -> Item | None:
        mem = self.memory(namespace)
        if not mem.exists:
            return None
        if _NODE_ID.match(key):
            found = mem.experiences([key]).get(key)
            return None if found is None else _experience_item(namespace, *found, None)
        record = _latest(mem, key)
        return None if record is None else _episode_item(namespace, key, record)

    def _delete(self, namespace: tuple[str, ...], key: str) -> None:
        mem = self.memory(namespace)
        if not mem.exists:
            return
        if _NODE_ID.match(key):
            with contextlib.suppress(NodeNotFound):
                mem.delete(key)
            return
        taught = [r.id for r in mem.episodes() if r.meta.get(KEY_FIELD) == key]
        if taught:
            mem.unlearn(taught, note={KEY_FIELD: key, DELETED_FIELD: True})

    def _search(self, op: SearchOp) -> list[SearchItem]:
        found: list[SearchItem] = []
        for namespace, mem in self._spaces(op.namespace_prefix):
            if op.query:
                found += self._recalled(mem, namespace, op.query, op.limit + op.offset)
            else:
                found += [SearchItem(namespace, item.key, item.value, item.created_at,
                                     item.updated_at)
                          for item in _episode_items(mem, namespace)]
        if op.filter:
            found = [item for item in found if _matches(item.value, op.filter)]
        if op.query:
            found.sort(key=lambda item: -(item.score or 0.0))
        else:
            found.sort(key=lambda item: item.updated_at, reverse=True)
        return found[op.offset:op.offset + op.limit]

    def _recalled(self, mem: DeltaMem, namespace: tuple[str, ...], query: str,
                  k: int) -> list[SearchItem]:
        recall = mem.recall(task=query, env=query, top_k=k)
        candidates = [c for r in (recall.task, recall.env) for c in r.candidates]
        found = mem.experiences([c.id for c in candidates])  # one batch read
        items: list[SearchItem] = []
        for candidate in candidates:
            if candidate.id not in found:
                continue
            node, experience = found[candidate.id]
            item = _experience_item(namespace, node, experience, candidate.score)
            items.append(SearchItem(namespace, item.key, item.value, item.created_at,
                                    item.updated_at, score=candidate.score))
        return items

    def _spaces(self, prefix: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], DeltaMem]]:
        for info in self._store.spaces():
            namespace = namespace_for(info.space)
            if namespace is not None and namespace[:len(prefix)] == tuple(prefix):
                yield namespace, self.memory(namespace)

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        names: set[tuple[str, ...]] = set()
        for info in self._store.spaces():
            namespace = namespace_for(info.space)
            if namespace is None:
                continue
            if all(_condition(c.match_type, tuple(c.path), namespace)
                   for c in op.match_conditions or ()):
                names.add(namespace[:op.max_depth] if op.max_depth else namespace)
        return sorted(names)[op.offset:op.offset + op.limit]


def _latest_by_key(mem: DeltaMem, key: str | None = None) -> dict[str, EpisodeRecord]:
    """The latest episode put under each key (or under ``key`` only), in one pass over the
    episode log; a key whose latest record is a deletion is left out."""
    latest: dict[str, EpisodeRecord] = {}
    for record in mem.episodes():
        put = record.meta.get(KEY_FIELD)
        if isinstance(put, str) and (key is None or put == key) and (
                put not in latest or record.created_at >= latest[put].created_at):
            latest[put] = record
    return {k: r for k, r in latest.items() if not r.meta.get(DELETED_FIELD)}


def _latest(mem: DeltaMem, key: str) -> EpisodeRecord | None:
    return _latest_by_key(mem, key).get(key)


def _episode_items(mem: DeltaMem, namespace: tuple[str, ...]) -> list[Item]:
    return [_episode_item(namespace, key, record)
            for key, record in _latest_by_key(mem).items()]


def _experience_item(namespace: tuple[str, ...], node: Node, experience: Experience,
                     score: float | None) -> Item:
    value: dict[str, Any] = {
        "kind": "experience", "tree": node.tree.value, "node": node.id, "key": node.key,
        "type": experience.TYPE, "experience": _experience_dict(experience),
        "context": render_experience(experience), "outcome": node.outcome.value,
        "hits": node.hits, "successes": node.successes, "failures": node.failures,
        "depth": node.depth, "parent": node.parent_id}
    if score is not None:
        value["score"] = score
    when = _when(node.created_at)
    return Item(value=value, key=node.id, namespace=namespace, created_at=when,
                updated_at=when)


def _episode_item(namespace: tuple[str, ...], key: str, record: EpisodeRecord) -> Item:
    meta = {k: v for k, v in record.meta.items() if k != KEY_FIELD}
    value: dict[str, Any] = {"task": record.task, "env": record.env, "success": record.success,
                             "steps": record.steps}
    if record.score is not None:
        value["score"] = record.score
    if meta:
        value["meta"] = meta
    when = _when(record.created_at)
    return Item(value=value, key=key, namespace=namespace, created_at=when, updated_at=when)


def _experience_dict(experience: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in (*experience.SCALARS, *experience.LISTS):
        value = getattr(experience, name)
        out[name] = list(value) if isinstance(value, tuple) else value
    return out


def _when(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, tz=UTC)


def _matches(value: dict[str, Any], wanted: dict[str, Any]) -> bool:
    """Whether an item's value passes a search filter, as LangGraph's ``InMemoryStore`` judges
    it: equality, nested objects compared key by key, lists element by element, and the
    operators ``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte`` (numbers compared as
    floats; a missing or non-numeric value fails a comparison rather than raising)."""
    return all(_compare(value.get(k), v) for k, v in wanted.items())


def _compare(value: Any, wanted: Any) -> bool:
    if isinstance(wanted, dict):
        if any(str(k).startswith("$") for k in wanted):
            return all(_operator(value, op, operand) for op, operand in wanted.items())
        return isinstance(value, dict) and all(_compare(value.get(k), v)
                                               for k, v in wanted.items())
    if isinstance(wanted, list | tuple):
        return (isinstance(value, list | tuple) and len(value) == len(wanted)
                and all(_compare(a, b) for a, b in zip(value, wanted, strict=True)))
    return bool(value == wanted)


_ORDER: dict[str, Callable[[float, float], bool]] = {
    "$gt": operator.gt, "$gte": operator.ge, "$lt": operator.lt, "$lte": operator.le}


def _operator(value: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return bool(value == operand)
    if op == "$ne":
        return bool(value != operand)
    if op not in _ORDER:
        raise ValueError(f"Unsupported operator: {op} (use $eq, $ne, $gt, $gte, $lt, $lte)")
    try:
        return _ORDER[op](float(value), float(operand))
    except (TypeError, ValueError):
        return False


def _condition(kind: str, path: tuple[str, ...], namespace: tuple[str, ...]) -> bool:
    if len(path) > len(namespace):
        return False
    part = namespace[:len(path)] if kind == "prefix" else namespace[len(namespace) - len(path):]
    return all(p in ("*", n) for p, n in zip(path, part, strict=True))


__all__ = ["DeltaMemStore", "namespace_for", "space_for"]
