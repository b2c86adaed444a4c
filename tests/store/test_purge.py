"""``scrub`` rewrites secrets in place; ``purge`` (``scrub --purge``) drops the old values from
the store's files: on PostgreSQL the table files (``VACUUM FULL``) and, where the server deletes
spent WAL segments (``wal_recycle = off``), the WAL; on SQLite the file and its WAL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from deltamem.core.model import Episode, Step
from deltamem.embed.hashing import HashingEmbedder
from deltamem.engine.memory import DeltaMem
from deltamem.extract.trace import TraceExtractor
from deltamem.store.postgres import PostgresStore
from deltamem.store.sqlite import SQLiteStore
from helpers import TEST_SETTINGS
from pg_fixture import pg_server, pg_url  # noqa: F401,F811 - fixtures

TOKEN = "ghp_" + "Zr8Lq2Vx7Nc4Kd9Mw3Tb6Hy1Pf5Js0Ga8Ue"  # a GitHub token's shape


def episode() -> Episode:
    return Episode(task=f"clone with token {TOKEN}", env="a shell in /src/shop",
                   steps=[Step(f"git clone https://{TOKEN}@github.com/acme/shop.git", "ok"),
                          Step("make test", "passed")], success=True)


def holding(paths: list[Path]) -> list[str]:
    needle = TOKEN.encode()
    return [str(p) for p in paths if p.is_file() and needle in p.read_bytes()]


@pytest.mark.postgres
def test_postgres_purge_drops_the_old_values_from_table_files_and_wal(pg_server, pg_url):  # noqa: F811
    with psycopg.connect(pg_server, autocommit=True) as admin:
        data = Path(admin.execute("SHOW data_directory").fetchone()[0])
        admin.execute("ALTER SYSTEM SET wal_recycle = off")
        admin.execute("SELECT pg_reload_conf()")
    try:
        raw = DeltaMem(PostgresStore(pg_url), HashingEmbedder(), TraceExtractor(),
                       settings=TEST_SETTINGS.with_(redact=False))
        with raw:
            raw.learn(episode())
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("CHECKPOINT")
            files = [data / conn.execute("SELECT pg_relation_filepath(%s)", (t,)).fetchone()[0]
                     for t in ("nodes", "texts", "episodes")]
        wal = sorted((data / "pg_wal").glob("0*"))
        assert holding(files) and holding(wal)  # the secret, in the table files and the WAL
        with DeltaMem(PostgresStore(pg_url), HashingEmbedder(), TraceExtractor(),
                      settings=TEST_SETTINGS) as mem:
            assert mem.scrub(every_space=True)["nodes"] > 0
            with psycopg.connect(pg_url, autocommit=True) as conn:
                conn.execute("CHECKPOINT")
            assert holding(files)  # scrub alone: the old row versions are still there
            steps = mem.purge()
            assert "VACUUM FULL nodes" in steps and "VACUUM FULL texts" in steps
            assert "CHECKPOINT" in steps
            assert TOKEN not in repr(list(mem.nodes()))
        with psycopg.connect(pg_url, autocommit=True) as conn:
            now = [data / conn.execute("SELECT pg_relation_filepath(%s)", (t,)).fetchone()[0]
                   for t in ("nodes", "texts", "episodes")]
        assert holding(files) == [] and holding(now) == []
        assert holding(sorted((data / "pg_wal").glob("0*"))) == []
    finally:
        with psycopg.connect(pg_server, autocommit=True) as admin:
            admin.execute("ALTER SYSTEM RESET wal_recycle")
            admin.execute("SELECT pg_reload_conf()")


def test_sqlite_scrub_purge_from_the_command_line(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    with DeltaMem(SQLiteStore(db), HashingEmbedder(), TraceExtractor(),
                  settings=TEST_SETTINGS.with_(redact=False)) as old:
        old.learn(episode())
    assert holding([db, Path(f"{db}-wal")])
    env = {**os.environ, "DELTAMEM_EMBEDDER": "hashing"}
    proc = subprocess.run([sys.executable, "-m", "deltamem", "scrub", "--purge", "--db",
                           str(db), "--json"], capture_output=True, text=True, env=env,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["nodes"] > 0 and "VACUUM" in out["purged"]
    assert holding([db, Path(f"{db}-wal"), Path(f"{db}-shm")]) == []
