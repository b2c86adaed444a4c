"""API keys for the REST server, kept as salted SHA-256 hashes in the memory's own database.

A key reads ``dmk_<id>_<secret>``. The ``id`` finds the row in one indexed lookup; the secret is
never stored, only ``sha256(salt || secret)`` with a random per-key salt, compared in constant
time. Each key is scoped to a list of spaces (or every space with ``"*"``) and to operations:
``read`` (recall, show, stats, view, export), ``write`` (learn, consolidate) and ``admin``
(delete, forget, import). A key may carry its own request limit (requests per minute).

The rows live in the store's ``api_keys`` table (:mod:`deltamem.store.keys`), part of the schema
and its migrations on SQLite and PostgreSQL, so every server replica over one database sees the
same keys, and a revocation holds from the next request on, on every replica.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from deltamem.errors import ConfigError
from deltamem.store import open_store
from deltamem.store.base import Store
from deltamem.store.keys import KeyRow, KeyTable, key_table

log = logging.getLogger("deltamem.server")

PREFIX = "dmk_"
ALL_SPACES = "*"
SCOPES = ("read", "write", "admin")
DEFAULT_SCOPES = ("read", "write")
# ``last_used_at`` is written at most this often per key and process, in a background thread: a
# write in the request would put a read behind the database's write lock.
TOUCH_EVERY_S = 60.0


@dataclass(frozen=True, slots=True)
class ApiKey:
    """A key's public record (never its secret)."""

    id: str
    name: str
    spaces: tuple[str, ...]
    scopes: tuple[str, ...]
    created_at: float
    rate_limit: int | None = None
    last_used_at: float | None = None
    revoked_at: float | None = None

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    def covers(self, space: str) -> bool:
        """True when ``space`` is one of this key's spaces."""
        return ALL_SPACES in self.spaces or space in self.spaces

    def allows(self, space: str, scope: str = "read") -> bool:
        """True when this key is active and may do ``scope`` operations on ``space``."""
        return self.active and scope in self.scopes and self.covers(space)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "spaces": list(self.spaces),
                "scopes": list(self.scopes), "rate_limit": self.rate_limit,
                "created_at": self.created_at, "last_used_at": self.last_used_at,
                "revoked_at": self.revoked_at, "active": self.active}


