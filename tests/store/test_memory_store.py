"""The in-memory reference store passes the same conformance suite as every backend."""

from __future__ import annotations

import pytest

from deltamem.store.memory import InMemoryStore
from deltamem.testing.conformance import StoreConformance


class TestInMemoryStore(StoreConformance):
    """One object is the whole database, so every handle is the same one."""

    @pytest.fixture
    def store_factory(self):
        handle = InMemoryStore()
        return lambda: handle
