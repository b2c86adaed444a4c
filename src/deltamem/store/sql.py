"""What both SQL backends do the same way, written once: :class:`SQLStore`.

A backend (:mod:`.sqlite`, :mod:`.postgres`) supplies five things: its SQL module (the same
statement names in :mod:`._sql_sqlite` and :mod:`._sql_postgres`), the connection a context
reads through, the write transaction (with its lock), how a node row is sent, and how vector
columns come back. Everything else -- spaces and their embedder check, nodes, counters,
deletions and their audit log, episodes, API key rows, schema versions and the exact scan over
per-process indexes -- lives here, so a store fix lands once.

The scan: each process keeps an exact numpy index per (space, tree) holding committed rows
only, and catches up before every scan by reading the rows after its *position*. A backend's
``SPACE_STATE`` says where the newest committed rows are, in an order rows commit in (SQLite:
``seq``, one writer at a time; PostgreSQL: the space's ``revision``). A block's own uncommitted
nodes are scanned apart and merged in; a block that deleted nodes scans a private snapshot.
Deleting nodes bumps the space's ``generation`` so that every process rebuilds. (Past
``Settings.ann_from`` rows a tree's index may take its candidates from a faiss IVF index, still
re-scored exactly: ``store/ann.py``.)
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from abc import abstractmethod
from collections.abc import Hashable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, replace
from types import ModuleType
from typing import Any, ClassVar

import numpy as np

from deltamem._util.jsonsafe import dumps, text_problem
from deltamem.core.model import Experience, Node, Tree
from deltamem.core.tree import chains_from
from deltamem.errors import EmbedderMismatch, StoreError
from deltamem.store import migrations
from deltamem.store.base import (
    Candidate,
    EpisodeRecord,
    Footprint,
    SpaceInfo,
    Store,
    Vector,
    check_vector,
)
from deltamem.store.cache import IndexCache, NodeCache, TreeIndex, merge
from deltamem.store.integrity import NORM_TOLERANCE
from deltamem.store.keys import SQLKeyTable
from deltamem.store.rows import (
    EPISODE_COLUMNS,
    NODE_COLUMNS,
    episode_from_row,
    episode_to_row,
    history_of,
    node_from_row,
    node_to_row,
    retired_record,
)
from deltamem.store.texts import node_texts, referenced

Conn = Any  # a DB-API connection: sqlite3.Connection or psycopg.Connection


@dataclass(slots=True)
class Block:
    """The write block open in the current thread or context."""

    space: str
    conn: Conn
    base: int = 0  # index position of the last committed row when the block first added a node
    dim: int = 0
    added: bool = False  # wrote nodes: its scans merge its own rows with the committed ones
    deleted: bool = False  # deleted nodes: its scans use a private snapshot


class SQLStore(Store):
    """A :class:`~deltamem.store.base.Store` over SQL (see the module docstring)."""

    sql: ClassVar[ModuleType]  # the backend's SQL statements
    integrity_errors: ClassVar[tuple[type[Exception], ...]]  # a duplicate id raises these
    url: str

    def __init__(self, url: str):
        self.url = url
        self._index_lock = threading.Lock()
        self._indexes = IndexCache()
        self._node_cache = NodeCache()  # decoded nodes by the rows they came from (_nodes)
        # Texts by space and id (store/texts.py): a text's id never changes its meaning.
        self._texts: dict[str, dict[int, str]] = {}

    # -- what each backend implements -------------------------------------------------------
    @abstractmethod
    def _read(self) -> AbstractContextManager[Conn]:
        """The connection this context runs statements on: the open block's own inside a block.

        Database errors raised inside become :class:`StoreError`.
        """

    @abstractmethod
    def _block(self) -> Block | None:
        """The write block open in this thread or context, if any."""

    @abstractmethod
    def _transaction(self, space: str) -> AbstractContextManager[Block]:
        """Begin a transaction holding ``space``'s write lock, as this context's block;
        commit on exit, roll back on an exception."""

    @abstractmethod
    def _insert_node(self, block: Block, values: tuple[Any, ...], vector: Vector) -> None:
        """Send one ``INSERT_NODE`` (``values`` in ``NODE_COLUMNS`` order); a duplicate id is a
        ``StoreError``, at the latest when the block ends."""

    @abstractmethod
    def _vector_rows(self, conn: Conn, sql: str,
                     params: Sequence[Any]) -> Iterable[Sequence[Any]]:
        """Rows of a query whose last column is a vector, that column as a numpy array."""

    @abstractmethod
    def close(self) -> None: ...

    def _fresh(self, conn: Conn) -> bool:
        """Whether a scan on ``conn`` may use the space states remembered for it: a backend that
        can tell cheaply that nothing changed since its last look says True after dropping what
        may be stale. Here: never (every scan asks the database)."""
        return False

    def _state(self, conn: Conn, space: str) -> Sequence[Any] | None:
        """The space's ``SPACE_STATE`` row (generation, position, dim) as ``conn`` sees it."""
        row: Sequence[Any] | None = conn.execute(self.sql.SPACE_STATE, (space,)).fetchone()
        return row

    # -- schema -----------------------------------------------------------------------------
    def schema_version(self) -> int:
        with self._read() as conn:
            return migrations.version(conn, self.sql)

    # -- spaces -----------------------------------------------------------------------------
    def ensure_space(self, space: str, embedder: str, dim: int) -> SpaceInfo:
        for what, text in (("space name", space), ("embedder name", embedder)):
            problem = text_problem(text)
            if problem:
                raise StoreError(f"{what} {text!r} {problem}")
        info = self._space(space)
        if info is None:
            with self._mutation(space), self._read() as conn:
                conn.execute(self.sql.INSERT_SPACE, (space, embedder, dim, time.time()))
            info = self._space(space)
            assert info is not None
        if (info.embedder, info.dim) != (embedder, dim):
            raise EmbedderMismatch(
                f"space {space!r} was built with embedder {info.embedder!r} ({info.dim}-d); "
                f"open it with embedder={info.embedder!r}, or use another space for {embedder!r}"
            )
        return info

    def _space(self, space: str) -> SpaceInfo | None:
        with self._read() as conn:
            row = conn.execute(self.sql.SELECT_SPACE, (space,)).fetchone()
        return None if row is None else SpaceInfo(row[0], row[1], int(row[2]))

    def spaces(self) -> list[SpaceInfo]:
        with self._read() as conn:
            rows = conn.execute(self.sql.SELECT_SPACES).fetchall()
        return [SpaceInfo(r[0], r[1], int(r[2])) for r in rows]

    # -- transactions -----------------------------------------------------------------------
    @contextmanager
    def write(self, space: str) -> Iterator[None]:
        if self._block() is not None:
            raise StoreError("write blocks do not nest")
        with self._transaction(space):
            yield

    @contextmanager
    def _mutation(self, space: str) -> Iterator[Block]:
        """The open block for ``space``, or a one-statement block when none is open."""
        block = self._block()
        if block is None:
            with self.write(space):
                current = self._block()
                assert current is not None
                yield current
        elif block.space != space:
            raise StoreError(f"cannot change space {space!r} inside a write block for "
                             f"{block.space!r}")
        else:
            yield block

    # -- nodes ------------------------------------------------------------------------------
    def add_node(self, space: str, node: Node, vector: Vector) -> None:
        row = node_to_row(node)  # refuses what no backend can hold, before anything is kept
        texts = node_texts(node)
        with self._mutation(space) as block:
            if not block.added:
                with self._read() as conn:
                    first = conn.execute(self.sql.BEGIN_NODES, (space,)).fetchone()
                if first is None:
                    raise StoreError(f"unknown space {space!r}: call ensure_space first")
                block.base, block.dim, block.added = int(first[0]), int(first[1]), True
            check_vector(space, node.id, vector, block.dim)
            if texts:
                row = node_to_row(node, self._intern(space, texts))
            self._insert_node(block, tuple(row[c] for c in NODE_COLUMNS), vector)

    def _intern(self, space: str, texts: list[str]) -> dict[str, int]:
        """The ids of ``texts`` in ``space`` (inside its block), adding those it lacks."""
        array = json.dumps(texts)
        with self._read() as conn:
            conn.execute(self.sql.INSERT_TEXTS, (space, array))
            rows = conn.execute(self.sql.SELECT_TEXT_IDS, (space, array)).fetchall()
        wanted = set(texts)
        return {r[1]: int(r[0]) for r in rows if r[1] in wanted}

    def _text_map(self, space: str, rows: Sequence[Sequence[Any]]) -> dict[int, str]:
        """The texts the node ``rows`` of ``space`` refer to, read once per process."""
        known = self._texts.setdefault(space, {})
        missing = referenced((r[_CONTENT], r[_PATCH]) for r in rows).difference(known)
        if missing:
            with self._read() as conn:
                found = conn.execute(self.sql.SELECT_TEXTS,
                                     (space, json.dumps(sorted(missing)))).fetchall()
            known.update((int(i), t) for i, t in found)
        return known

    def get_nodes(self, space: str, node_ids: Sequence[str]) -> dict[str, Node]:
        ids = [i for i in dict.fromkeys(node_ids) if _possible(i)]
        if not ids:
            return {}
        found = {n.id: n for n in self._nodes(self.sql.SELECT_NODES_BY_ID,
                                              (space, json.dumps(ids)), space)}
        return {i: found[i] for i in ids if i in found}

    def metas(self, space: str, node_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        ids = [i for i in dict.fromkeys(node_ids) if _possible(i)]
        if not ids:
            return {}
        with self._read() as conn:
            rows = conn.execute(self.sql.SELECT_METAS_BY_ID, (space, json.dumps(ids))).fetchall()
        found = {r[0]: json.loads(r[1]) for r in rows}
        return {i: found[i] for i in ids if i in found}

    def chains(self, space: str, node_ids: Sequence[str]) -> dict[str, list[Node]]:
        ids = [i for i in dict.fromkeys(node_ids) if _possible(i)]
        if not ids:
            return {}
        nodes = self._nodes(self.sql.CHAINS, {"space": space, "ids": json.dumps(ids)}, space)
        return chains_from(nodes, ids)

    def children(self, space: str, node_id: str) -> list[Node]:
        if not _possible(node_id):
            return []
        return self._nodes(self.sql.SELECT_CHILDREN, (space, node_id), space, cached=False)

    def nodes(self, space: str, tree: Tree | None = None) -> Iterator[Node]:
        if tree is None:
            return iter(self._nodes(self.sql.SELECT_NODES, (space,), space, cached=False))
        return iter(self._nodes(self.sql.SELECT_TREE_NODES, (space, tree.value), space,
                                cached=False))

    def _nodes(self, sql: str, params: Sequence[Any] | dict[str, Any], space: str, *,
               cached: bool = True) -> list[Node]:
        """The nodes of a query's rows in ``space``; with ``cached``, decoded through the node
        cache: a row equal, but for its counters, to the one a cached node was decoded from
        reuses that node (with the row's counters), so nothing can be stale whoever changed
        the database; only rows seen the first time or changed are decoded."""
        with self._read() as conn:
            rows = conn.execute(sql, params).fetchall()
        if not cached or not self._node_cache.size:
            return self._decode(space, rows)
        cache, epoch = self._node_cache, self._node_cache.epoch
        out: list[Node | None] = []
        fresh: list[tuple[Any, Node]] = []
        undecoded: list[tuple[int, Any, Sequence[Any]]] = []
        for row in rows:
            fixed = tuple(row[i] for i in _FIXED)
            item = cache.get(space, row[_ID])
            if item is not None and item[0] == fixed:
                node = item[1]
                counters = (int(row[_HITS]), int(row[_SUCCESSES]), int(row[_FAILURES]),
                            bool(row[_CONSOLIDATED]))
                if (node.hits, node.successes, node.failures, node.consolidated) != counters:
                    node = replace(node, hits=counters[0], successes=counters[1],
                                   failures=counters[2], consolidated=counters[3])
                    fresh.append((fixed, node))
                out.append(node)
            else:
                undecoded.append((len(out), fixed, row))
                out.append(None)
        if undecoded:
            decoded = self._decode(space, [row for *_, row in undecoded])
            for (at, fixed, _), node in zip(undecoded, decoded, strict=True):
                out[at] = node
                fresh.append((fixed, node))
        if fresh:
            cache.put(space, fresh, epoch)
        return [node for node in out if node is not None]

    def _decode(self, space: str, rows: Sequence[Sequence[Any]]) -> list[Node]:
        texts = self._text_map(space, rows)
        return [node_from_row(dict(zip(NODE_COLUMNS, r, strict=True)), texts) for r in rows]

    def vectors(self, space: str, node_ids: list[str]) -> dict[str, Vector]:
        node_ids = [i for i in node_ids if _possible(i)]
        if not node_ids:
            return {}
        with self._read() as conn:
            rows = list(self._vector_rows(conn, self.sql.SELECT_VECTORS,
                                          (space, json.dumps(node_ids))))
        return {r[0]: _width(r[2], int(r[1])) for r in rows}

    def bump(self, space: str, node_id: str, *, hits: int = 0, successes: int = 0,
             failures: int = 0) -> None:
        with self._mutation(space), self._read() as conn:
            conn.execute(self.sql.BUMP_COUNTERS, (hits, successes, failures, space, node_id))

    def mark_consolidated(self, space: str, node_id: str) -> None:
        with self._mutation(space), self._read() as conn:
            conn.execute(self.sql.MARK_CONSOLIDATED, (space, node_id))

    def delete_subtree(self, space: str, node_id: str) -> list[str]:
        if not _possible(node_id):
            return []
        with self._mutation(space) as block, self._read() as conn:
            ids = [r[0] for r in conn.execute(self.sql.SUBTREE_IDS,
                                              {"space": space, "id": node_id}).fetchall()]
            conn.execute(self.sql.DELETE_NODES, (space, json.dumps(ids)))
            self._drop_texts(conn, space)
            history = conn.execute(self.sql.SELECT_HISTORY, (space,)).fetchall()
            drop = history_of(((int(r[0]), json.loads(r[1])) for r in history), ids)
            if drop:
                conn.execute(self.sql.DELETE_AUDIT_ROWS, (space, json.dumps(drop)))
            self._deleted(block, conn, "delete_subtree", {"root": node_id, "deleted": ids})
        return ids

    def _drop_texts(self, conn: Conn, space: str) -> None:
        """Delete the texts no node row of ``space`` refers to any more."""
        keep = referenced(conn.execute(self.sql.SELECT_TEXT_COLUMNS, (space,)).fetchall())
        conn.execute(self.sql.DELETE_TEXTS_EXCEPT, (space, json.dumps(sorted(keep))))

    def retire(self, space: str, into: str, retired: Sequence[tuple[Node, Experience]],
               moved: Sequence[Node]) -> None:
        records = [retired_record(node, exp) for node, exp in retired]
        ids = [node.id for node, _ in retired]
        with self._mutation(space) as block:
            rows = []
            for node in moved:
                texts = node_texts(node)
                rows.append(node_to_row(node, self._intern(space, texts) if texts else None))
            with self._read() as conn:
                conn.execute(self.sql.DELETE_NODES, (space, json.dumps(ids)))
                for row in rows:
                    conn.execute(self.sql.MOVE_NODE, (row["parent_id"], row["depth"],
                                                      row["patch"], space, row["id"]))
                self._drop_texts(conn, space)
                self._deleted(block, conn, "retire", {"into": into, "nodes": records})

    def forget_space(self, space: str) -> int:
        with self._mutation(space) as block, self._read() as conn:
            count = int(conn.execute(self.sql.DELETE_SPACE_NODES, (space,)).rowcount)
            conn.execute(self.sql.DELETE_SPACE_EPISODES, (space,))
            conn.execute(self.sql.DELETE_SPACE_TEXTS, (space,))
            conn.execute(self.sql.DELETE_SPACE_HISTORY, (space,))
            self._deleted(block, conn, "forget_space", {"nodes": count})
        return count

    def footprint(self, space: str) -> Footprint:
        with self._read() as conn:
            trees = {r[0]: int(r[1]) for r in
                     conn.execute(self.sql.NODES_FOOTPRINT, (space,)).fetchall()}
            texts = conn.execute(self.sql.TEXTS_FOOTPRINT, (space,)).fetchone()
        return Footprint(task=trees.get(Tree.TASK.value, 0), env=trees.get(Tree.ENV.value, 0),
                         texts=int(texts[0]), text_count=int(texts[1]))

    def _deleted(self, block: Block, conn: Conn, action: str, detail: dict[str, Any]) -> None:
        """Make every process rebuild its index of the space, and log the deletion (or the
        retirement)."""
        conn.execute(self.sql.BUMP_GENERATION, (block.space,))
        self._node_cache.clear()
        self._texts.clear()  # nothing deleted stays in this process (a scrub deletes to redact)
        block.deleted = True
        conn.execute(self.sql.INSERT_AUDIT, (block.space, action, dumps(detail), time.time()))

    def audit_log(self, space: str) -> list[dict[str, Any]]:
        """The space's deletions, oldest first: ``{"action", "detail", "at"}`` dicts."""
        with self._read() as conn:
            rows = conn.execute(self.sql.SELECT_AUDIT, (space,)).fetchall()
        return [{"action": r[0], "detail": json.loads(r[1]), "at": float(r[2])} for r in rows]

    def changes(self, space: str) -> Hashable | None:
        """(generation, position) of the space as this context sees it: the position is the
        newest committed row of the database (any space: a cautious token), the generation
        counts deletions."""
        with self._read() as conn:
            state = self._state(conn, space)
        return None if state is None else (int(state[0]), int(state[1]))

    # -- retrieval --------------------------------------------------------------------------
    def scan(self, space: str, tree: Tree, query: Vector, *, penalty: float, k: int = 1,
             approximate_from: int = 0) -> list[Candidate]:
        return self._scan(space, tree, query, penalty, k, approximate_from, rows=False)[0]

    def scan_vectors(self, space: str, tree: Tree, query: Vector, *, penalty: float,
                     k: int = 1, approximate_from: int = 0
                     ) -> tuple[list[Candidate], dict[str, Vector]]:
        return self._scan(space, tree, query, penalty, k, approximate_from, rows=True)

    def _scan(self, space: str, tree: Tree, query: Vector, penalty: float, k: int,
              approximate_from: int, *, rows: bool
              ) -> tuple[list[Candidate], dict[str, Vector]]:
        """:meth:`scan`, and with ``rows`` the returned nodes' vectors from the indexes that
        scanned them (:meth:`VectorIndex.scan_vectors`)."""
        block = self._block()
        with self._read() as conn:
            if block is None or block.space != space or not (block.added or block.deleted):
                return self._scan_shared(conn, space, tree, query, penalty, k, upto=None,
                                         approximate_from=approximate_from, rows=rows)
            state = conn.execute(self.sql.SPACE_STATE, (space,)).fetchone()
            assert state is not None
            position, dim = int(state[1]), int(state[2])
            if block.deleted:  # the shared index still holds what this block deleted
                private = TreeIndex(dim)
                self._catch_up(conn, private, space, tree, upto=position)
                return _scanned(private, query, penalty, k, 0, rows)
            committed, theirs = self._scan_shared(conn, space, tree, query, penalty, k,
                                                  upto=block.base,
                                                  approximate_from=approximate_from, rows=rows)
            own = TreeIndex(dim)
            own.position = block.base
            self._catch_up(conn, own, space, tree, upto=position)
            mine, vectors = _scanned(own, query, penalty, k, 0, rows)
            found = merge(mine, committed, k)
            vectors.update(theirs)
            return found, {c.id: vectors[c.id] for c in found} if rows else {}

    def _scan_shared(self, conn: Conn, space: str, tree: Tree, query: Vector, penalty: float,
                     k: int, *, upto: int | None, approximate_from: int = 0,
                     rows: bool = False) -> tuple[list[Candidate], dict[str, Vector]]:
        """Scan the shared index of committed rows, caught up with ``conn``'s snapshot (or only
        up to position ``upto``); with ``rows``, the returned nodes' vectors too."""
        state = self._state(conn, space)
        if state is None:
            return [], {}
        generation, position, dim = int(state[0]), int(state[1]), int(state[2])
        if upto is not None:
            position = min(position, upto)
        with self._index_lock:
            key = (space, tree.value)
            index = self._indexes.get(key)
            if index is None or index.generation < generation:
                index = self._indexes.put(key, self._new_index(conn, space, tree, generation,
                                                               dim))
            # A reader whose snapshot is older than the index (generation or position) just
            # scans what the index holds: it is at least as fresh as what the reader could see.
            if index.generation == generation and position > index.position:
                self._catch_up(conn, index, space, tree, upto=position)
                self._caught_up(conn, space, tree, index)
            return _scanned(index, query, penalty, k, approximate_from, rows)

    def _new_index(self, conn: Conn, space: str, tree: Tree, generation: int,
                   dim: int) -> TreeIndex:
        """A fresh index for a (space, tree) this process has not indexed at ``generation``:
        empty here; a backend may start it from a saved snapshot it has checked is current."""
        return TreeIndex(dim, generation)

    def _caught_up(self, conn: Conn, space: str, tree: Tree, index: TreeIndex) -> None:
        """Called after the shared ``index`` appended committed rows (a backend may save it)."""
        return None

    def _catch_up(self, conn: Conn, index: TreeIndex, space: str, tree: Tree, *,
                  upto: int) -> None:
        """Append the rows at positions ``index.position < p <= upto``, in commit order."""
        rows = self._vector_rows(conn, self.sql.INDEX_ROWS,
                                 (space, tree.value, index.position, upto))
        index.extend(_sound((r[0], bool(r[1]), int(r[2]), _width(r[3], index.dim))
                            for r in rows))
        index.position = upto

    # -- episodes ---------------------------------------------------------------------------
    def add_episode(self, space: str, record: EpisodeRecord) -> None:
        row = episode_to_row(record)
        with self._mutation(space), self._read() as conn:
            try:
                conn.execute(self.sql.INSERT_EPISODE, (space, *(row[c] for c in EPISODE_COLUMNS)))
            except self.integrity_errors as exc:
                raise StoreError(f"episode {record.id!r} already in {space!r}") from exc

    def episodes(self, space: str) -> Iterator[EpisodeRecord]:
        with self._read() as conn:
            rows = conn.execute(self.sql.SELECT_EPISODES, (space,)).fetchall()
        return (episode_from_row(dict(zip(EPISODE_COLUMNS, r, strict=True))) for r in rows)

    def count_episodes(self, space: str) -> int:
        with self._read() as conn:
            row = conn.execute(self.sql.COUNT_EPISODES, (space,)).fetchone()
        return int(row[0])

    # -- API keys ---------------------------------------------------------------------------
    def keys(self) -> SQLKeyTable:
        """The API key table of this database (see :mod:`deltamem.store.keys`)."""
        return SQLKeyTable(self.sql, self._read, self._key_change)

    def _key_change(self) -> AbstractContextManager[Conn]:
        """The connection for one autocommit change of the key table (outside any block)."""
        return self._read()


_COUNTERS = ("hits", "successes", "failures", "consolidated")  # what a stored node may change
_ID, _HITS, _SUCCESSES, _FAILURES, _CONSOLIDATED = (NODE_COLUMNS.index(c)
                                                   for c in ("id", *_COUNTERS))
_CONTENT, _PATCH = NODE_COLUMNS.index("content"), NODE_COLUMNS.index("patch")
_FIXED = tuple(i for i, c in enumerate(NODE_COLUMNS) if c not in _COUNTERS)


def _possible(node_id: str) -> bool:
    """False for an id no node can have (a NUL or a lone surrogate): it is simply not found,
    on every backend alike (SQLite would cut it at the NUL and find another node, PostgreSQL
    would refuse the statement)."""
    return text_problem(node_id) is None


_SOUND_CHUNK = 4096  # rows whose norms are checked at once


def _sound(rows: Iterable[tuple[str, bool, int, Vector]]
           ) -> Iterator[tuple[str, bool, int, Vector]]:
    """The rows a scan may use: a non-finite or non-unit vector (damage already stored, which
    ``check`` reports) would poison every scan -- NaN matches nothing and breaks the order, 1e30
    wins every query -- so it is left out. Norms are checked a chunk at a time, in float64."""
    it = iter(rows)
    while chunk := list(itertools.islice(it, _SOUND_CHUNK)):
        matrix = np.stack([r[3] for r in chunk])
        squares = np.einsum("ij,ij->i", matrix, matrix, dtype=np.float64)
        ok = (squares == 0.0) | (np.abs(np.sqrt(squares) - 1.0) <= NORM_TOLERANCE)
        yield from (row for row, good in zip(chunk, ok.tolist(), strict=True) if good)


def _scanned(index: TreeIndex, query: Vector, penalty: float, k: int, approximate_from: int,
             rows: bool) -> tuple[list[Candidate], dict[str, Vector]]:
    """``index``'s scan, with the returned rows' vectors when ``rows``."""
    if rows:
        return index.scan_vectors(query, penalty=penalty, k=k, approximate_from=approximate_from)
    return index.scan(query, penalty=penalty, k=k, approximate_from=approximate_from), {}


def _width(vector: Any, dim: int) -> Vector:
    """A stored vector, refused (``StoreError``) when it is not ``dim`` wide."""
    v = np.asarray(vector, dtype=np.float32)
    if v.shape != (dim,):
        raise StoreError(f"stored vector has {v.shape[0] if v.ndim else 0} dimensions, "
                         f"expected {dim}")
    return v
