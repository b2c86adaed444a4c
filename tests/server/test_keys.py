"""API keys in the store's schema, on SQLite and PostgreSQL: hashes only, scopes, last use,
revocation seen by every handle, the legacy SQLite table adopted by the migration, and the
`deltamem keys` commands against a postgresql:// URL."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from typer.testing import CliRunner

from deltamem.errors import ConfigError
from deltamem.faces.cli.app import app
from deltamem.faces.server import keys as keys_module
from deltamem.faces.server.keys import SCOPES, KeyStore, open_keys
from deltamem.store import open_store
from pg_fixture import pg_server, pg_url  # noqa: F401 - fixtures

pytestmark = pytest.mark.server
runner = CliRunner()


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database URL of each backend (a fresh file, or a fresh Postgres schema)."""
    if request.param == "sqlite":
        return f"sqlite:{tmp_path / 'k.db'}"
    request.applymarker(pytest.mark.postgres)
    url: str = request.getfixturevalue("pg_url")
    return url


@pytest.fixture
def keys(db: str) -> Iterator[KeyStore]:
    store = open_keys(db)
    yield store
    store.close()


def raw_rows(db: str) -> list[tuple[object, ...]]:
    """Every column of every api_keys row, read straight from the database."""
    if db.startswith("sqlite:"):
        with sqlite3.connect(db.removeprefix("sqlite:")) as conn:
            return conn.execute("SELECT * FROM api_keys").fetchall()
    with psycopg.connect(db) as conn:
        return conn.execute("SELECT * FROM api_keys").fetchall()


def test_secret_is_never_stored(db: str, keys: KeyStore) -> None:
    """The table holds a salted hash; the secret appears in no column."""
    _, secret = keys.create(["a"], name="agent")
    raw = secret.split("_", 2)[2]
    rows = raw_rows(db)
    assert len(rows) == 1
    assert all(raw not in str(col) and raw.encode() not in (bytes(col) if isinstance(
        col, bytes | memoryview) else b"") for col in rows[0])


def test_verify_scope_and_revoke(keys: KeyStore) -> None:
    """A key verifies, allows only its spaces and scopes, and stops after revoke."""
    a, secret_a = keys.create(["a", "b"])
    _, secret_all = keys.create(["*"], scopes=["read"])
    found = keys.verify(secret_a)
    assert found is not None and found.id == a.id and found.scopes == ("read", "write")
    assert found.allows("a", "write") and found.allows("b") and not found.allows("c")
    assert not found.allows("a", "admin")
    everything = keys.verify(secret_all)
    assert everything is not None and everything.allows("anything", "read")
    assert not everything.allows("anything", "write")
    assert keys.verify(secret_a + "x") is None
    assert keys.verify("dmk_" + a.id + "_wrong") is None
    assert keys.revoke(a.id) and not keys.revoke(a.id)
    assert keys.verify(secret_a) is None
    assert [k.active for k in keys.list()] == [False, True]


