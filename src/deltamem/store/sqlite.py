"""SQLite backend: one file, WAL, one write transaction per learned episode.

Concurrency: writers take SQLite's write lock up front (``BEGIN IMMEDIATE``) and wait for it up to
``busy_timeout``; readers never block. Several processes may share one file. Each process keeps an
exact numpy index per (space, tree) and catches up with other writers before every scan by reading
the rows it has not seen yet (SQLite commits rows in ``seq`` order, because there is one writer at
a time). Deleting nodes bumps the space's ``generation`` so that every process rebuilds.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from deltamem.core.model import Node, Tree
from deltamem.errors import EmbedderMismatch, SchemaError, StoreError
from deltamem.store.base import Candidate, EpisodeRecord, SpaceInfo, Vector
from deltamem.store.index import VectorIndex, from_blob, to_blob
from deltamem.store.keys import SQLiteKeyTable
from deltamem.store.rows import (
    EPISODE_COLUMNS,
    NODE_COLUMNS,
    dumps,
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


class SQLiteStore:
    """The embedded default store (see the module docstring)."""

    def __init__(self, path: str | Path, *, busy_timeout: float = 60.0):
        self.path = str(path)
        self.url = f"sqlite:{self.path}"
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(
                self.path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open {self.path}: {exc}") from exc
        self._db.row_factory = sqlite3.Row
        self._lock = threading.RLock()
        self._in_write = False
        self._indexes: dict[tuple[str, str], VectorIndex] = {}
        self._generations: dict[str, int] = {}
        self._dims: dict[str, int] = {}
        self._configure()
        self._migrate()

    # -- setup ----------------------------------------------------------------------------
    def _configure(self) -> None:
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path} is not a deltamem database: {exc}") from exc

    def _migrate(self) -> None:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute(
                    "CREATE TABLE IF NOT EXISTS deltamem_schema (version INTEGER NOT NULL)"
                )
                row = self._db.execute("SELECT max(version) FROM deltamem_schema").fetchone()
                version = row[0] or 0
                if version > SCHEMA_VERSION:
                    raise SchemaError(
                        f"{self.path} has schema version {version}, newer than this deltamem "
                        f"({SCHEMA_VERSION}); upgrade deltamem to open it"
                    )
                for v in range(version, SCHEMA_VERSION):
                    for statement in MIGRATIONS[v]:
                        self._db.execute(statement)
                    self._db.execute("INSERT INTO deltamem_schema (version) VALUES (?)", (v + 1,))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def schema_version(self) -> int:
        row = self._db.execute("SELECT max(version) FROM deltamem_schema").fetchone()
        return int(row[0] or 0)

    # -- spaces ---------------------------------------------------------------------------
    def ensure_space(self, space: str, embedder: str, dim: int) -> SpaceInfo:
        with self._lock:
            info = self._space(space)
            if info is None:
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
        row = self._db.execute(
            "SELECT space, embedder, dim FROM spaces WHERE space = ?", (space,)
        ).fetchone()
        return None if row is None else SpaceInfo(row[0], row[1], int(row[2]))

    def spaces(self) -> list[SpaceInfo]:
        with self._lock:
            rows = self._db.execute("SELECT space, embedder, dim FROM spaces ORDER BY space")
            return [SpaceInfo(r[0], r[1], int(r[2])) for r in rows]

    # -- transactions -----------------------------------------------------------------------
    @contextmanager
    def write(self, space: str) -> Iterator[None]:
        with self._lock:
            if self._in_write:
                raise StoreError("write blocks do not nest")
            self._db.execute("BEGIN IMMEDIATE")
            self._in_write = True
            try:
                yield
            except BaseException:
                self._db.execute("ROLLBACK")
                # The index may have read rows that no longer exist: rebuild on next scan.
                self._drop_indexes(space)
                raise
            else:
                self._db.execute("COMMIT")
            finally:
                self._in_write = False

    def _drop_indexes(self, space: str) -> None:
        for key in [k for k in self._indexes if k[0] == space]:
            del self._indexes[key]

    # -- nodes ----------------------------------------------------------------------------
    def add_node(self, space: str, node: Node, vector: Vector) -> None:
        row = node_to_row(node)
        row["consolidated"] = int(row["consolidated"])
        columns = ("space", *NODE_COLUMNS, "vector")
        values = (space, *(row[c] for c in NODE_COLUMNS), to_blob(vector))
        with self._lock:
            try:
                self._db.execute(
                    f"INSERT INTO nodes ({', '.join(columns)}) "
                    f"VALUES ({', '.join('?' * len(columns))})",
                    values,
                )
            except sqlite3.IntegrityError as exc:
                raise StoreError(f"cannot add node {node.id!r} to {space!r}: {exc}") from exc

    def get_node(self, space: str, node_id: str) -> Node | None:
        with self._lock:
            row = self._db.execute(
                f"{_NODE_SELECT} WHERE space = ? AND id = ?", (space, node_id)
            ).fetchone()
        return None if row is None else node_from_row(row)

    def chain(self, space: str, node_id: str) -> list[Node]:
        with self._lock:
            rows = self._db.execute(
                f"""WITH RECURSIVE up(id, parent_id, depth) AS (
                        SELECT id, parent_id, depth FROM nodes WHERE space = ?1 AND id = ?2
                        UNION ALL
                        SELECT n.id, n.parent_id, n.depth FROM nodes n
                        JOIN up ON n.id = up.parent_id WHERE n.space = ?1)
                    {_NODE_SELECT} WHERE space = ?1 AND id IN (SELECT id FROM up)
                    ORDER BY depth""",
                (space, node_id),
            ).fetchall()
        return [node_from_row(r) for r in rows]

    def children(self, space: str, node_id: str) -> list[Node]:
        with self._lock:
            rows = self._db.execute(
                f"{_NODE_SELECT} WHERE space = ? AND parent_id = ? ORDER BY seq", (space, node_id)
            ).fetchall()
        return [node_from_row(r) for r in rows]

    def nodes(self, space: str, tree: Tree | None = None) -> Iterator[Node]:
        with self._lock:
            if tree is None:
                rows = self._db.execute(f"{_NODE_SELECT} WHERE space = ? ORDER BY seq", (space,))
            else:
                rows = self._db.execute(
                    f"{_NODE_SELECT} WHERE space = ? AND tree = ? ORDER BY seq",
                    (space, tree.value),
                )
            fetched = rows.fetchall()
        return (node_from_row(r) for r in fetched)

    def vector(self, space: str, node_id: str) -> Vector | None:
        with self._lock:
            row = self._db.execute(
                "SELECT n.vector, s.dim FROM nodes n JOIN spaces s ON s.space = n.space "
                "WHERE n.space = ? AND n.id = ?",
                (space, node_id),
            ).fetchone()
        return None if row is None else from_blob(row[0], int(row[1]))

    def vectors(self, space: str, node_ids: list[str]) -> dict[str, Vector]:
        if not node_ids:
            return {}
        dim = self._dims.get(space) or self._space_dim(space)
        marks = ", ".join("?" * len(node_ids))
        with self._lock:
            rows = self._db.execute(
                f"SELECT id, vector FROM nodes WHERE space = ? AND id IN ({marks})",
                (space, *node_ids),
            ).fetchall()
        return {r[0]: from_blob(r[1], dim) for r in rows}

    def _space_dim(self, space: str) -> int:
        info = self._space(space)
        return info.dim if info else 0

    def bump(self, space: str, node_id: str, *, hits: int = 0, successes: int = 0,
             failures: int = 0) -> None:
        with self._lock:
            self._db.execute(
                "UPDATE nodes SET hits = hits + ?, successes = successes + ?, "
                "failures = failures + ? WHERE space = ? AND id = ?",
                (hits, successes, failures, space, node_id),
            )

    def mark_consolidated(self, space: str, node_id: str) -> None:
        with self._lock:
            self._db.execute(
                "UPDATE nodes SET consolidated = 1 WHERE space = ? AND id = ?", (space, node_id)
            )

    def delete_subtree(self, space: str, node_id: str) -> list[str]:
        with self._lock:
            ids = [
                r[0]
                for r in self._db.execute(
                    """WITH RECURSIVE down(id) AS (
                           SELECT id FROM nodes WHERE space = ?1 AND id = ?2
                           UNION ALL
                           SELECT n.id FROM nodes n JOIN down ON n.parent_id = down.id
                           WHERE n.space = ?1)
                       SELECT id FROM down""",
                    (space, node_id),
                )
            ]
            self._db.executemany(
                "DELETE FROM nodes WHERE space = ? AND id = ?", [(space, i) for i in ids]
            )
            self._bump_generation(space)
            self._audit(space, "delete_subtree", {"root": node_id, "deleted": ids})
        return ids

    def forget_space(self, space: str) -> int:
        with self._lock:
            count = self._db.execute("DELETE FROM nodes WHERE space = ?", (space,)).rowcount
            self._db.execute("DELETE FROM episodes WHERE space = ?", (space,))
            self._bump_generation(space)
            self._audit(space, "forget_space", {"nodes": count})
        return int(count)

    def _bump_generation(self, space: str) -> None:
        self._db.execute("UPDATE spaces SET generation = generation + 1 WHERE space = ?", (space,))

    def _audit(self, space: str, action: str, detail: dict[str, Any]) -> None:
        self._db.execute(
            "INSERT INTO audit (space, action, detail, at) VALUES (?, ?, ?, strftime('%s','now'))",
            (space, action, dumps(detail)),
        )

    def audit_log(self, space: str) -> list[dict[str, Any]]:
        with self._lock:
            rows = self._db.execute(
                "SELECT action, detail, at FROM audit WHERE space = ? ORDER BY seq", (space,)
            ).fetchall()
        return [{"action": r[0], "detail": json.loads(r[1]), "at": r[2]} for r in rows]

    # -- retrieval ------------------------------------------------------------------------
    def scan(self, space: str, tree: Tree, query: Vector, *, penalty: float,
             k: int = 1) -> list[Candidate]:
        with self._lock:
            return self._index(space, tree).scan(query, penalty=penalty, k=k)

    def _index(self, space: str, tree: Tree) -> VectorIndex:
        row = self._db.execute(
            "SELECT generation, dim FROM spaces WHERE space = ?", (space,)
        ).fetchone()
        if row is None:
            return VectorIndex(1)
        generation, dim = int(row[0]), int(row[1])
        if self._generations.get(space) != generation:
            self._drop_indexes(space)
            self._generations[space] = generation
        index = self._indexes.get((space, tree.value))
        if index is None:
            index = self._indexes[(space, tree.value)] = VectorIndex(dim)
        fresh = self._db.execute(
            "SELECT seq, id, outcome, depth, vector FROM nodes "
            "WHERE space = ? AND tree = ? AND seq > ? ORDER BY seq",
            (space, tree.value, index.last_seq),
        )
        index.extend(
            (r[0], r[1], r[2] == "failure", r[3], from_blob(r[4], dim)) for r in fresh
        )
        return index

    # -- episodes -------------------------------------------------------------------------
    def add_episode(self, space: str, record: EpisodeRecord) -> None:
        row = episode_to_row(record)
        row["success"] = int(row["success"])
        columns = ("space", *EPISODE_COLUMNS)
        with self._lock:
            try:
                self._db.execute(
                    f"INSERT INTO episodes ({', '.join(columns)}) "
                    f"VALUES ({', '.join('?' * len(columns))})",
                    (space, *(row[c] for c in EPISODE_COLUMNS)),
                )
            except sqlite3.IntegrityError as exc:
                raise StoreError(f"episode {record.id!r} already in {space!r}") from exc

    def episodes(self, space: str) -> Iterator[EpisodeRecord]:
        with self._lock:
            rows = self._db.execute(
                f"SELECT {', '.join(EPISODE_COLUMNS)} FROM episodes WHERE space = ? ORDER BY seq",
                (space,),
            ).fetchall()
        return (episode_from_row(r) for r in rows)

    def count_episodes(self, space: str) -> int:
        with self._lock:
            row = self._db.execute(
                "SELECT count(*) FROM episodes WHERE space = ?", (space,)
            ).fetchone()
        return int(row[0])

    def keys(self) -> SQLiteKeyTable:
        """The API key table of this database (see :mod:`deltamem.store.keys`)."""
        return SQLiteKeyTable(self._db, self._lock)

    def integrity_check(self) -> list[str]:
        """SQLite's own page-level check (``['ok']`` when the file is sound)."""
        with self._lock:
            return [r[0] for r in self._db.execute("PRAGMA integrity_check")]

    def close(self) -> None:
        with self._lock:
            self._db.close()
