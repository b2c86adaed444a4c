"""Client-facing error bodies keep the server's own addresses (LLM endpoint, database) out."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
import pytest
from server_live import ServerThread, make_keys, make_spaces

from deltamem.embed.hashing import HashingEmbedder
from deltamem.extract.llm import LLMExtractor
from deltamem.faces.server.rest import create_app
from deltamem.llm.openai_compat import OpenAICompatLLM
from helpers import TEST_SETTINGS

pytestmark = pytest.mark.server


def test_provider_and_missing_space_errors_name_no_internal_address(tmp_path: Path) -> None:
    """A 502 from an unreachable LLM and a 404 for a missing space: no URL, no file path."""
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    endpoint = f"http://127.0.0.1:{port}"
    llm = OpenAICompatLLM(endpoint, "m", max_retries=0)
    db = tmp_path / "served.db"
    _, key_all = make_keys(db)
    make_spaces(db, "a")
    app = create_app(db, embedder=HashingEmbedder(), extractor=LLMExtractor(llm),
                     settings=TEST_SETTINGS)
    episode = {"task": "heat the apple", "success": True,
               "steps": [{"action": "go to kitchen", "observation": "ok"}]}
    with ServerThread(app) as running, httpx.Client(base_url=f"http://127.0.0.1:{running.port}",
                      headers={"Authorization": f"Bearer {key_all}"}) as c:
        failed = c.post("/v1/spaces/a/learn", json=episode)
        missing = c.get("/v1/spaces/nothere/export")  # a read of it is empty; an export 404
    assert failed.status_code == 502 and failed.json()["error"]["type"] == "ProviderError"
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "SpaceNotFound"
    for response in (failed, missing):
        assert str(port) not in response.text and str(tmp_path) not in response.text
        assert "<server-side>" in response.json()["error"]["message"]


def test_a_store_error_body_names_no_database_path(tmp_path: Path) -> None:
    """A 409 from the SQLite store (here: the file is not a database; likewise 'stayed
    locked') names neither the file's path nor its folder, however the server was given it."""
    db = tmp_path / "broken.db"
    db.write_bytes(b"not a database" * 500)
    for given in (db, f"sqlite:{db}"):
        app = create_app(given, embedder=HashingEmbedder(), settings=TEST_SETTINGS,
                         require_keys=False)
        with ServerThread(app) as running, \
                httpx.Client(base_url=f"http://127.0.0.1:{running.port}") as c:
            stats = c.get("/v1/spaces/a/stats")
        assert stats.status_code == 409 and stats.json()["error"]["type"] == "StoreError"
        assert str(tmp_path) not in stats.text and "broken.db" not in stats.text
        assert "<server-side>" in stats.json()["error"]["message"]
