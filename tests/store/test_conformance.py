"""Run the shared store conformance suite against every SQLite flavour."""

from __future__ import annotations

import pytest

from deltamem.store.sqlite import SQLiteStore
from deltamem.testing.conformance import StoreConformance


class TestSQLiteFile(StoreConformance):
    """SQLite on a file (WAL mode): the embedded default."""

    @pytest.fixture
    def store_factory(self, tmp_path):
        return lambda: SQLiteStore(tmp_path / "mem.db")


class TestSQLiteMemory(StoreConformance):
    """SQLite in memory, as used by quick experiments (one handle is the whole database)."""

    @pytest.fixture
    def store_factory(self):
        handle = SQLiteStore(":memory:")
        return lambda: handle
