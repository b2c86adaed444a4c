"""Shared fixtures: a memory on a temporary SQLite file with the hashing test embedder."""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

from deltamem.embed.hashing import HashingEmbedder
from deltamem.engine.memory import DeltaMem
from deltamem.extract.trace import TraceExtractor
from deltamem.store.sqlite import SQLiteStore
from helpers import TEST_SETTINGS

# No per-example deadline: on a loaded CI machine it is a timed assertion that flakes. A hang is
# still caught by pytest-timeout (pyproject.toml).
settings.register_profile("deltamem", deadline=None)
# In CI (``CI`` set) the examples are derandomised: the same examples on every run, so a failure
# on a commit is that commit's, never a new random draw's. Locally they stay random (and failing
# examples are saved in .hypothesis/, which git ignores).
settings.register_profile("deltamem-ci", deadline=None, derandomize=True, database=None,
                          print_blob=True)
settings.load_profile("deltamem-ci" if os.environ.get("CI") else "deltamem")


@pytest.fixture
def db_path(tmp_path):
    return tmp_path / "mem.db"


@pytest.fixture
def mem(db_path):
    memory = DeltaMem(SQLiteStore(db_path), HashingEmbedder(), TraceExtractor(),
                      settings=TEST_SETTINGS)
    yield memory
    memory.close()
