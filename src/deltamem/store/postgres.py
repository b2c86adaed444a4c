"""PostgreSQL + pgvector backend: the scale-out store, same behaviour as the SQLite one.

Concurrency: ``write(space)`` is one transaction on one connection of the write pool, which
first takes a transaction-scoped advisory lock keyed by (schema, space). Writers of one space
therefore run one after the other, across threads and processes (a writer waits at most
``lock_timeout``, then fails with ``StoreError``, as SQLite's does after ``busy_timeout``), and
the facade's placement decisions (made inside the block) never see a stale tree; writers of
different spaces do not block each other. Reads inside a block run on the block's connection, so
they see the block's own writes; every other read takes a connection from a pool of its own, so
long write transactions never starve reads. Every statement is bounded by
``statement_timeout``.

Retrieval: vectors live in an untyped ``vector`` column (each space has its own dimension). Scans
are exact and must equal :func:`deltamem.core.scoring.top_k` bit for bit, ties included, which an
approximate HNSW index cannot promise; so, as in the SQLite store, each process keeps an exact
numpy index per (space, tree) and catches up before every scan (see
:class:`~deltamem.store.sql.SQLStore`). The position it catches up by is the space's
``revision``: every transaction that adds nodes bumps it once under the space's row lock and
stamps its nodes with it, so revisions are commit-ordered within a space (a sequence is not: a
transaction may commit after a later one). The statements are in :mod:`._sql_postgres`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, ClassVar

import numpy as np
import psycopg
import psycopg_pool
from psycopg import Connection
from psycopg_pool import ConnectionPool

from deltamem.errors import StoreError
from deltamem.store import _sql_postgres, migrations
from deltamem.store._pg_vector import register_vector_adapters
from deltamem.store.base import Vector
from deltamem.store.sql import Block, SQLStore

Conn = Connection[Any]
_BATCH = 1000  # node inserts sent per pipelined batch


@dataclass(slots=True)
class _Block(Block):
    # Node inserts not sent yet: they go in pipelined batches before the next statement of the
    # block (see PostgresStore._insert_node), so bulk writes are not one round trip per node.
    pending: list[tuple[Any, ...]] = field(default_factory=list)


class PostgresStore(SQLStore):
    """The PostgreSQL + pgvector store (see the module docstring).

    Args:
        url: a libpq URL, ``postgresql://user@host:port/db``; add
            ``?options=-csearch_path%3Dmyschema,public`` to keep the tables in another schema.
        pool_size: most connections write blocks hold at once (one per concurrent block).
        read_pool_size: most connections reads hold at once (default ``pool_size``); a pool
            of their own, so long write transactions never starve reads.
        connect_timeout: seconds to wait for the server when connecting (a request waits at
            most six times this for a free pooled connection, then ``StoreError``).
        lock_timeout: seconds a writer waits for another writer of the same space (the
            PostgreSQL twin of SQLite's ``busy_timeout``); then the write fails with
            ``StoreError`` and changes nothing.
        statement_timeout: seconds one SQL statement may run; then it is cancelled
            (``StoreError``), and a write block's transaction rolls back.

    Raises:
        StoreError: the server cannot be reached or lacks the ``vector`` extension.
        SchemaError: the database was written by a newer deltamem.
    """

    sql: ClassVar[ModuleType] = _sql_postgres
    integrity_errors: ClassVar[tuple[type[Exception], ...]] = (psycopg.errors.IntegrityError,)

    def __init__(self, url: str, *, pool_size: int = 4, read_pool_size: int | None = None,
                 connect_timeout: float = 10.0, lock_timeout: float = 60.0,
                 statement_timeout: float = 120.0):
        super().__init__(url)
        self._lock_ms = str(max(1, round(lock_timeout * 1000)))
        self._statement_ms = str(max(1, round(statement_timeout * 1000)))
        self._current: ContextVar[_Block | None] = ContextVar(f"pg-block-{id(self)}",
                                                              default=None)
        try:
            with psycopg.connect(url, autocommit=True,
                                 connect_timeout=max(1, int(connect_timeout))) as conn:
                migrations.upgrade(conn, self.sql, _safe(url),
                                   exclusive=lambda: self._migrating(conn))
                schema = conn.execute("SELECT current_schema()").fetchone()
                self._schema = str(schema[0] if schema else "public")
        except psycopg.Error as exc:
            raise StoreError(f"cannot open PostgreSQL store {_safe(url)}: {exc}") from exc
        # Two pools: write blocks hold a connection for their whole transaction, so reads (and
        # key checks) take theirs from a pool of their own and never wait behind writers.
        self._wait_s = connect_timeout * 6
        self._pool: ConnectionPool[Conn] = self._new_pool("write", pool_size, connect_timeout)
        try:
            self._reads: ConnectionPool[Conn] = self._new_pool(
                "read", pool_size if read_pool_size is None else read_pool_size, connect_timeout)
        except BaseException:
            self._pool.close()
            raise

    def _new_pool(self, role: str, size: int, connect_timeout: float) -> ConnectionPool[Conn]:
        pool: ConnectionPool[Conn] = ConnectionPool(
            self.url, min_size=1, max_size=max(1, size), open=False, timeout=self._wait_s,
            kwargs={"autocommit": True}, configure=self._configure,
            name=f"deltamem-{role}-{id(self)}",
        )
        try:
            pool.open(wait=True, timeout=connect_timeout)
        except Exception as exc:  # PoolTimeout, or the adapters failing to register
            pool.close()
            raise StoreError(f"cannot open a connection pool to {_safe(self.url)}: "
                             f"{exc}") from exc
        return pool

    def _configure(self, conn: Conn) -> None:
        """Every pooled connection: the vector adapters, and a bound on each statement."""
        register_vector_adapters(conn)
        conn.execute("SELECT set_config('statement_timeout', %s, false)", (self._statement_ms,))

    # -- connections ----------------------------------------------------------------------
    @contextmanager
    def _migrating(self, conn: Conn) -> Iterator[None]:
        with conn.transaction():
            conn.execute(self.sql.LOCK_TIMEOUT, (self._lock_ms,))  # never wait forever
            conn.execute(self.sql.MIGRATE_LOCK)
            yield

    @contextmanager
    def _read(self) -> Iterator[Conn]:
        """The current block's connection (its pending node inserts sent first, so every read
        sees them), or a pooled one; psycopg errors become StoreError."""
        block = self._current.get()
        try:
            if block is not None:
                self._flush(block)
                yield block.conn
            else:
                with self._reads.connection() as conn:
                    yield conn
        except psycopg_pool.PoolTimeout as exc:
            raise StoreError(_busy("read", self._wait_s)) from exc
        except psycopg.Error as exc:
            raise StoreError(f"PostgreSQL error on {_safe(self.url)}: {exc}") from exc

    def _block(self) -> _Block | None:
        return self._current.get()

    @contextmanager
    def _transaction(self, space: str) -> Iterator[_Block]:
        try:
            with self._pool.connection() as conn, conn.transaction():
                conn.execute(self.sql.LOCK_TIMEOUT, (self._lock_ms,))
                conn.execute(self.sql.SPACE_LOCK, (f"deltamem:{self._schema}:{space}",))
                block = _Block(space, conn)
                token = self._current.set(block)
                try:
                    yield block
                    self._flush(block)
                finally:
                    self._current.reset(token)
        except psycopg.errors.LockNotAvailable as exc:
            raise StoreError(f"space {space!r} stayed locked by another writer for "
                             f"{int(self._lock_ms) / 1000:g} s (lock_timeout); nothing was "
                             "written") from exc
        except psycopg_pool.PoolTimeout as exc:
            raise StoreError(_busy("write", self._wait_s) + "; nothing was written") from exc
        except psycopg.Error as exc:  # the lock or the COMMIT failed (ours are mapped already)
            raise StoreError(f"write to {space!r} failed: {exc}") from exc

    # -- rows -----------------------------------------------------------------------------
    def _insert_node(self, block: Block, values: tuple[Any, ...], vector: Vector) -> None:
        """Queue the INSERT: it is sent with later ones, at the block's next statement or at
        its end; a duplicate id then raises ``StoreError`` there, still inside the block."""
        assert isinstance(block, _Block)
        vec = np.array(vector, dtype=np.float32)  # a copy: it may be sent later
        block.pending.append((block.space, *values, block.base + 1, vec))
        if len(block.pending) >= _BATCH:
            self._flush(block)

    def _flush(self, block: _Block) -> None:
        if not block.pending:
            return
        rows, block.pending = block.pending, []
        try:
            with block.conn.cursor() as cur:
                cur.executemany(self.sql.INSERT_NODE, rows)
        except psycopg.errors.IntegrityError as exc:
            ids = ", ".join(repr(r[1]) for r in rows[:3])
            raise StoreError(f"cannot add nodes ({ids}...) to {block.space!r}: {exc}") from exc
        except psycopg.Error as exc:
            raise StoreError(f"PostgreSQL error on {_safe(self.url)}: {exc}") from exc

    def _vector_rows(self, conn: Conn, sql: str,
                     params: Sequence[Any]) -> Iterable[Sequence[Any]]:
        return conn.execute(sql, params, binary=True).fetchall()

    def compact(self) -> list[str]:
        """``VACUUM FULL`` of the tables that hold text (new table files; the old ones are
        unlinked), then ``CHECKPOINT``, ``pg_switch_wal()`` and ``CHECKPOINT`` again, so the WAL
        segments that hold the old values are no longer needed. A step the role may not run
        (``CHECKPOINT`` needs superuser or ``pg_checkpoint``) is reported, not fatal.

        What this cannot reach: WAL segments PostgreSQL recycles keep their bytes until they
        are reused (``wal_recycle = off`` deletes them instead), and WAL archives, replicas
        and backups keep the old values until they expire (docs/security.md).
        """
        done: list[str] = []
        try:
            with self._pool.connection() as conn:
                conn.execute("SET statement_timeout = 0")  # a rewrite of a large table
                try:
                    for table in ("nodes", "texts", "episodes", "audit"):
                        conn.execute(f"VACUUM FULL {table}")
                        done.append(f"VACUUM FULL {table}")
                    for step in ("CHECKPOINT", "SELECT pg_switch_wal()", "CHECKPOINT"):
                        try:
                            conn.execute(step)
                            done.append(step)
                        except psycopg.errors.InsufficientPrivilege as exc:
                            done.append(f"{step}: not run ({exc.diag.message_primary})")
                finally:
                    conn.execute("SELECT set_config('statement_timeout', %s, false)",
                                 (self._statement_ms,))
        except psycopg_pool.PoolTimeout as exc:
            raise StoreError(_busy("write", self._wait_s)) from exc
        except psycopg.Error as exc:
            raise StoreError(f"PostgreSQL error on {_safe(self.url)}: {exc}") from exc
        return done

    def close(self) -> None:
        self._pool.close()
        self._reads.close()


def _busy(role: str, waited: float) -> str:
    return (f"every pooled {role} connection stayed busy for {waited:g} s (the server is "
            "overloaded); retry later")


def _safe(url: str) -> str:
    """The URL without its password, for error messages."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.Error:
        return "<unparsable URL>"
    where = f"{info.get('host', '')}:{info.get('port', '')}/{info.get('dbname', '')}"
    return f"postgresql://{info.get('user', '')}@{where}"
