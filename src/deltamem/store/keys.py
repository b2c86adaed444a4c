"""The ``api_keys`` table of a store: rows only (hashing and checking live in ``server.keys``).

Keys are part of the store's schema and its migrations (SQLite and PostgreSQL alike), so one
database is the whole deployment and any number of server replicas share one key table. A store
that keeps keys answers :meth:`KeyHolder.keys` with a :class:`KeyTable` bound to its own
connection(s); :func:`key_table` asks for it and says clearly when a store cannot.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol, runtime_checkable

from deltamem.errors import ConfigError


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
    """A :class:`KeyRow` from a row selected in ``KEY_COLUMNS`` order (both backends)."""
    return KeyRow(
        id=values[0], name=values[1], salt=bytes(values[2]), hash=bytes(values[3]),
        spaces=tuple(json.loads(values[4])), scopes=tuple(json.loads(values[5])),
        rate_limit=None if values[6] is None else int(values[6]),
        created_at=float(values[7]),
        last_used_at=None if values[8] is None else float(values[8]),
        revoked_at=None if values[9] is None else float(values[9]),
    )


Connect = Callable[[], AbstractContextManager[Any]]


class SQLKeyTable:
    """``api_keys`` rows through an SQL store, each statement its own transaction.

    Args:
        sql: the backend's SQL module (``INSERT_KEY``, ``SELECT_KEYS``, ...).
        read: the connection lookups run on (so authorising a request never waits for a
            writer).
        change: the connection a change runs on, as one autocommit statement.
    """

    def __init__(self, sql: ModuleType, read: Connect, change: Connect):
        self._sql = sql
        self._read = read
        self._change_conn = change

    def _rows(self, sql: str, args: tuple[Any, ...]) -> list[Any]:
        with self._read() as conn:
            return list(conn.execute(sql, args).fetchall())

    def _change(self, sql: str, args: tuple[Any, ...]) -> int:
        with self._change_conn() as conn:
            return int(conn.execute(sql, args).rowcount)

    def insert_key(self, row: KeyRow) -> None:
        self._change(self._sql.INSERT_KEY, row.values())

    def key_rows(self) -> list[KeyRow]:
        return [row_from(r) for r in self._rows(self._sql.SELECT_KEYS, ())]

    def find_key(self, key_id: str) -> KeyRow | None:
        rows = self._rows(self._sql.SELECT_KEY, (key_id,))
        return row_from(rows[0]) if rows else None

    def revoke_key(self, key_id: str, at: float) -> bool:
        return self._change(self._sql.REVOKE_KEY, (at, key_id)) == 1

    def touch_key(self, key_id: str, at: float) -> None:
        self._change(self._sql.TOUCH_KEY, (at, key_id, at))
