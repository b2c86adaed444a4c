"""The one schema-migration runner both SQL backends use.

A backend's SQL module holds its migrations, an append-only list: position ``i`` holds the
statements that take a database from version ``i`` to ``i + 1``; and the statements that read
and record the version (``HAS_VERSION_TABLE``, ``CREATE_VERSION_TABLE``, ``READ_VERSION``,
``WRITE_VERSION``). :func:`upgrade` reads the version without any lock, and only a database
that is behind takes the backend's exclusive transaction to migrate.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from types import ModuleType
from typing import Any

from deltamem.errors import SchemaError

Migrations = Sequence[Sequence[str]]


def version(conn: Any, sql: ModuleType) -> int:
    """The schema version of the database behind ``conn`` (0 when it has no schema yet)."""
    if conn.execute(sql.HAS_VERSION_TABLE).fetchone() is None:
        return 0
    return int(conn.execute(sql.READ_VERSION).fetchone()[0])


def upgrade(conn: Any, sql: ModuleType, where: str, *,
            exclusive: Callable[[], AbstractContextManager[object]]) -> int:
    """Bring the schema behind ``conn`` up to date; return the version reached.

    ``exclusive()`` is a transaction on ``conn`` that no other migrator can run at the same
    time (SQLite: ``BEGIN IMMEDIATE``; PostgreSQL: an advisory lock).

    Raises:
        SchemaError: the database is newer than this deltamem.
    """
    latest = len(sql.MIGRATIONS)
    if not pending(version(conn, sql), sql.MIGRATIONS, where):
        return latest
    with exclusive():
        conn.execute(sql.CREATE_VERSION_TABLE)
        for v in pending(version(conn, sql), sql.MIGRATIONS, where):
            for statement in sql.MIGRATIONS[v]:
                conn.execute(statement)
            conn.execute(sql.WRITE_VERSION, (v + 1,))
    return latest


def pending(current: int, migrations: Migrations, where: str) -> range:
    """The versions still to apply to a database at ``current``.

    Raises:
        SchemaError: the database is newer than this deltamem.
    """
    latest = len(migrations)
    if current > latest:
        raise SchemaError(f"{where} has schema version {current}, newer than this deltamem "
                          f"({latest}); upgrade deltamem to open it")
    return range(current, latest)
