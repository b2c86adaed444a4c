"""The files a memory writes are its user's alone: a new SQLite database (and its WAL and
shared-memory files) is created 0600, the folders created for it 0700, whatever the umask."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from deltamem.embed.hashing import HashingEmbedder
from deltamem.engine.memory import DeltaMem
from deltamem.extract.trace import TraceExtractor
from deltamem.store.sqlite import SQLiteStore
from helpers import TEST_SETTINGS, make_episode


@pytest.fixture
def open_umask():
    old = os.umask(0o022)
    yield
    os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_a_new_database_and_its_folders_are_private(tmp_path: Path, open_umask) -> None:
    db = tmp_path / "home" / ".deltamem" / "memory.db"
    mem = DeltaMem(SQLiteStore(db), HashingEmbedder(), TraceExtractor(), settings=TEST_SETTINGS)
    mem.learn(make_episode())
    for suffix in ("", "-wal", "-shm"):
        path = Path(f"{db}{suffix}")
        assert path.exists() and mode(path) == 0o600, (suffix, oct(mode(path)))
    assert mode(db.parent) == 0o700 and mode(db.parent.parent) == 0o700
    mem.close()


def test_an_existing_folder_and_file_keep_their_modes(tmp_path: Path, open_umask) -> None:
    folder = tmp_path / "team"
    folder.mkdir(mode=0o750)
    db = folder / "m.db"
    SQLiteStore(db).close()
    db.chmod(0o640)
    SQLiteStore(db).close()
    assert mode(folder) == 0o750 and mode(db) == 0o640


def test_the_hook_cold_path_makes_the_memory_folder_private(tmp_path: Path, open_umask,
                                                            monkeypatch) -> None:
    from deltamem.integrations.hookd import cold

    monkeypatch.setenv("DELTAMEM_EMBEDDER", "hashing")
    db = tmp_path / ".deltamem" / "memory.db"
    assert cold("session-start", {"cwd": str(tmp_path)}, db=str(db)) == {}
    assert mode(db.parent) == 0o700
