"""One meaning per operation: the same inputs (enums or their values) on every face, an absent
space reads as empty on every face, and the library's and the client's recall share one shape."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from deltamem import Client, ConfigError, DeltaMem
from deltamem.core.model import NodeKind, Outcome, Tree
from deltamem.embed.hashing import HashingEmbedder
from deltamem.faces.server.rest import create_app
from helpers import TEST_SETTINGS, make_episode


@pytest.fixture
def mem(tmp_path: Path):
    with DeltaMem.open(tmp_path / "m.db", embedder="hashing", settings=TEST_SETTINGS) as m:
        m.learn(make_episode())
        m.learn(make_episode(actions=("look around",), success=False))
        m.learn(make_episode(actions=("go to kitchen", "open microwave", "take apple",
                                      "heat apple")))
        yield m


def test_list_nodes_takes_enums_or_their_values(mem: DeltaMem) -> None:
    """``list_nodes("task")`` was an AttributeError and ``kind="delta"`` / ``outcome="failure"``
    silently found nothing (enums compared with ``is``)."""
    for tree, kind, outcome in ((Tree.TASK, NodeKind.DELTA, Outcome.FAILURE),
                                ("task", "delta", "failure")):
        assert mem.list_nodes(tree) == mem.list_nodes(Tree.TASK) != []
        deltas = mem.list_nodes(kind=kind)
        assert deltas and all(r["kind"] == "delta" for r in deltas)
        failures = mem.list_nodes(outcome=outcome)
        assert failures and all(r["outcome"] == "failure" for r in failures)
    listing = mem.list_nodes(limit=1)
    assert len(listing) == 1 and listing.total > 1 and listing.truncated
    with pytest.raises(ConfigError, match="tree must be one of"):
        mem.list_nodes("tasks")


def test_an_unwritten_space_reads_as_empty_over_rest_as_in_the_library(tmp_path: Path) -> None:
    """Recall, list and stats of a space nobody wrote to answer empty (REST said 404), and the
    reads create nothing."""
    app = create_app(tmp_path / "r.db", embedder=HashingEmbedder(), settings=TEST_SETTINGS,
                     require_keys=False)
    with TestClient(app) as http:
        recall = http.post("/v1/spaces/fresh/recall", json={"task": "heat the apple"})
        assert recall.status_code == 200, recall.text
        assert recall.json()["task"]["matched"] is False and recall.json()["context"] == ""
        assert http.get("/v1/spaces/fresh/nodes").json()["total"] == 0
        assert http.get("/v1/spaces/fresh/stats").json()["episodes"] == 0
        assert http.delete("/v1/spaces/fresh").json()["deleted_nodes"] == 0
        client = Client("http://testserver", space="fresh", retries=0,
                        transport=httpx.MockTransport(lambda r: _forward(http, r)))
        assert client.recall(task="heat the apple").task.matched is False
    with DeltaMem.open(tmp_path / "r.db", embedder="hashing", settings=TEST_SETTINGS,
                       space="fresh") as library:
        assert library.recall("heat the apple").task.matched is False
        assert not library.exists  # no read created it


def _forward(http: TestClient, request: httpx.Request) -> httpx.Response:
    answer = http.request(request.method, str(request.url), content=request.content,
                          headers=dict(request.headers))
    return httpx.Response(answer.status_code, content=answer.content,
                          headers=answer.headers)


def test_library_and_client_recalls_share_one_shape(mem: DeltaMem) -> None:
    """``task.node_id`` and ``task.skill`` mean the same in the library and the client's model
    (only the client had ``.skill``)."""
    recall = mem.recall("heat the apple", explain=True)
    wire = recall.to_wire()
    assert recall.task.node_id == wire.task.node_id == wire.task.node
    assert recall.task.skill is not None and wire.task.skill is not None
    assert list(recall.task.skill.steps) == wire.task.skill.steps
    assert wire.explain is not None  # recall(explain=True) answers with every term
