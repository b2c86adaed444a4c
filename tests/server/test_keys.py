"""API keys: only salted hashes are stored; scope, revocation and refusal of Postgres URLs."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from deltamem.errors import ConfigError
from deltamem.server.keys import KeyStore, open_keys

pytestmark = pytest.mark.server


def test_secret_is_never_stored(tmp_path: Path) -> None:
    """The table holds a salted hash; the secret appears in no column."""
    keys = KeyStore(tmp_path / "k.db")
    record, secret = keys.create(["a"], name="agent")
    keys.close()
    raw = secret.split("_", 2)[2]
    rows = sqlite3.connect(tmp_path / "k.db").execute("SELECT * FROM api_keys").fetchall()
    assert len(rows) == 1
    assert all(raw not in str(col) and raw.encode() not in (col if isinstance(col, bytes)
               else b"") for col in rows[0])


def test_verify_scope_and_revoke(tmp_path: Path) -> None:
    """A key verifies, allows only its spaces ('*' allows all), and stops after revoke."""
    keys = KeyStore(tmp_path / "k.db")
    a, secret_a = keys.create(["a", "b"])
    _, secret_all = keys.create(["*"])
    found = keys.verify(secret_a)
    assert found is not None and found.id == a.id
    assert found.allows("a") and found.allows("b") and not found.allows("c")
    everything = keys.verify(secret_all)
    assert everything is not None and everything.allows("anything")
    assert keys.verify(secret_a + "x") is None
    assert keys.verify("dmk_" + a.id + "_wrong") is None
    assert keys.revoke(a.id) and not keys.revoke(a.id)
    assert keys.verify(secret_a) is None
    assert [k.active for k in keys.list()] == [False, True]
    keys.close()


def test_two_keys_with_one_secret_prefix_do_not_collide(tmp_path: Path) -> None:
    """Each key has its own salt: the same secret under two ids hashes differently."""
    keys = KeyStore(tmp_path / "k.db")
    keys.create(["a"])
    keys.create(["a"])
    hashes = sqlite3.connect(tmp_path / "k.db").execute("SELECT salt, hash FROM api_keys")
    salts, digests = zip(*hashes.fetchall(), strict=True)
    assert len(set(salts)) == 2 and len(set(digests)) == 2
    keys.close()


def test_keys_refuse_postgres_and_empty_scope(tmp_path: Path) -> None:
    """Postgres URLs and keys without any space are configuration errors."""
    with pytest.raises(ConfigError, match="SQLite"):
        open_keys("postgresql://localhost/db")
    keys = open_keys(f"sqlite:{tmp_path / 'k.db'}")
    with pytest.raises(ConfigError, match="at least one space"):
        keys.create([" "])
    keys.close()
