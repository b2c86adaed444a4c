"""PostgreSQL + pgvector backend: the scale-out store, same behaviour as the SQLite one.

Concurrency: ``write(space)`` is one transaction on one pooled connection, which first takes a
transaction-scoped advisory lock keyed by (schema, space). Writers of one space therefore run one
after the other, across threads and processes, and the facade's placement decisions (made inside
the block) never see a stale tree; writers of different spaces do not block each other. Reads
inside a block run on the block's connection, so they see the block's own writes.

Retrieval: vectors live in an untyped ``vector`` column (each space has its own dimension). Scans
are exact and must equal :func:`deltamem.core.scoring.top_k` bit for bit, ties included, which an
approximate HNSW index cannot promise; so, as in the SQLite store, each process keeps an exact
numpy index per (space, tree) and catches up before every scan. Catching up uses the space's
``revision``: every transaction that adds nodes bumps it once under the space's row lock and
stamps its nodes with it, so revisions are commit-ordered within a space (a sequence is not: a
transaction may commit after a later one). The shared index only ever holds committed rows; a
block's own uncommitted nodes are scanned apart and merged in, and a block that deleted nodes
scans its own private snapshot. Deletions bump ``generation`` so that every process rebuilds.
(Past ``Settings.ann_from`` rows a tree's index may take its candidates from a faiss IVF index,
still re-scored exactly: ``store/ann.py``.)
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import psycopg
from psycopg import Connection
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from deltamem.core.model import Node, Tree
from deltamem.errors import EmbedderMismatch, StoreError
from deltamem.jsonsafe import dumps
from deltamem.store import _pg_sql as q
from deltamem.store import migrations
from deltamem.store._pg_vector import register_vector_adapters
from deltamem.store.base import Candidate, EpisodeRecord, SpaceInfo, Vector, check_vector
from deltamem.store.cache import IndexCache, TreeIndex, merge
from deltamem.store.keys import PostgresKeyTable
from deltamem.store.rows import (
    EPISODE_COLUMNS,
    NODE_COLUMNS,
    episode_from_row,
    episode_to_row,
    node_from_row,
    node_to_row,
)

Conn = Connection[Any]
_BATCH = 1000  # node inserts sent per pipelined batch


@dataclass(slots=True)
class _Block:
    """State of the write block open in the current thread/context."""

    conn: Conn
    space: str
    rev: int | None = None  # this transaction's revision, taken at its first add_node
    dim: int = 0
    deleted: bool = False  # deleted nodes: its scans use a private snapshot
    # Node inserts not sent yet: they go in pipelined batches before the next statement of the
    # block (see PostgresStore.add_node), so bulk writes are not one round trip per node.
    pending: list[tuple[Any, ...]] = field(default_factory=list)


class PostgresStore:
    """The PostgreSQL + pgvector store (see the module docstring).

    Args:
        url: a libpq URL, ``postgresql://user@host:port/db``; add
            ``?options=-csearch_path%3Dmyschema,public`` to keep the tables in another schema.
        pool_size: most connections this store opens (one per concurrent write block or read).

    Raises:
        StoreError: the server cannot be reached or lacks the ``vector`` extension.
        SchemaError: the database was written by a newer deltamem.
    """

    def __init__(self, url: str, *, pool_size: int = 4, connect_timeout: float = 10.0):
        self.url = url
        self._block: ContextVar[_Block | None] = ContextVar(f"pg-block-{id(self)}", default=None)
        self._index_lock = threading.Lock()
        self._indexes = IndexCache()
        try:
            with psycopg.connect(url, autocommit=True,
                                 connect_timeout=max(1, int(connect_timeout))) as conn:
                self._schema = self._migrate(conn)
        except psycopg.Error as exc:
            raise StoreError(f"cannot open PostgreSQL store {_safe(url)}: {exc}") from exc
        self._pool: ConnectionPool[Conn] = ConnectionPool(
            url, min_size=1, max_size=max(1, pool_size), open=False, timeout=connect_timeout * 6,
            kwargs={"autocommit": True}, configure=register_vector_adapters,
            name=f"deltamem-{id(self)}",
        )
        try:
            self._pool.open(wait=True, timeout=connect_timeout)
        except Exception as exc:  # PoolTimeout, or the adapters failing to register
            self._pool.close()
            raise StoreError(f"cannot open a connection pool to {_safe(url)}: {exc}") from exc

    # -- setup ----------------------------------------------------------------------------
    def _migrate(self, conn: Conn) -> str:
        with conn.transaction():
            conn.execute(q.MIGRATE_LOCK)
            conn.execute(q.CREATE_VERSION_TABLE)
            migrations.migrate(
                int(_one(conn.execute(q.READ_VERSION).fetchone())), q.MIGRATIONS, _safe(self.url),
                execute=lambda statement: conn.execute(statement.encode()),
                record=lambda v: conn.execute(q.WRITE_VERSION, (v,)))
            return str(_one(conn.execute("SELECT current_schema()").fetchone()))

    def schema_version(self) -> int:
        with self._conn() as conn:
            return int(_one(conn.execute(q.READ_VERSION).fetchone()))

    @contextmanager
    def _conn(self) -> Iterator[Conn]:
        """The current block's connection, or a pooled one; psycopg errors become StoreError.

        In a block, pending node inserts are sent first, so every read sees them.
        """
        block = self._block.get()
        try:
            if block is not None:
                self._flush(block)
                yield block.conn
            else:
                with self._pool.connection() as conn:
                    yield conn
        except psycopg.Error as exc:
            raise StoreError(f"PostgreSQL error on {_safe(self.url)}: {exc}") from exc

    # -- spaces ---------------------------------------------------------------------------
    def ensure_space(self, space: str, embedder: str, dim: int) -> SpaceInfo:
        with self._conn() as conn:
            conn.execute(
                f"INSERT INTO spaces (space, embedder, dim, created_at) "
                f"VALUES (%s, %s, %s, {q.NOW}) ON CONFLICT (space) DO NOTHING",
                (space, embedder, dim),
            )
            row = conn.execute(
                "SELECT space, embedder, dim FROM spaces WHERE space = %s", (space,)
            ).fetchone()
        assert row is not None
        info = SpaceInfo(row[0], row[1], int(row[2]))
        if (info.embedder, info.dim) != (embedder, dim):
            raise EmbedderMismatch(
                f"space {space!r} was built with embedder {info.embedder!r} ({info.dim}-d); "
                f"open it with embedder={info.embedder!r}, or use another space for {embedder!r}"
            )
        return info

    def spaces(self) -> list[SpaceInfo]:
        with self._conn() as conn:
            rows = conn.execute("SELECT space, embedder, dim FROM spaces ORDER BY space")
            return [SpaceInfo(r[0], r[1], int(r[2])) for r in rows]

    # -- transactions -----------------------------------------------------------------------
    @contextmanager
    def write(self, space: str) -> Iterator[None]:
        if self._block.get() is not None:
            raise StoreError("write blocks do not nest")
        try:
            with self._pool.connection() as conn, conn.transaction():
                conn.execute(q.SPACE_LOCK, (f"deltamem:{self._schema}:{space}",))
                block = _Block(conn, space)
                token = self._block.set(block)
                try:
                    yield
                    self._flush(block)
                finally:
                    self._block.reset(token)
        except psycopg.Error as exc:  # the lock or the COMMIT failed (ours are mapped already)
            raise StoreError(f"write to {space!r} failed: {exc}") from exc

    @contextmanager
    def _mutation(self, space: str) -> Iterator[_Block]:
        """The open block for ``space``, or a one-statement block when none is open."""
        block = self._block.get()
        if block is None:
            with self.write(space):
                current = self._block.get()
                assert current is not None
                yield current
        elif block.space != space:
            raise StoreError(f"cannot change space {space!r} inside a write block for "
                             f"{block.space!r}")
        else:
            yield block

    # -- nodes ----------------------------------------------------------------------------
    def add_node(self, space: str, node: Node, vector: Vector) -> None:
        """Add a node (see :class:`Store`).

        Inside a block the INSERT may be sent with later ones, at the block's next statement or
        at its end; a duplicate id then raises ``StoreError`` there, still inside the block.
        """
        row = node_to_row(node)
        with self._mutation(space) as block:
            rev = self._revision(block)
            vec = np.array(vector, dtype=np.float32)  # a copy: it may be sent later
            check_vector(space, node.id, vec, block.dim)
            block.pending.append((space, *(row[c] for c in NODE_COLUMNS), rev, vec))
            if len(block.pending) >= _BATCH:
                self._flush(block)

    def _flush(self, block: _Block) -> None:
        if not block.pending:
            return
        rows, block.pending = block.pending, []
        try:
            with block.conn.cursor() as cur:
                cur.executemany(q.INSERT_NODE, rows)
        except psycopg.errors.IntegrityError as exc:
            ids = ", ".join(repr(r[1]) for r in rows[:3])
            raise StoreError(f"cannot add nodes ({ids}...) to {block.space!r}: {exc}") from exc
        except psycopg.Error as exc:
            raise StoreError(f"PostgreSQL error on {_safe(self.url)}: {exc}") from exc

    def _revision(self, block: _Block) -> int:
        """This transaction's revision of its space, bumped on first use (locks the space row)."""
        if block.rev is None:
            self._flush(block)
            row = block.conn.execute(q.BUMP_REVISION, (block.space,)).fetchone()
            if row is None:
                raise StoreError(f"unknown space {block.space!r}: call ensure_space first")
            block.rev, block.dim = int(row[0]), int(row[1])
        return block.rev

    def get_node(self, space: str, node_id: str) -> Node | None:
        with self._conn() as conn:
            row = conn.cursor(row_factory=dict_row).execute(
                f"{q.NODE_SELECT} WHERE space = %s AND id = %s", (space, node_id)
            ).fetchone()
        return None if row is None else node_from_row(row)

    def chain(self, space: str, node_id: str) -> list[Node]:
        with self._conn() as conn:
            rows = conn.cursor(row_factory=dict_row).execute(
                q.CHAIN, {"space": space, "id": node_id}
            ).fetchall()
        return [node_from_row(r) for r in rows]

    def children(self, space: str, node_id: str) -> list[Node]:
        with self._conn() as conn:
            rows = conn.cursor(row_factory=dict_row).execute(
                f"{q.NODE_SELECT} WHERE space = %s AND parent_id = %s ORDER BY rev, seq",
                (space, node_id),
            ).fetchall()
        return [node_from_row(r) for r in rows]

    def nodes(self, space: str, tree: Tree | None = None) -> Iterator[Node]:
        with self._conn() as conn:
            cur = conn.cursor(row_factory=dict_row)
            if tree is None:
                cur.execute(f"{q.NODE_SELECT} WHERE space = %s ORDER BY rev, seq", (space,))
            else:
                cur.execute(f"{q.NODE_SELECT} WHERE space = %s AND tree = %s ORDER BY rev, seq",
                            (space, tree.value))
            rows = cur.fetchall()
        return (node_from_row(r) for r in rows)

    def vector(self, space: str, node_id: str) -> Vector | None:
        with self._conn() as conn:
            row = conn.execute(
                "SELECT embedding FROM nodes WHERE space = %s AND id = %s", (space, node_id),
                binary=True,
            ).fetchone()
        return None if row is None else row[0]

    def vectors(self, space: str, node_ids: list[str]) -> dict[str, Vector]:
        """Vectors of many nodes in one query (bulk reads such as exports and migrations)."""
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT id, embedding FROM nodes WHERE space = %s AND id = ANY(%s)",
                (space, node_ids), binary=True,
            ).fetchall()
        return {r[0]: r[1] for r in rows}

    def bump(self, space: str, node_id: str, *, hits: int = 0, successes: int = 0,
             failures: int = 0) -> None:
        with self._mutation(space), self._conn() as conn:
            conn.execute(
                "UPDATE nodes SET hits = hits + %s, successes = successes + %s, "
                "failures = failures + %s WHERE space = %s AND id = %s",
                (hits, successes, failures, space, node_id),
            )

    def mark_consolidated(self, space: str, node_id: str) -> None:
        with self._mutation(space), self._conn() as conn:
            conn.execute("UPDATE nodes SET consolidated = TRUE WHERE space = %s AND id = %s",
                         (space, node_id))

    def delete_subtree(self, space: str, node_id: str) -> list[str]:
        with self._mutation(space) as block, self._conn() as conn:
            ids = [r[0] for r in conn.execute(q.SUBTREE_IDS, {"space": space, "id": node_id})]
            conn.execute("DELETE FROM nodes WHERE space = %s AND id = ANY(%s)", (space, ids))
            self._deleted(block)
            self._audit(conn, space, "delete_subtree", {"root": node_id, "deleted": ids})
        return ids

    def forget_space(self, space: str) -> int:
        with self._mutation(space) as block, self._conn() as conn:
            count = conn.execute("DELETE FROM nodes WHERE space = %s", (space,)).rowcount
            conn.execute("DELETE FROM episodes WHERE space = %s", (space,))
            self._deleted(block)
            self._audit(conn, space, "forget_space", {"nodes": count})
        return int(count)

    def _deleted(self, block: _Block) -> None:
        block.conn.execute(q.BUMP_GENERATION, (block.space,))
        block.deleted = True

    def _audit(self, conn: Conn, space: str, action: str, detail: dict[str, Any]) -> None:
        conn.execute(
            f"INSERT INTO audit (space, action, detail, at) VALUES (%s, %s, %s, {q.NOW})",
            (space, action, dumps(detail)),
        )

    def audit_log(self, space: str) -> list[dict[str, Any]]:
        """The space's deletions, oldest first: ``{"action", "detail", "at"}`` dicts."""
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT action, detail, at FROM audit WHERE space = %s ORDER BY seq", (space,)
            ).fetchall()
        return [{"action": r[0], "detail": json.loads(r[1]), "at": r[2]} for r in rows]

    # -- retrieval ------------------------------------------------------------------------
    def scan(self, space: str, tree: Tree, query: Vector, *, penalty: float, k: int = 1,
             approximate_from: int = 0) -> list[Candidate]:
        block = self._block.get()
        with self._conn() as conn:
            if block is None or block.space != space or block.rev is None and not block.deleted:
                return self._scan_shared(conn, space, tree, query, penalty, k, upto=None,
                                         approximate_from=approximate_from)
            if block.deleted:  # the shared index still holds what this block deleted
                state = conn.execute(q.SPACE_STATE, (space,)).fetchone()
                assert state is not None
                private = TreeIndex(int(state[2]))
                self._catch_up(conn, private, space, tree, rev=int(state[1]))
                return private.scan(query, penalty=penalty, k=k)
            assert block.rev is not None
            committed = self._scan_shared(conn, space, tree, query, penalty, k,
                                          upto=block.rev - 1, approximate_from=approximate_from)
            own = TreeIndex(block.dim)
            own.rev = block.rev - 1
            self._catch_up(conn, own, space, tree, rev=block.rev)
            return merge(own.scan(query, penalty=penalty, k=k), committed, k)

    def _scan_shared(self, conn: Conn, space: str, tree: Tree, query: Vector, penalty: float,
                     k: int, upto: int | None,
                     approximate_from: int = 0) -> list[Candidate]:
        state = conn.execute(q.SPACE_STATE, (space,)).fetchone()
        if state is None:
            return []
        generation, revision, dim = int(state[0]), int(state[1]), int(state[2])
        if upto is not None:
            revision = min(revision, upto)
        with self._index_lock:
            key = (space, tree.value)
            index = self._indexes.get(key)
            if index is None or index.generation < generation:
                index = self._indexes.put(key, TreeIndex(dim, generation))
            # A reader whose snapshot is older than the index (generation or revision) just
            # scans what the index holds: it is at least as fresh as what the reader could see.
            if index.generation == generation and revision > index.rev:
                self._catch_up(conn, index, space, tree, rev=revision)
            return index.scan(query, penalty=penalty, k=k, approximate_from=approximate_from)

    @staticmethod
    def _catch_up(conn: Conn, index: TreeIndex, space: str, tree: Tree, *, rev: int) -> None:
        """Append the rows with ``index.rev < rev' <= rev`` in commit order."""
        rows = conn.execute(q.INDEX_ROWS, (space, tree.value, index.rev, rev), binary=True)
        index.extend((0, r[0], bool(r[1]), int(r[2]), r[3]) for r in rows)
        index.rev = rev

    # -- episodes -------------------------------------------------------------------------
    def add_episode(self, space: str, record: EpisodeRecord) -> None:
        row = episode_to_row(record)
        with self._mutation(space), self._conn() as conn:
            try:
                conn.execute(q.INSERT_EPISODE, (space, *(row[c] for c in EPISODE_COLUMNS)))
            except psycopg.errors.IntegrityError as exc:
                raise StoreError(f"episode {record.id!r} already in {space!r}: {exc}") from exc

    def episodes(self, space: str) -> Iterator[EpisodeRecord]:
        with self._conn() as conn:
            rows = conn.cursor(row_factory=dict_row).execute(
                q.SELECT_EPISODES, (space,)
            ).fetchall()
        return (episode_from_row(r) for r in rows)

    def count_episodes(self, space: str) -> int:
        with self._conn() as conn:
            row = conn.execute("SELECT count(*) FROM episodes WHERE space = %s",
                               (space,)).fetchone()
        return int(_one(row))

    def keys(self) -> PostgresKeyTable:
        """The API key table of this database (see :mod:`deltamem.store.keys`)."""
        return PostgresKeyTable(self._conn)

    def close(self) -> None:
        self._pool.close()


def _one(row: tuple[Any, ...] | None) -> Any:
    assert row is not None
    return row[0]


def _safe(url: str) -> str:
    """The URL without its password, for error messages."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.Error:
        return "<unparsable URL>"
    where = f"{info.get('host', '')}:{info.get('port', '')}/{info.get('dbname', '')}"
    return f"postgresql://{info.get('user', '')}@{where}"

