"""Run the shared store conformance suite against every SQLite flavour."""

from __future__ import annotations

import pytest

from deltamem.store.sqlite import SQLiteStore
from deltamem.testing.conformance import StoreConformance


class TestSQLiteFile(StoreConformance):
    """SQLite on a file (WAL mode): the embedded default."""

    @pytest.fixture
    def store(self, tmp_path):
        s = SQLiteStore(tmp_path / "mem.db")
        yield s
        s.close()


class TestSQLiteMemory(StoreConformance):
    """SQLite in memory, as used by quick experiments."""

    @pytest.fixture
    def store(self):
        s = SQLiteStore(":memory:")
        yield s
        s.close()
