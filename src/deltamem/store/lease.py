"""A per-space consolidation lease: of several workers, one consolidates a space, the others skip.

Consolidation stays correct without it (each new root is written under the space's write lock
after checking again that the node is not consolidated yet), but two workers would both pay for
the compile (an LLM call). The lease is taken without waiting and held for one pass:

* PostgreSQL: a session advisory lock keyed by (schema, space), on a connection of its own. A
  worker that dies loses its connection, and the server frees the lock at once.
* SQLite (one machine): an OS record lock on a byte of ``<db>-consolidate.lock`` chosen by the
  space, plus an in-process lock (POSIX record locks do not exclude threads of one process). The
  OS frees it when the process dies. ``:memory:`` stores take the in-process lock only.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from deltamem.errors import ConfigError, StoreError
from deltamem.store.base import Store

_LOCAL: dict[tuple[str, str], threading.Lock] = {}
_LOCAL_GUARD = threading.Lock()
_FDS: dict[str, int] = {}
# The advisory lock's key; the schema comes from the connection's own search_path.
_PG_TRY = ("SELECT pg_try_advisory_lock(hashtextextended("
           "'deltamem:consolidate:' || current_schema() || ':' || %s, 0))")


@contextmanager
def consolidation_lease(store: Store, space: str) -> Iterator[bool]:
    """Try to take the consolidation lease of ``space`` in ``store``; yield whether it was won.

    Raises:
        ConfigError: the store is neither SQLite nor PostgreSQL.
        StoreError: the database cannot be reached to take the lease.
    """
    url = store.url
    local = _local_lock(url, space)
    if not local.acquire(blocking=False):
        yield False
        return
    try:
        if url.startswith(("postgresql://", "postgres://")):
            with _pg_lease(url, space) as won:
                yield won
        elif url.startswith("sqlite:"):
            with _file_lease(url.removeprefix("sqlite:"), space) as won:
                yield won
        else:
            raise ConfigError(f"no consolidation lease for the store at {url!r}")
    finally:
        local.release()


def _local_lock(url: str, space: str) -> threading.Lock:
    with _LOCAL_GUARD:
        return _LOCAL.setdefault((url, space), threading.Lock())


@contextmanager
def _pg_lease(url: str, space: str) -> Iterator[bool]:
    import psycopg

    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=10)
    except psycopg.Error as exc:
        raise StoreError(f"cannot take the consolidation lease of {space!r}: {exc}") from exc
    with conn:  # closing the session releases the advisory lock
        row = conn.execute(_PG_TRY, (space,)).fetchone()
        yield bool(row and row[0])


@contextmanager
def _file_lease(path: str, space: str) -> Iterator[bool]:
    if path == ":memory:":
        yield True
        return
    offset = int.from_bytes(hashlib.blake2b(space.encode(), digest_size=6).digest(), "big")
    fd = _lock_file(path)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, offset)
    except OSError:
        yield False
        return
    try:
        yield True
    finally:
        fcntl.lockf(fd, fcntl.LOCK_UN, 1, offset)


def _lock_file(path: str) -> int:
    """One descriptor per lock file and process, kept open: closing any descriptor of a file
    would drop every POSIX lock this process holds on it."""
    with _LOCAL_GUARD:
        fd = _FDS.get(path)
        if fd is None:
            fd = _FDS[path] = os.open(f"{path}-consolidate.lock", os.O_RDWR | os.O_CREAT, 0o644)
        return fd
