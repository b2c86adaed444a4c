"""The SQL of both backends lives in two modules that match name for name, in the same order."""

from __future__ import annotations

import inspect

from deltamem.store import _sql_postgres, _sql_sqlite, keys, migrations, postgres, sql, sqlite

POSTGRES_ONLY = ["MIGRATE_LOCK", "SPACE_LOCK", "LOCK_TIMEOUT"]  # its locks, last in its module


def _statements(module: object) -> list[str]:
    return [name for name, value in vars(module).items()
            if name.isupper() and not name.startswith("_") and isinstance(value, str | list | int)]


def test_both_sql_modules_define_the_same_statements_in_the_same_order():
    """A reader can diff the two modules: every shared name, same position."""
    lite, pg = _statements(_sql_sqlite), _statements(_sql_postgres)
    assert pg == lite + POSTGRES_ONLY


def test_the_shared_store_uses_every_shared_statement():
    """No statement is dead: the stores, the key table or the migration runner run each."""
    sources = "".join(inspect.getsource(m) for m in (sql, keys, migrations, sqlite, postgres))
    unused = [n for n in _statements(_sql_postgres)
              if f".{n}" not in sources]
    assert unused == []
    assert sqlite.SQLiteStore.sql is _sql_sqlite and postgres.PostgresStore.sql is _sql_postgres