class KeyStore:
    """Create, list, revoke and verify keys in one store's key table.

    Args:
        store: the memory's store; its ``api_keys`` table holds the keys.
        owned: close ``store`` on :meth:`close` (True for :func:`open_keys`).
    """

    def __init__(self, store: Store | Callable[[], Store], *, owned: bool = False):
        self._source = store
        self._store: Store | None = None
        self._rows: KeyTable | None = None
        self._owned = owned
        self._touched: dict[str, float] = {}
        self._touching: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def _table(self) -> KeyTable:
        """The key table, opened on first use (a server starts before its database answers)."""
        with self._lock:
            if self._rows is None:
                source = self._source
                store = source() if callable(source) else source
                self._rows = key_table(store)
                self._store = store
            return self._rows

    @property
    def opened(self) -> bool:
        """Whether the key table is open (verifying a key then starts no migration)."""
        return self._rows is not None

    def create(self, spaces: list[str], *, name: str = "", scopes: list[str] | None = None,
               rate_limit: int | None = None) -> tuple[ApiKey, str]:
        """Create a key for ``spaces`` (``["*"]`` for all); return its record and the secret.

        Args:
            spaces: the spaces the key may use.
            name: a label, e.g. the agent's name.
            scopes: operations allowed (default ``read`` and ``write``; see the module doc).
            rate_limit: requests per minute for this key (None: the server's default).

        The full key is returned once and cannot be recovered later.
        """
        scoped = _clean(spaces)
        if not scoped:
            raise ConfigError("a key needs at least one space (or '*' for every space)")
        allowed = _clean(scopes) if scopes is not None else DEFAULT_SCOPES
        unknown = [s for s in allowed if s not in SCOPES]
        if unknown or not allowed:
            raise ConfigError(f"unknown or empty scope {', '.join(unknown)!r}; "
                              f"choose among {', '.join(SCOPES)}")
        if rate_limit is not None and rate_limit < 1:
            raise ConfigError(f"a key's rate limit must be >= 1 request/minute, got {rate_limit}")
        secret = secrets.token_urlsafe(32)
        salt = secrets.token_bytes(16)
        row = KeyRow(secrets.token_hex(6), name, salt, _digest(salt, secret), scoped, allowed,
                     rate_limit, time.time())
        self._table.insert_key(row)
        return _record(row), f"{PREFIX}{row.id}_{secret}"

    def list(self) -> list[ApiKey]:
        """Every key, oldest first, revoked ones included."""
        return [_record(row) for row in self._table.key_rows()]

    def revoke(self, key_id: str) -> bool:
        """Revoke a key by id; False when no active key has that id."""
        return self._table.revoke_key(key_id, time.time())

    def verify(self, presented: str) -> ApiKey | None:
        """The active key matching a presented ``dmk_<id>_<secret>`` string, else None.

        A match records its use (``last_used_at``, at most once a minute per key), in the
        background: verifying never waits for the database's write lock.
        """
        if not presented.startswith(PREFIX):
            return None
        key_id, sep, secret = presented[len(PREFIX):].partition("_")
        if not sep or not key_id or not secret:
            return None
        row = self._table.find_key(key_id)
        if row is None or not hmac.compare_digest(_digest(row.salt, secret), row.hash):
            return None
        record = _record(row)
        if record.active:
            self._touch(key_id)
        return record if record.active else None

    def _touch(self, key_id: str) -> None:
        """Record the key's use in the background, best effort: a request never waits for the
        database's write lock for it (SQLite's lock may be held by a long batch or by another
        process). One write is in flight at a time; a failed one is retried at the next use."""
        now = time.time()
        with self._lock:
            if now - self._touched.get(key_id, 0.0) < TOUCH_EVERY_S:
                return
            if self._touching is not None and self._touching.is_alive():
                return  # the next request of this key tries again
            self._touched[key_id] = now
            thread = threading.Thread(target=self._write_use, args=(key_id, now), daemon=True,
                                      name="deltamem-key-use")
            self._touching = thread
        thread.start()

    def _write_use(self, key_id: str, at: float) -> None:
        try:
            self._table.touch_key(key_id, at)
        except Exception as exc:  # busy or unreachable: only the bookkeeping waits
            log.info("could not record the use of API key %s yet: %s", key_id,
                     type(exc).__name__)
            with self._lock:
                if self._touched.get(key_id) == at:
                    del self._touched[key_id]

    def flush(self, timeout: float | None = None) -> None:
        """Wait for the background write of a key's use, if one is running."""
        thread = self._touching
        if thread is not None:
            thread.join(timeout)

    def close(self) -> None:
        self.flush(timeout=5.0)
        if self._owned and self._store is not None:
            self._store.close()


def open_keys(db: str) -> KeyStore:
    """The keys of the memory at a path or URL (SQLite file or ``postgresql://``).

    Raises:
        ConfigError: for ``:memory:`` (keys made there would be lost at once).
    """
    if db in (":memory:", "sqlite::memory:"):
        raise ConfigError("API keys need a database file or server; ':memory:' would lose them")
    store = open_store(db)
    try:
        key_table(store)  # refuse a store that keeps no keys now, and close it
    except BaseException:
        store.close()
        raise
    return KeyStore(store, owned=True)


def is_loopback(host: str) -> bool:
    """True for an address only this machine can reach (127.0.0.0/8, ::1, localhost)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False


def _clean(values: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(v.strip() for v in values if v.strip()))


def _digest(salt: bytes, secret: str) -> bytes:
    return hashlib.sha256(salt + secret.encode("utf-8")).digest()


def _record(row: KeyRow) -> ApiKey:
    return ApiKey(id=row.id, name=row.name, spaces=row.spaces, scopes=row.scopes,
                  created_at=row.created_at, rate_limit=row.rate_limit,
                  last_used_at=row.last_used_at, revoked_at=row.revoked_at)
