"""API keys for the REST server, kept as salted SHA-256 hashes in the memory's own database.

A key reads ``dmk_<id>_<secret>``. The ``id`` finds the row in one indexed lookup; the secret is
never stored, only ``sha256(salt || secret)`` with a random per-key salt, compared in constant
time. Each key is scoped to a list of spaces, or to every space with ``"*"``.

Keys live in the table ``api_keys`` of the same SQLite file as the memory, so one file is the
whole deployment. PostgreSQL databases are refused for now (see :func:`open_keys`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deltamem.errors import ConfigError, StoreError

PREFIX = "dmk_"
ALL_SPACES = "*"

_SCHEMA = """CREATE TABLE IF NOT EXISTS api_keys (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    salt BLOB NOT NULL,
    hash BLOB NOT NULL,
    spaces TEXT NOT NULL,
    created_at REAL NOT NULL,
    revoked_at REAL)"""


@dataclass(frozen=True, slots=True)
class ApiKey:
    """A key's public record (never its secret)."""

    id: str
    name: str
    spaces: tuple[str, ...]
    created_at: float
    revoked_at: float | None = None

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    def allows(self, space: str) -> bool:
        """True when this key may act on ``space``."""
        return self.active and (ALL_SPACES in self.spaces or space in self.spaces)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "spaces": list(self.spaces),
                "created_at": self.created_at, "revoked_at": self.revoked_at,
                "active": self.active}


class KeyStore:
    """The ``api_keys`` table of one SQLite database.

    Args:
        path: the SQLite file of the memory (created if missing).
    """

    def __init__(self, path: str | Path):
        self.path = str(path)
        if self.path == ":memory:":
            raise ConfigError("API keys need a database file; ':memory:' would lose them")
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(self.path, timeout=60.0, isolation_level=None,
                                       check_same_thread=False)
            self._db.execute(_SCHEMA)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the key table in {self.path}: {exc}") from exc
        # One connection shared by the server's worker threads; sqlite3 objects are not
        # safe to use from two threads at once.
        self._lock = threading.Lock()

    def create(self, spaces: list[str], *, name: str = "") -> tuple[ApiKey, str]:
        """Create a key for ``spaces`` (``["*"]`` for all); return its record and the secret.

        The full key is returned once and cannot be recovered later.
        """
        scoped = tuple(dict.fromkeys(s.strip() for s in spaces if s.strip()))
        if not scoped:
            raise ConfigError("a key needs at least one space (or '*' for every space)")
        key_id = secrets.token_hex(6)
        secret = secrets.token_urlsafe(32)
        salt = secrets.token_bytes(16)
        record = ApiKey(key_id, name, scoped, time.time())
        with self._lock:
            self._db.execute(
                "INSERT INTO api_keys (id, name, salt, hash, spaces, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (key_id, name, salt, _digest(salt, secret), json.dumps(list(scoped)),
                 record.created_at),
            )
        return record, f"{PREFIX}{key_id}_{secret}"

    def list(self) -> list[ApiKey]:
        """Every key, oldest first, revoked ones included."""
        with self._lock:
            rows = self._db.execute(
                "SELECT id, name, spaces, created_at, revoked_at FROM api_keys "
                "ORDER BY created_at"
            ).fetchall()
        return [_record(row) for row in rows]

    def revoke(self, key_id: str) -> bool:
        """Revoke a key by id; False when no active key has that id."""
        with self._lock:
            cursor = self._db.execute(
                "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                (time.time(), key_id),
            )
        return cursor.rowcount == 1

    def verify(self, presented: str) -> ApiKey | None:
        """The active key matching a presented ``dmk_<id>_<secret>`` string, else None."""
        if not presented.startswith(PREFIX):
            return None
        key_id, sep, secret = presented[len(PREFIX):].partition("_")
        if not sep or not key_id or not secret:
            return None
        with self._lock:
            row = self._db.execute(
                "SELECT id, name, spaces, created_at, revoked_at, salt, hash FROM api_keys "
                "WHERE id = ?", (key_id,)
            ).fetchone()
        if row is None or not hmac.compare_digest(_digest(row[5], secret), row[6]):
            return None
        record = _record(row[:5])
        return record if record.active else None

    def close(self) -> None:
        with self._lock:
            self._db.close()


def open_keys(db: str | Path) -> KeyStore:
    """The key table for a memory URL or path.

    Raises:
        ConfigError: for PostgreSQL URLs (keys need a SQLite database for now).
    """
    url = str(db)
    if url.startswith(("postgresql://", "postgres://")):
        raise ConfigError("API keys need a SQLite database for now; serve a SQLite memory, or "
                          "run the server with keys disabled behind your own auth proxy")
    return KeyStore(url.removeprefix("sqlite:").removeprefix("//"))


def _digest(salt: bytes, secret: str) -> bytes:
    return hashlib.sha256(salt + secret.encode("utf-8")).digest()


def _record(row: Any) -> ApiKey:
    return ApiKey(id=row[0], name=row[1], spaces=tuple(json.loads(row[2])),
                  created_at=float(row[3]),
                  revoked_at=None if row[4] is None else float(row[4]))
