"""SQLite backend: one file, WAL, one write transaction per learned episode.

Concurrency: a write block takes SQLite's write lock up front (``BEGIN IMMEDIATE``, waiting up to
``busy_timeout``) on the store's one write connection; reads never wait for it. Outside a write
block every thread reads through its own connection (WAL: a reader sees the last committed state
and never blocks a writer, nor is blocked by one); inside a block, the block's thread reads
through the write connection and sees its own writes. ``:memory:`` has a single connection, so
there readers and writers take turns.

Several processes may share one file. Each process keeps an exact numpy index per (space, tree)
holding committed rows only, and catches up before every scan by reading the rows it has not
seen yet (SQLite commits rows in ``seq`` order, because there is one writer at a time). A block's
own uncommitted nodes are scanned apart and merged in; a block that deleted nodes scans a private
snapshot. Deleting nodes bumps the space's ``generation`` so that every process rebuilds.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deltamem.core.model import Node, Tree
from deltamem.errors import EmbedderMismatch, SpaceNotFound, StoreError
from deltamem.jsonsafe import dumps
from deltamem.store import migrations
from deltamem.store.base import Candidate, EpisodeRecord, SpaceInfo, Vector, check_vector
from deltamem.store.cache import IndexCache, TreeIndex, merge
from deltamem.store.index import from_blob, to_blob
from deltamem.store.keys import SQLiteKeyTable
from deltamem.store.rows import (
    EPISODE_COLUMNS,
    NODE_COLUMNS,
    episode_from_row,
    episode_to_row,
    node_from_row,
    node_to_row,
)

# Append-only: position i holds the statements that take a database from version i to i + 1.
MIGRATIONS: list[list[str]] = [
    [
        """CREATE TABLE spaces (
            space TEXT PRIMARY KEY, embedder TEXT NOT NULL, dim INTEGER NOT NULL,
            generation INTEGER NOT NULL DEFAULT 0, created_at REAL NOT NULL)""",
        """CREATE TABLE nodes (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            space TEXT NOT NULL REFERENCES spaces(space),
            id TEXT NOT NULL,
            tree TEXT NOT NULL CHECK (tree IN ('task', 'env')),
            kind TEXT NOT NULL CHECK (kind IN ('root', 'delta')),
            outcome TEXT NOT NULL CHECK (outcome IN ('success', 'failure')),
            parent_id TEXT,
            depth INTEGER NOT NULL,
            key TEXT NOT NULL,
            content TEXT,
            patch TEXT,
            hits INTEGER NOT NULL DEFAULT 0,
            successes INTEGER NOT NULL DEFAULT 0,
            failures INTEGER NOT NULL DEFAULT 0,
            consolidated INTEGER NOT NULL DEFAULT 0,
            lineage TEXT NOT NULL DEFAULT '[]',
            episode_id TEXT,
            created_at REAL NOT NULL,
            meta TEXT NOT NULL DEFAULT '{}',
            vector BLOB NOT NULL,
            UNIQUE (space, id))""",
        "CREATE INDEX nodes_by_tree ON nodes (space, tree, seq)",
        "CREATE INDEX nodes_by_parent ON nodes (space, parent_id)",
        """CREATE TABLE episodes (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            space TEXT NOT NULL REFERENCES spaces(space),
            id TEXT NOT NULL,
            task TEXT NOT NULL, env TEXT NOT NULL, success INTEGER NOT NULL, score REAL,
            steps TEXT NOT NULL, meta TEXT NOT NULL, result TEXT NOT NULL,
            flat_chars INTEGER NOT NULL, created_at REAL NOT NULL,
            UNIQUE (space, id))""",
        """CREATE TABLE audit (
            seq INTEGER PRIMARY KEY AUTOINCREMENT, space TEXT NOT NULL, action TEXT NOT NULL,
            detail TEXT NOT NULL, at REAL NOT NULL)""",
    ],
    [
        # API keys. Before this migration the key table was created outside the migrations,
        # by the server, with the first seven columns: adopt such a table, then extend it.
        # Legacy keys could do everything, so they keep every scope.
        """CREATE TABLE IF NOT EXISTS api_keys (
            id TEXT PRIMARY KEY, name TEXT NOT NULL, salt BLOB NOT NULL, hash BLOB NOT NULL,
            spaces TEXT NOT NULL, created_at REAL NOT NULL, revoked_at REAL)""",
        """ALTER TABLE api_keys ADD COLUMN scopes TEXT NOT NULL
            DEFAULT '["read", "write", "admin"]'""",
        "ALTER TABLE api_keys ADD COLUMN rate_limit INTEGER",
        "ALTER TABLE api_keys ADD COLUMN last_used_at REAL",
    ],
]
SCHEMA_VERSION = len(MIGRATIONS)

_NODE_SELECT = "SELECT " + ", ".join(NODE_COLUMNS) + " FROM nodes"
# The path root -> node. `n.depth < up.depth` ends the walk even if a damaged table held a
# parent cycle (depths strictly decrease towards the root).
_CHAIN = f"""WITH RECURSIVE up(id, parent_id, depth) AS (
        SELECT id, parent_id, depth FROM nodes WHERE space = ?1 AND id = ?2
        UNION ALL
        SELECT n.id, n.parent_id, n.depth FROM nodes n JOIN up ON n.id = up.parent_id
        WHERE n.space = ?1 AND n.depth < up.depth)
    {_NODE_SELECT} WHERE space = ?1 AND id IN (SELECT id FROM up) ORDER BY depth"""
_SUBTREE_IDS = """WITH RECURSIVE down(id, depth) AS (
        SELECT id, depth FROM nodes WHERE space = ?1 AND id = ?2
        UNION ALL
        SELECT n.id, n.depth FROM nodes n JOIN down ON n.parent_id = down.id
        WHERE n.space = ?1 AND n.depth > down.depth)
    SELECT id FROM down"""
_INDEX_ROWS = ("SELECT seq, id, outcome, depth, vector FROM nodes "
               "WHERE space = ? AND tree = ? AND seq > ? AND seq <= ? ORDER BY seq")
_NO_LIMIT = 2**62


@dataclass(slots=True)
class _Block:
    """The write block open on the write connection."""

    space: str
    thread: int
    base_seq: int  # the last committed node when the block began
    added: bool = False  # wrote nodes: its scans merge its own rows with the committed ones
    deleted: bool = False  # deleted nodes: its scans use a private snapshot


class SQLiteStore:
    """The embedded default store (see the module docstring).

    Args:
        path: the database file, or ``:memory:``.
        busy_timeout: seconds a writer waits for another process's write lock.
        create: create a missing file (and its directory); with False it must exist
            (``SpaceNotFound`` otherwise).
    """

    def __init__(self, path: str | Path, *, busy_timeout: float = 60.0, create: bool = True):
        self.path = str(path)
        self.url = f"sqlite:{self.path}"
        self._memory = self.path == ":memory:"
        if not self._memory:
            if not create and not Path(self.path).is_file():
                raise SpaceNotFound(f"no database at {self.path}; learn or import into it "
                                    "first (writers create it)")
            if create:
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._timeout = busy_timeout
        self._write_lock = threading.RLock()
        self._block: _Block | None = None
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._index_lock = threading.Lock()
        self._indexes = IndexCache()
        self._dims: dict[str, int] = {}
        self._db = self._connect()
        with self._errors():
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._migrate()

    # -- setup ----------------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(self.path, timeout=self._timeout, isolation_level=None,
                                   check_same_thread=False)
            conn.execute("PRAGMA foreign_keys=ON")
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open {self.path}: {exc}") from exc
        conn.row_factory = sqlite3.Row
        return conn

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """SQLite's own errors become library errors naming the file."""
        try:
            yield
        except sqlite3.Error as exc:
            if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
                raise StoreError(f"{self.path} stayed locked by another writer for "
                                 f"{self._timeout:g} s: {exc}") from exc
            raise StoreError(f"{self.path}: {exc} (is it a deltamem database?)") from exc

    def _migrate(self) -> None:
        """Bring the schema up to date; only a database that is behind takes the write lock."""
        if self._version(self._db) == SCHEMA_VERSION:
            return
        with self._write_lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute(
                    "CREATE TABLE IF NOT EXISTS deltamem_schema (version INTEGER NOT NULL)")
                migrations.migrate(
                    self._version(self._db), MIGRATIONS, self.path, execute=self._db.execute,
                    record=lambda v: self._db.execute(
                        "INSERT INTO deltamem_schema (version) VALUES (?)", (v,)))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    @staticmethod
    def _version(conn: sqlite3.Connection) -> int:
        has_table = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'deltamem_schema'"
        ).fetchone()
        if has_table is None:
            return 0
        row = conn.execute("SELECT max(version) FROM deltamem_schema").fetchone()
        return int(row[0] or 0)

    def schema_version(self) -> int:
        with self._read() as conn:
            return self._version(conn)

    # -- connections ----------------------------------------------------------------------
    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """The connection this thread reads through (see the module docstring)."""
        block = self._block
        if block is not None and block.thread == threading.get_ident():
            with self._errors():
                yield self._db
        elif self._memory:
            with self._write_lock, self._errors():
                yield self._db
        else:
            conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
            if conn is None:
                conn = self._local.conn = self._connect()
                with self._index_lock:  # not the write lock: a reader never waits for it
                    self._readers.append(conn)
            with self._errors():
                yield conn

    @contextmanager
    def _mutation(self, space: str) -> Iterator[_Block]:
        """The open block for ``space`` on this thread, or a one-statement block."""
        block = self._block
        if block is None or block.thread != threading.get_ident():
            with self.write(space):
                assert self._block is not None
                yield self._block
        elif block.space != space:
            raise StoreError(f"cannot change space {space!r} inside a write block for "
                             f"{block.space!r}")
        else:
            with self._errors():
                yield block

    # -- spaces ---------------------------------------------------------------------------
    def ensure_space(self, space: str, embedder: str, dim: int) -> SpaceInfo:
        info = self._space(space)
        if info is None:
            with self._mutation(space):
                self._db.execute(
                    "INSERT OR IGNORE INTO spaces (space, embedder, dim, created_at) "
                    "VALUES (?, ?, ?, strftime('%s','now'))",
                    (space, embedder, dim),
                )
            info = self._space(space)
        assert info is not None
        if (info.embedder, info.dim) != (embedder, dim):
            raise EmbedderMismatch(
                f"space {space!r} was built with embedder {info.embedder!r} ({info.dim}-d); "
                f"open it with embedder={info.embedder!r}, or use another space for "
                f"{embedder!r}"
            )
        self._dims[space] = dim
        return info

    def _space(self, space: str) -> SpaceInfo | None:
        with self._read() as conn:
            row = conn.execute(
                "SELECT space, embedder, dim FROM spaces WHERE space = ?", (space,)
            ).fetchone()
        return None if row is None else SpaceInfo(row[0], row[1], int(row[2]))

    def spaces(self) -> list[SpaceInfo]:
        with self._read() as conn:
            rows = conn.execute("SELECT space, embedder, dim FROM spaces ORDER BY space")
            return [SpaceInfo(r[0], r[1], int(r[2])) for r in rows]

    def _dim(self, space: str) -> int:
        dim = self._dims.get(space)
        if dim is None:
            info = self._space(space)
            if info is None:
                raise StoreError(f"unknown space {space!r}: call ensure_space first")
            dim = self._dims[space] = info.dim
        return dim

    # -- transactions -----------------------------------------------------------------------
    @contextmanager
    def write(self, space: str) -> Iterator[None]:
        me = threading.get_ident()
        if self._block is not None and self._block.thread == me:
            raise StoreError("write blocks do not nest")
        with self._write_lock:
            with self._errors():
                self._db.execute("BEGIN IMMEDIATE")
                row = self._db.execute("SELECT max(seq) FROM nodes").fetchone()
            self._block = _Block(space, me, int(row[0] or 0))
            try:
                yield
            except BaseException:
                self._block = None
                with suppress(sqlite3.Error):  # SQLite may have rolled back already
                    self._db.execute("ROLLBACK")
                raise
            else:
                self._block = None
                with self._errors():
                    self._db.execute("COMMIT")

    # -- nodes ----------------------------------------------------------------------------
    def add_node(self, space: str, node: Node, vector: Vector) -> None:
        row = node_to_row(node)
        row["consolidated"] = int(row["consolidated"])
        columns = ("space", *NODE_COLUMNS, "vector")
        check_vector(space, node.id, vector, self._dim(space))
        values = (space, *(row[c] for c in NODE_COLUMNS), to_blob(vector))
        with self._mutation(space) as block:
            try:
                self._db.execute(
                    f"INSERT INTO nodes ({', '.join(columns)}) "
                    f"VALUES ({', '.join('?' * len(columns))})",
                    values,
                )
            except sqlite3.IntegrityError as exc:
                raise StoreError(f"cannot add node {node.id!r} to {space!r}: {exc}") from exc
            block.added = True

    def get_node(self, space: str, node_id: str) -> Node | None:
        with self._read() as conn:
            row = conn.execute(
                f"{_NODE_SELECT} WHERE space = ? AND id = ?", (space, node_id)
            ).fetchone()
        return None if row is None else node_from_row(row)

    def chain(self, space: str, node_id: str) -> list[Node]:
        with self._read() as conn:
            rows = conn.execute(_CHAIN, (space, node_id)).fetchall()
        return [node_from_row(r) for r in rows]

    def children(self, space: str, node_id: str) -> list[Node]:
        with self._read() as conn:
            rows = conn.execute(
                f"{_NODE_SELECT} WHERE space = ? AND parent_id = ? ORDER BY seq", (space, node_id)
            ).fetchall()
        return [node_from_row(r) for r in rows]

    def nodes(self, space: str, tree: Tree | None = None) -> Iterator[Node]:
        with self._read() as conn:
            if tree is None:
                rows = conn.execute(f"{_NODE_SELECT} WHERE space = ? ORDER BY seq", (space,))
            else:
                rows = conn.execute(
                    f"{_NODE_SELECT} WHERE space = ? AND tree = ? ORDER BY seq",
                    (space, tree.value),
                )
            fetched = rows.fetchall()
        return (node_from_row(r) for r in fetched)

    def vector(self, space: str, node_id: str) -> Vector | None:
        return self.vectors(space, [node_id]).get(node_id)

    def vectors(self, space: str, node_ids: list[str]) -> dict[str, Vector]:
        if not node_ids:
            return {}
        marks = ", ".join("?" * len(node_ids))
        with self._read() as conn:
            rows = conn.execute(
                "SELECT n.id, n.vector, s.dim FROM nodes n JOIN spaces s ON s.space = n.space "
                f"WHERE n.space = ? AND n.id IN ({marks})",
                (space, *node_ids),
            ).fetchall()
        return {r[0]: from_blob(r[1], int(r[2])) for r in rows}

    def bump(self, space: str, node_id: str, *, hits: int = 0, successes: int = 0,
             failures: int = 0) -> None:
        with self._mutation(space):
            self._db.execute(
                "UPDATE nodes SET hits = hits + ?, successes = successes + ?, "
                "failures = failures + ? WHERE space = ? AND id = ?",
                (hits, successes, failures, space, node_id),
            )

    def mark_consolidated(self, space: str, node_id: str) -> None:
        with self._mutation(space):
            self._db.execute(
                "UPDATE nodes SET consolidated = 1 WHERE space = ? AND id = ?", (space, node_id)
            )

    def delete_subtree(self, space: str, node_id: str) -> list[str]:
        with self._mutation(space) as block:
            ids = [r[0] for r in self._db.execute(_SUBTREE_IDS, (space, node_id))]
            self._db.executemany(
                "DELETE FROM nodes WHERE space = ? AND id = ?", [(space, i) for i in ids]
            )
            self._deleted(block)
            self._audit(space, "delete_subtree", {"root": node_id, "deleted": ids})
        return ids

    def forget_space(self, space: str) -> int:
        with self._mutation(space) as block:
            count = self._db.execute("DELETE FROM nodes WHERE space = ?", (space,)).rowcount
            self._db.execute("DELETE FROM episodes WHERE space = ?", (space,))
            self._deleted(block)
            self._audit(space, "forget_space", {"nodes": count})
        return int(count)

    def _deleted(self, block: _Block) -> None:
        self._db.execute("UPDATE spaces SET generation = generation + 1 WHERE space = ?",
                         (block.space,))
        block.deleted = True

    def _audit(self, space: str, action: str, detail: dict[str, Any]) -> None:
        self._db.execute(
            "INSERT INTO audit (space, action, detail, at) VALUES (?, ?, ?, strftime('%s','now'))",
            (space, action, dumps(detail)),
        )

    def audit_log(self, space: str) -> list[dict[str, Any]]:
        """The space's deletions, oldest first: ``{"action", "detail", "at"}`` dicts."""
        with self._read() as conn:
            rows = conn.execute(
                "SELECT action, detail, at FROM audit WHERE space = ? ORDER BY seq", (space,)
            ).fetchall()
        return [{"action": r[0], "detail": json.loads(r[1]), "at": r[2]} for r in rows]

    # -- retrieval ------------------------------------------------------------------------
    def scan(self, space: str, tree: Tree, query: Vector, *, penalty: float, k: int = 1,
             approximate_from: int = 0) -> list[Candidate]:
        block = self._block
        mine = block is not None and block.thread == threading.get_ident()
        with self._read() as conn:
            if not mine or block is None or block.space != space or not (block.added
                                                                         or block.deleted):
                return self._scan_shared(conn, space, tree, query, penalty, k, upto=_NO_LIMIT,
                                         approximate_from=approximate_from)
            dim = self._dim(space)
            if block.deleted:  # the shared index still holds what this block deleted
                private = TreeIndex(dim)
                self._catch_up(conn, private, space, tree, upto=_NO_LIMIT)
                return private.scan(query, penalty=penalty, k=k)
            committed = self._scan_shared(conn, space, tree, query, penalty, k,
                                          upto=block.base_seq, approximate_from=approximate_from)
            own = TreeIndex(dim)
            own.last_seq = block.base_seq
            self._catch_up(conn, own, space, tree, upto=_NO_LIMIT)
            return merge(own.scan(query, penalty=penalty, k=k), committed, k)

    def _scan_shared(self, conn: sqlite3.Connection, space: str, tree: Tree, query: Vector,
                     penalty: float, k: int, *, upto: int,
                     approximate_from: int = 0) -> list[Candidate]:
        """Scan the shared index of committed rows, caught up with ``conn``'s snapshot."""
        row = conn.execute("SELECT generation, dim FROM spaces WHERE space = ?",
                           (space,)).fetchone()
        if row is None:
            return []
        generation, dim = int(row[0]), int(row[1])
        with self._index_lock:
            key = (space, tree.value)
            index = self._indexes.get(key)
            if index is None or index.generation < generation:
                index = self._indexes.put(key, TreeIndex(dim, generation))
            # A reader whose snapshot is older than the index just scans what the index holds:
            # it is at least as fresh as what the reader could see.
            if index.generation == generation:
                self._catch_up(conn, index, space, tree, upto=upto)
            return index.scan(query, penalty=penalty, k=k, approximate_from=approximate_from)

    @staticmethod
    def _catch_up(conn: sqlite3.Connection, index: TreeIndex, space: str, tree: Tree, *,
                  upto: int) -> None:
        rows = conn.execute(_INDEX_ROWS, (space, tree.value, index.last_seq, upto))
        index.extend(
            (r[0], r[1], r[2] == "failure", r[3], from_blob(r[4], index.dim)) for r in rows
        )

    # -- episodes -------------------------------------------------------------------------
    def add_episode(self, space: str, record: EpisodeRecord) -> None:
        row = episode_to_row(record)
        row["success"] = int(row["success"])
        columns = ("space", *EPISODE_COLUMNS)
        with self._mutation(space):
            try:
                self._db.execute(
                    f"INSERT INTO episodes ({', '.join(columns)}) "
                    f"VALUES ({', '.join('?' * len(columns))})",
                    (space, *(row[c] for c in EPISODE_COLUMNS)),
                )
            except sqlite3.IntegrityError as exc:
                raise StoreError(f"episode {record.id!r} already in {space!r}") from exc

    def episodes(self, space: str) -> Iterator[EpisodeRecord]:
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT {', '.join(EPISODE_COLUMNS)} FROM episodes WHERE space = ? ORDER BY seq",
                (space,),
            ).fetchall()
        return (episode_from_row(r) for r in rows)

    def count_episodes(self, space: str) -> int:
        with self._read() as conn:
            row = conn.execute(
                "SELECT count(*) FROM episodes WHERE space = ?", (space,)
            ).fetchone()
        return int(row[0])

    def keys(self) -> SQLiteKeyTable:
        """The API key table of this database (see :mod:`deltamem.store.keys`)."""
        return SQLiteKeyTable(self._read, self._change)

    @contextmanager
    def _change(self) -> Iterator[sqlite3.Connection]:
        """The write connection for one autocommit statement outside any block (or in this
        thread's block), under the write lock."""
        with self._write_lock, self._errors():
            yield self._db

    def integrity_check(self) -> list[str]:
        """SQLite's own page-level check (``['ok']`` when the file is sound)."""
        with self._read() as conn:
            return [r[0] for r in conn.execute("PRAGMA integrity_check")]

    def close(self) -> None:
        with self._write_lock:
            for conn in self._readers:
                conn.close()
            self._readers.clear()
            self._db.close()