def test_use_is_recorded_and_rate_limit_kept(keys: KeyStore,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A verified key gets last_used_at (throttled); its own rate limit is stored."""
    record, secret = keys.create(["a"], rate_limit=30)
    assert record.last_used_at is None and record.rate_limit == 30
    keys.verify(secret)
    keys.flush()  # the use is written in the background
    first = keys.list()[0].last_used_at
    assert first is not None and first >= record.created_at
    keys.verify(secret)  # within a minute: not written again
    keys.flush()
    assert keys.list()[0].last_used_at == first
    monkeypatch.setattr(keys_module, "TOUCH_EVERY_S", 0.0)
    keys.verify(secret)
    keys.flush()
    again = keys.list()[0].last_used_at
    assert again is not None and again >= first


def test_a_second_handle_sees_new_and_revoked_keys(db: str, keys: KeyStore) -> None:
    """Two handles on one database (two replicas) share the key table."""
    other = open_keys(db)
    try:
        record, secret = keys.create(["a"])
        seen = other.verify(secret)
        assert seen is not None and seen.id == record.id
        assert other.revoke(record.id)
        assert keys.verify(secret) is None
    finally:
        other.close()


def test_bad_scopes_and_empty_spaces_are_refused(keys: KeyStore) -> None:
    """Keys without a space, with an unknown scope or a zero limit are configuration errors."""
    with pytest.raises(ConfigError, match="at least one space"):
        keys.create([" "])
    with pytest.raises(ConfigError, match="scope"):
        keys.create(["a"], scopes=["root"])
    with pytest.raises(ConfigError, match="scope"):
        keys.create(["a"], scopes=[])
    with pytest.raises(ConfigError, match="rate limit"):
        keys.create(["a"], rate_limit=0)
    assert keys.list() == []


def test_keys_are_part_of_the_schema_migrations(db: str) -> None:
    """Opening the store creates api_keys through the versioned migrations."""
    store = open_store(db)
    try:
        assert store.schema_version() >= 2  # type: ignore[attr-defined]
    finally:
        store.close()
    assert raw_rows(db) == []


def test_memory_is_refused(tmp_path: Path) -> None:
    """Keys made in ':memory:' would be lost at once."""
    with pytest.raises(ConfigError, match="memory"):
        open_keys(":memory:")


def test_legacy_sqlite_key_table_is_adopted(tmp_path: Path) -> None:
    """A table made by the old, unversioned key code is migrated; its keys keep working."""
    path = tmp_path / "legacy.db"
    salt, secret = b"0123456789abcdef", "legacy-secret"
    with sqlite3.connect(path) as conn:
        conn.execute("""CREATE TABLE api_keys (id TEXT PRIMARY KEY, name TEXT NOT NULL,
            salt BLOB NOT NULL, hash BLOB NOT NULL, spaces TEXT NOT NULL,
            created_at REAL NOT NULL, revoked_at REAL)""")
        conn.execute("INSERT INTO api_keys VALUES (?, ?, ?, ?, ?, ?, NULL)",
                     ("abc123", "old", salt, hashlib.sha256(salt + secret.encode()).digest(),
                      json.dumps(["a"]), 1.0))
    keys = open_keys(str(path))
    try:
        found = keys.verify(f"dmk_abc123_{secret}")
        assert found is not None and found.scopes == SCOPES and found.spaces == ("a",)
    finally:
        keys.close()


@pytest.mark.postgres
def test_keys_cli_against_postgres(pg_url: str) -> None:  # noqa: F811 - fixture
    """`deltamem keys create/list/revoke` work against a postgresql:// URL."""
    invoke: Callable[..., dict[str, object]] = _cli
    created = invoke("keys", "create", "--db", pg_url, "--space", "a", "--scope", "read",
                     "--rate-limit", "10")
    assert str(created["key"]).startswith("dmk_") and created["scopes"] == ["read"]
    listed = invoke("keys", "list", "--db", pg_url)["keys"]
    assert isinstance(listed, list) and [k["id"] for k in listed] == [created["id"]]
    assert str(created["key"]) not in json.dumps(listed)
    assert invoke("keys", "revoke", str(created["id"]), "--db", pg_url)["revoked"] is True


def _cli(*args: str) -> dict[str, object]:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    data: dict[str, object] = json.loads(result.stdout)
    return data


def test_verifying_a_key_never_waits_for_the_write_lock(tmp_path: Path) -> None:
    """Another process holds SQLite's write lock (a long batch): a read's key check still
    answers at once; the key's use is written once the lock is free, at a later request."""
    from deltamem.store.sqlite import SQLiteStore

    db = str(tmp_path / "k.db")
    setup = open_keys(db)
    record, secret = setup.create(["a"])
    setup.close()
    holder = SQLiteStore(db)
    busy = KeyStore(SQLiteStore(db, busy_timeout=0.2), owned=True)
    try:
        with holder.write("a"):
            assert busy.verify(secret) == record  # no StoreError: it did not wait for the lock
            busy.flush()  # the background write gave up (locked); nothing was recorded
        assert busy.list()[0].last_used_at is None
        busy.verify(secret)  # the next use tries again, and the lock is free now
        busy.flush()
        assert busy.list()[0].last_used_at is not None
    finally:
        busy.close()
        holder.close()
