"""The one schema-migration runner both SQL backends use.

A backend's migrations are an append-only list: position ``i`` holds the statements that take
a database from version ``i`` to ``i + 1``. Several named tracks may live in one database (the
memory itself, and later e.g. API keys), each a list of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from deltamem.errors import SchemaError

Migrations = Sequence[Sequence[str]]


def pending(version: int, migrations: Migrations, where: str) -> range:
    """The versions still to apply to a database at ``version``.

    Raises:
        SchemaError: the database is newer than this deltamem.
    """
    latest = len(migrations)
    if version > latest:
        raise SchemaError(f"{where} has schema version {version}, newer than this deltamem "
                          f"({latest}); upgrade deltamem to open it")
    return range(version, latest)


def migrate(version: int, migrations: Migrations, where: str, *,
            execute: Callable[[str], object], record: Callable[[int], object]) -> int:
    """Apply every pending migration in order (inside the caller's transaction).

    ``execute`` runs one statement and ``record(v)`` stores that the database is at ``v``.
    Returns the version reached.
    """
    for v in pending(version, migrations, where):
        for statement in migrations[v]:
            execute(statement)
        record(v + 1)
    return len(migrations)
