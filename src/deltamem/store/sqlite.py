"""SQLite backend: one file, WAL, one write transaction per learned episode.

Concurrency: a write block takes SQLite's write lock up front (``BEGIN IMMEDIATE``, waiting up to
``busy_timeout``) on the store's one write connection; reads never wait for it. Outside a write
block every thread reads through its own connection (WAL: a reader sees the last committed state
and never blocks a writer, nor is blocked by one); inside a block, the block's thread reads
through the write connection and sees its own writes. ``:memory:`` has a single connection, so
there readers and writers take turns.

Several processes may share one file. Rows commit in ``seq`` order (one writer at a time), which
is the position the per-process indexes of :class:`~deltamem.store.sql.SQLStore` catch up by.
Everything but connections and transactions is shared with PostgreSQL in that base class; the
statements are in :mod:`._sql_sqlite`.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

import numpy as np

from deltamem.core.model import Tree
from deltamem.errors import SpaceNotFound, StoreError
from deltamem.store import _sql_sqlite, migrations, snapshot
from deltamem.store.base import Vector
from deltamem.store.cache import TreeIndex
from deltamem.store.index import to_blob
from deltamem.store.sql import Block, Conn, SQLStore

# What a snapshot's stamp is checked against (store/snapshot.py): the space's creation time, and
# how many rows of the tree sit at or before the snapshot's position, and the last one's id.
_SNAPSHOT_CHECK = (
    "SELECT (SELECT created_at FROM spaces WHERE space = ?1), "
    "(SELECT count(*) FROM nodes WHERE space = ?1 AND tree = ?2 AND seq <= ?3), "
    "(SELECT id FROM nodes WHERE space = ?1 AND tree = ?2 AND seq <= ?3 "
    "ORDER BY seq DESC LIMIT 1)")


@dataclass(slots=True)
class _Block(Block):
    thread: int = 0  # the thread that opened it: only that one reads through the write connection


class SQLiteStore(SQLStore):
    """The embedded default store (see the module docstring).

    Args:
        path: the database file, or ``:memory:``.
        busy_timeout: seconds a writer waits for another process's write lock.
        create: create a missing file (and its directory); with False it must exist
            (``SpaceNotFound`` otherwise).
        snapshot_every: save a tree's index beside the file (``<path>.index/``) once it has
            grown by this many rows, so that a new process opens a large memory fast
            (:mod:`deltamem.store.snapshot`); 0 turns snapshots off (never used for
            ``:memory:``).
    """

    sql: ClassVar[ModuleType] = _sql_sqlite
    integrity_errors: ClassVar[tuple[type[Exception], ...]] = (sqlite3.IntegrityError,)

    def __init__(self, path: str | Path, *, busy_timeout: float = 60.0, create: bool = True,
                 snapshot_every: int = snapshot.SNAPSHOT_EVERY):
        self.path = str(path)
        super().__init__(f"sqlite:{self.path}")
        self._memory = self.path == ":memory:"
        self._snapshot_every = 0 if self._memory else max(0, snapshot_every)
        if not self._memory:
            if not create and not Path(self.path).is_file():
                raise SpaceNotFound(f"no database at {self.path}; learn or import into it "
                                    "first (writers create it)")
            if create:
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._timeout = busy_timeout
        self._write_lock = threading.RLock()
        self._current: _Block | None = None
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._db = self._connect()
        with self._errors():
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            migrations.upgrade(self._db, self.sql, self.path, exclusive=self._immediate)

    # -- connections ----------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(self.path, timeout=self._timeout, isolation_level=None,
                                   check_same_thread=False)
            conn.execute("PRAGMA foreign_keys=ON")
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open {self.path}: {exc}") from exc
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

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        block = self._block()
        if block is not None:
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

    # -- what changed since this thread's last read --------------------------------------
    _reuse_state = True  # False: ask SPACE_STATE on every scan (benchmarks/peers.py's baseline)

    def _fresh(self, conn: Conn) -> bool:
        """On this thread's reader connection, ``PRAGMA data_version`` changes exactly when
        another connection (this process's writer, or any other process) committed since its
        last look: then this thread's remembered space states are dropped. Read before anything
        it vouches for, so what is remembered is never older than it. Inside a write block (the
        write connection) and for ``:memory:`` nothing is reused."""
        local = self._local
        reader: sqlite3.Connection | None = getattr(local, "conn", None)
        if reader is None or conn is not reader:
            return False
        version = reader.execute("PRAGMA data_version").fetchone()[0]
        if getattr(local, "version", None) != version:
            local.version, local.states = version, {}
        return True

    def _state(self, conn: Conn, space: str) -> Sequence[Any] | None:
        if not (self._reuse_state and self._fresh(conn)):
            return super()._state(conn, space)
        states: dict[str, Sequence[Any] | None] = self._local.states
        if space not in states:
            states[space] = super()._state(conn, space)
        return states[space]

    def _block(self) -> _Block | None:
        block = self._current
        return block if block is not None and block.thread == threading.get_ident() else None

    @contextmanager
    def _immediate(self) -> Iterator[None]:
        """A transaction on the write connection holding SQLite's write lock.

        A writer of this process waits for another thread's block at most ``busy_timeout``
        too (then ``StoreError``), as one of another process does: writers never queue forever.
        """
        if not self._write_lock.acquire(timeout=self._timeout):
            raise StoreError(f"{self.path} stayed locked by another writer of this process for "
                             f"{self._timeout:g} s; nothing was written")
        try:
            with self._errors():
                self._db.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                with suppress(sqlite3.Error):  # SQLite may have rolled back already
                    self._db.execute("ROLLBACK")
                raise
            with self._errors():
                self._db.execute("COMMIT")
        finally:
            self._write_lock.release()

    @contextmanager
    def _transaction(self, space: str) -> Iterator[_Block]:
        with self._immediate():
            self._current = _Block(space, self._db, thread=threading.get_ident())
            try:
                yield self._current
            finally:
                self._current = None

    @contextmanager
    def _key_change(self) -> Iterator[sqlite3.Connection]:
        """The write connection, under the write lock, for one autocommit statement."""
        with self._write_lock, self._errors():
            yield self._db

    # -- rows -----------------------------------------------------------------------------
    def _insert_node(self, block: Block, values: tuple[Any, ...], vector: Vector) -> None:
        with self._errors():
            try:
                self._db.execute(self.sql.INSERT_NODE, (block.space, *values, to_blob(vector)))
            except sqlite3.IntegrityError as exc:
                raise StoreError(f"cannot add node {values[0]!r} to {block.space!r}: "
                                 f"{exc}") from exc

    def _vector_rows(self, conn: sqlite3.Connection, sql: str,
                     params: Sequence[Any]) -> Iterable[Sequence[Any]]:
        for row in conn.execute(sql, params):
            yield (*row[:-1], np.frombuffer(row[-1], dtype="<f4"))

    # -- index snapshots (store/snapshot.py) -----------------------------------------------
    def _new_index(self, conn: Conn, space: str, tree: Tree, generation: int,
                   dim: int) -> TreeIndex:
        if self._snapshot_every:
            where = snapshot.folder(self.path, space, tree.value)
            found = snapshot.peek(where)
            if found is not None:
                meta, stamp = found
                created, rows, last = conn.execute(
                    _SNAPSHOT_CHECK, (space, tree.value, stamp.position)).fetchone()
                if (stamp.generation, stamp.created_at, stamp.rows, stamp.last_id) == \
                        (generation, created, rows, last):
                    index = snapshot.load(where, meta, stamp, dim)
                    if index is not None:
                        index.saved = index.size
                        return index
        return TreeIndex(dim, generation)

    def _caught_up(self, conn: Conn, space: str, tree: Tree, index: TreeIndex) -> None:
        if not self._snapshot_every or index.size - index.saved < self._snapshot_every:
            return
        # The stamp says what the database holds up to the index's position (a row the scan
        # left out as damaged counts there too, so the check on load compares like with like).
        created, rows, last = conn.execute(
            _SNAPSHOT_CHECK, (space, tree.value, index.position)).fetchone()
        stamp = snapshot.Stamp(index.generation, float(created), index.position, int(rows),
                               str(last))
        snapshot.save(snapshot.folder(self.path, space, tree.value), index, stamp)
        index.saved = index.size

    def integrity_check(self) -> list[str]:
        """SQLite's own page-level check (``['ok']`` when the file is sound)."""
        with self._read() as conn:
            return [r[0] for r in conn.execute("PRAGMA integrity_check")]

    def compact(self) -> None:
        """``VACUUM`` the file and truncate its WAL (see :func:`deltamem.store.scrub.compact`)."""
        if not self._memory:
            from deltamem.store.scrub import compact

            compact(self.path)

    def close(self) -> None:
        with self._write_lock:
            for conn in self._readers:
                conn.close()
            self._readers.clear()
            self._db.close()
