"""The ``api_keys`` table of a store: rows only (hashing and checking live in ``server.keys``).

Keys are part of the store's schema and its migrations (SQLite and PostgreSQL alike), so one
database is the whole deployment and any number of server replicas share one key table. A store
that keeps keys answers :meth:`KeyHolder.keys` with a :class:`KeyTable` bound to its own
connection(s); :func:`key_table` asks for it and says clearly when a store cannot.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from deltamem.errors import ConfigError, StoreError

_COLUMNS = ("id", "name", "salt", "hash", "spaces", "scopes", "rate_limit", "created_at",
            "last_used_at", "revoked_at")
_SELECT = f"SELECT {', '.join(_COLUMNS)} FROM api_keys"


@dataclass(frozen=True, slots=True)
class KeyRow:
    """One stored key: its salted hash, never its secret."""

    id: str
    name: str
    salt: bytes
    hash: bytes
    spaces: tuple[str, ...]
    scopes: tuple[str, ...]
    rate_limit: int | None
    created_at: float
    last_used_at: float | None = None
    revoked_at: float | None = None

    def values(self) -> tuple[Any, ...]:
        return (self.id, self.name, self.salt, self.hash, json.dumps(list(self.spaces)),
                json.dumps(list(self.scopes)), self.rate_limit, self.created_at,
                self.last_used_at, self.revoked_at)


class KeyTable(Protocol):
    """Row operations on ``api_keys`` (each one is its own short transaction)."""

    def insert_key(self, row: KeyRow) -> None: ...

    def key_rows(self) -> list[KeyRow]:
        """Every key, oldest first, revoked ones included."""
        ...

    def find_key(self, key_id: str) -> KeyRow | None: ...

    def revoke_key(self, key_id: str, at: float) -> bool:
        """Mark an active key revoked; False when no active key has that id."""
        ...

    def touch_key(self, key_id: str, at: float) -> None:
        """Record a use of the key at ``at`` (``last_used_at`` only moves forward)."""
        ...


@runtime_checkable
class KeyHolder(Protocol):
    """A store that keeps API keys in its own schema."""

    def keys(self) -> KeyTable: ...


def key_table(store: object) -> KeyTable:
    """The key table of ``store``; ConfigError when that kind of store keeps no keys."""
    if not isinstance(store, KeyHolder):
        raise ConfigError(f"{type(store).__name__} keeps no API keys; serve a SQLite or "
                          "PostgreSQL memory, or run the server without keys behind your own auth")
    return store.keys()


def row_from(values: Sequence[Any]) -> KeyRow:
    """A :class:`KeyRow` from a row selected in ``_COLUMNS`` order (both backends)."""
    return KeyRow(
        id=values[0], name=values[1], salt=bytes(values[2]), hash=bytes(values[3]),
        spaces=tuple(json.loads(values[4])), scopes=tuple(json.loads(values[5])),
        rate_limit=None if values[6] is None else int(values[6]),
        created_at=float(values[7]),
        last_used_at=None if values[8] is None else float(values[8]),
        revoked_at=None if values[9] is None else float(values[9]),
    )


class SQLiteKeyTable:
    """``api_keys`` through a SQLite store: lookups on the calling thread's read connection (so
    authorising a request never waits for a writer), changes on the write connection under the
    store's write lock."""

    def __init__(self, read: Callable[[], AbstractContextManager[sqlite3.Connection]],
                 write: Callable[[], AbstractContextManager[sqlite3.Connection]]):
        self._read = read
        self._write = write

    def _run(self, sql: str, args: tuple[Any, ...] = (), *, change: bool = False) -> list[Any]:
        with self._write() if change else self._read() as db:
            try:
                cursor = db.execute(sql, args)
                return [cursor.rowcount] if change else cursor.fetchall()
            except sqlite3.Error as exc:
                raise StoreError(f"API key table: {exc}") from exc

    def insert_key(self, row: KeyRow) -> None:
        self._run(f"INSERT INTO api_keys ({', '.join(_COLUMNS)}) "
                  f"VALUES ({', '.join('?' * len(_COLUMNS))})", row.values(), change=True)

    def key_rows(self) -> list[KeyRow]:
        return [row_from(r) for r in self._run(f"{_SELECT} ORDER BY created_at, id")]

    def find_key(self, key_id: str) -> KeyRow | None:
        rows = self._run(f"{_SELECT} WHERE id = ?", (key_id,))
        return row_from(rows[0]) if rows else None

    def revoke_key(self, key_id: str, at: float) -> bool:
        changed = self._run("UPDATE api_keys SET revoked_at = ? WHERE id = ? "
                            "AND revoked_at IS NULL", (at, key_id), change=True)
        return bool(changed[0] == 1)

    def touch_key(self, key_id: str, at: float) -> None:
        self._run("UPDATE api_keys SET last_used_at = ? WHERE id = ? "
                  "AND (last_used_at IS NULL OR last_used_at < ?)", (at, key_id, at), change=True)


class PostgresKeyTable:
    """``api_keys`` through a PostgreSQL store's pooled connections (autocommit statements)."""

    def __init__(self, connection: Callable[[], AbstractContextManager[Any]]):
        self._connection = connection

    def _rows(self, sql: str, args: tuple[Any, ...] = ()) -> Iterator[Sequence[Any]]:
        with self._connection() as conn:
            return iter(conn.execute(sql, args).fetchall())

    def insert_key(self, row: KeyRow) -> None:
        with self._connection() as conn:
            conn.execute(f"INSERT INTO api_keys ({', '.join(_COLUMNS)}) "
                         f"VALUES ({', '.join(['%s'] * len(_COLUMNS))})", row.values())

    def key_rows(self) -> list[KeyRow]:
        return [row_from(r) for r in self._rows(f"{_SELECT} ORDER BY created_at, id")]

    def find_key(self, key_id: str) -> KeyRow | None:
        found = [row_from(r) for r in self._rows(f"{_SELECT} WHERE id = %s", (key_id,))]
        return found[0] if found else None

    def revoke_key(self, key_id: str, at: float) -> bool:
        with self._connection() as conn:
            cursor = conn.execute("UPDATE api_keys SET revoked_at = %s "
                                  "WHERE id = %s AND revoked_at IS NULL", (at, key_id))
            return bool(cursor.rowcount == 1)

    def touch_key(self, key_id: str, at: float) -> None:
        with self._connection() as conn:
            conn.execute("UPDATE api_keys SET last_used_at = %s WHERE id = %s "
                         "AND (last_used_at IS NULL OR last_used_at < %s)", (at, key_id, at))
