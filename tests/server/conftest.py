"""Fixtures for server tests: the REST server on a fresh database, over real HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from server_live import LiveServer, ServerThread, make_keys, make_spaces

from deltamem.embed.hashing import HashingEmbedder
from deltamem.faces.server.rest import create_app
from helpers import TEST_SETTINGS


@pytest.fixture
def live(tmp_path: Path) -> Iterator[LiveServer]:
    """The REST server on a fresh database holding the empty spaces ``a`` and ``b``, with the
    hashing test embedder (reads of a space that does not exist are 404)."""
    db = tmp_path / "served.db"
    key_a, key_all = make_keys(db)
    make_spaces(db, "a", "b")
    app = create_app(db, embedder=HashingEmbedder(), settings=TEST_SETTINGS)
    with ServerThread(app) as running:
        yield LiveServer(f"http://127.0.0.1:{running.port}", db, key_a, key_all)
