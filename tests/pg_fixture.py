"""A real PostgreSQL + pgvector server for the tests marked ``postgres``.

Import the fixtures into a test module with ``from pg_fixture import pg_server, pg_url``.

``pg_server`` (session) starts ``scripts/pg.sh`` in a temporary folder on a free loopback port,
or uses ``$DELTAMEM_TEST_PG_URL`` when set, and stops the server at the end. If the server cannot
start the tests FAIL (never skip): these tests are part of the full suite.
``pg_url`` (per test) is a URL whose ``search_path`` points at a fresh, empty schema, dropped
afterwards; a schema is much faster to make than a database and isolates just as well.
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest

PG_SH = Path(__file__).resolve().parents[1] / "scripts" / "pg.sh"


class _Server:
    """One server per test process, however many modules import the fixtures."""

    url: str | None = None
    folder: str | None = None

    @classmethod
    def start(cls) -> str:
        if cls.url is None:
            env = os.environ.get("DELTAMEM_TEST_PG_URL")
            cls.url = env or cls._spawn()
            with psycopg.connect(cls.url, autocommit=True) as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        return cls.url

    @classmethod
    def _spawn(cls) -> str:
        # Under /tmp, not pytest's tmp_path: as root the server runs as user `pgserver`, which
        # cannot enter pytest's private (0700) base folder.
        cls.folder = tempfile.mkdtemp(prefix="deltamem-pg-")
        atexit.register(cls.stop)
        done = subprocess.run([str(PG_SH), "start", cls.folder, str(_free_port())],
                              capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            pytest.fail(f"could not start PostgreSQL with {PG_SH}:\n{done.stderr}", pytrace=False)
        return done.stdout.strip().splitlines()[-1]

    @classmethod
    def stop(cls) -> None:
        if cls.folder is not None:
            subprocess.run([str(PG_SH), "stop", cls.folder], capture_output=True, timeout=120)
            shutil.rmtree(cls.folder, ignore_errors=True)
            cls.folder = None
        cls.url = None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def schema_url(base: str, schema: str) -> str:
    """``base`` with its search_path set to ``schema`` (then public, where pgvector lives)."""
    sep = "&" if "?" in base else "?"
    return f"{base}{sep}options={quote(f'-csearch_path={schema},public', safe='')}"


def new_schema(base: str) -> str:
    """Create an empty schema on the server at ``base``; return its name."""
    name = "t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {name}")
    return name


def drop_schema(base: str, name: str) -> None:
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """URL of the test server's ``postgres`` database (pgvector installed in ``public``)."""
    yield _Server.start()
    _Server.stop()


@pytest.fixture
def pg_url(pg_server: str) -> Iterator[str]:
    """URL of a fresh, empty schema on the test server, dropped after the test."""
    name = new_schema(pg_server)
    yield schema_url(pg_server, name)
    drop_schema(pg_server, name)
