"""One meaning per operation: the same inputs (enums or their values) on every face, an absent
space reads as empty on every face, and the library's and the client's recall are one answer
model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from pydantic import BaseModel

from deltamem import Client, ConfigError, DeltaMem
from deltamem.core.model import NodeKind, Outcome, Tree
from deltamem.embed.hashing import HashingEmbedder
from deltamem.faces.server.rest import create_app
from deltamem.formats import api
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
        assert mem.list_nodes(tree) == mem.list_nodes(Tree.TASK)
        assert mem.list_nodes(tree).nodes != []
        deltas = mem.list_nodes(kind=kind).nodes
        assert deltas and all(r.kind == "delta" for r in deltas)
        failures = mem.list_nodes(outcome=outcome).nodes
        assert failures and all(r.outcome == "failure" for r in failures)
    listing = mem.list_nodes(limit=1)
    assert len(listing.nodes) == 1 and listing.total > 1 and listing.truncated
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


def test_library_and_client_recalls_are_one_answer_model(tmp_path: Path) -> None:
    """The library's recall and the client's are the same answer model
    (:class:`deltamem.formats.api.RecallOut`), equal field by field for the same question:
    ``task.node`` was a ``Node`` in the library and an id in the client, and only the client
    had ``skill``."""
    db = tmp_path / "s.db"
    with DeltaMem.open(db, embedder="hashing", settings=TEST_SETTINGS) as library:
        library.learn(make_episode())
        library.learn(make_episode(actions=("look around",), success=False))
        mine = library.recall("heat the apple", "a kitchen", explain=True)
        plain = library.recall("heat the apple", "a kitchen")
    app = create_app(db, embedder=HashingEmbedder(), settings=TEST_SETTINGS, require_keys=False)
    with TestClient(app) as http:
        client = Client("http://testserver", retries=0,
                        transport=httpx.MockTransport(lambda r: _forward(http, r)))
        theirs = client.recall(task="heat the apple", env="a kitchen", explain=True)
        theirs_plain = client.recall(task="heat the apple", env="a kitchen")
    for lib, remote in ((mine, theirs), (plain, theirs_plain)):
        assert isinstance(lib, api.RecallOut) and isinstance(remote, api.RecallOut)
        for name in api.RecallOut.model_fields:
            if name != "usage":  # time and embedder calls differ between two calls
                assert _fields(getattr(lib, name)) == _fields(getattr(remote, name)), name
        assert lib.model_fields_set == remote.model_fields_set
        assert lib.task.node == remote.task.node and isinstance(lib.task.node, str)
        assert type(lib.task.skill) is type(remote.task.skill) is api.SkillOut
        assert lib.task.skill == remote.task.skill
        assert lib.wire() | {"usage": None} == remote.wire() | {"usage": None}
        assert isinstance(lib.usage, api.UsageOut) and isinstance(remote.usage, api.UsageOut)
    # The library keeps its detail beside the answer: the matched Node, its scan, the vector.
    assert mine.task.matched_node is not None and mine.task.matched_node.id == mine.task.node
    assert mine.task.best is not None and mine.task.query is not None
    assert mine.to_wire().explain == theirs.explain and plain.to_wire(explain=True).explain


def _fields(value: object) -> object:
    """A field's value with its model's type forgotten (the library's answer subclasses the
    model to carry its detail; pydantic's ``==`` also compares the class)."""
    return value.model_dump() if isinstance(value, BaseModel) else value


def test_a_clients_recall_scores_in_the_library(mem: DeltaMem) -> None:
    """``record_outcome`` takes any recall answer, the library's or a parsed one."""
    recall = mem.recall("heat the apple")
    parsed = api.RecallOut.model_validate(recall.wire())
    assert mem.record_outcome(parsed, True).nodes == [recall.task.node]


# Operations of the table that neither the facade nor the clients have: the files of
# `export_skills` are written by the skills face (MCP tool, `deltamem skills export`).
NOT_ON_THE_FACADE = {"export_skills"}


def test_library_and_client_answer_one_model_for_every_operation(tmp_path: Path) -> None:
    """Every operation of the table answers the same shape in the library and in the client:
    its answer model, with the same fields (``learn``, ``record_outcome``, ``consolidate``,
    ``show``, ``list_nodes``, ``stats``, ``delete``, ``forget``, ``correct`` and the imports
    returned engine objects, dicts, lists or counts in the library and models in the client,
    or ``consolidate`` a list in one and a report in the other). Reads on the same data answer
    the same values."""
    from deltamem.core.model import Knowledge
    from deltamem.formats.operations import OPERATIONS, operation

    mine_db, theirs_db = tmp_path / "mine.db", tmp_path / "theirs.db"
    with DeltaMem.open(mine_db, embedder="hashing", settings=TEST_SETTINGS) as seed:
        seed.learn(make_episode())
        seed.learn(make_episode(actions=("go to kitchen", "open microwave", "take apple",
                                         "heat apple")))
        seed.learn(make_episode(actions=("look around",), success=False))
        [knowledge] = seed.add_roots([(Tree.ENV, "a pantry", Knowledge(
            "a pantry", ("shelf: flour", "shelf: sugar")), {})])
        seed.export(tmp_path / "seed.jsonl")
    theirs_db.write_bytes(mine_db.read_bytes())
    library = DeltaMem.open(mine_db, embedder="hashing", settings=TEST_SETTINGS)
    app = create_app(theirs_db, embedder=HashingEmbedder(), settings=TEST_SETTINGS,
                     require_keys=False)
    root = library.list_nodes("task", kind="root").nodes[0].id
    delta = library.list_nodes("task", kind="delta").nodes[0].id
    assert knowledge is not None
    calls: list[tuple[str, bool, Any]] = [  # (operation, same values, the call)
        ("recall", True, lambda f: f.recall("heat the apple", "a kitchen", explain=True)),
        ("list_nodes", True, lambda f: f.list_nodes("task", kind="delta", limit=5)),
        ("show", True, lambda f: f.show(delta)),
        ("stats", True, lambda f: f.stats()),
        ("consolidate", True, lambda f: f.consolidate(dry_run=True)),
        ("export", True, lambda f: f.export(tmp_path / f"{id(f)}.jsonl")),
        ("learn", False, lambda f: f.learn(make_episode(task="wash the plate"))),
        ("learn_many", False, lambda f: f.learn_many([make_episode(task="cool the egg"),
                                                      make_episode(task="slice the bread")])),
        ("record_outcome", False, lambda f: f.record_outcome([root], True)),
        ("correct", False, lambda f: f.correct(delta, steps=["heat apple"], reason="short")),
        ("forget_fact", False, lambda f: f.forget_fact(knowledge, "sugar", reason="eaten")),
        ("delete", False, lambda f: f.delete(delta)),
        ("forget", True, lambda f: f.forget()),
        ("import_", True, lambda f: f.import_(tmp_path / "seed.jsonl")),
    ]
    with library, TestClient(app) as http:
        client = Client("http://testserver", retries=0,
                        transport=httpx.MockTransport(lambda r: _forward(http, r)))
        for name, same, call in calls:
            mine, theirs = call(library), call(client)
            if name == "export":  # a file written, and its count of records
                assert type(mine) is type(theirs) is int and mine == theirs
                continue
            model = operation(name).answer
            assert isinstance(mine, model) and isinstance(theirs, model), name
            assert mine.model_fields_set == theirs.model_fields_set, name
            assert _keys(mine.wire()) == _keys(theirs.wire()), name
            if same:
                assert _without_usage(mine.wire()) == _without_usage(theirs.wire()), name
    assert {name for name, _, _ in calls} == \
        {op.name for op in OPERATIONS} - NOT_ON_THE_FACADE


def _keys(value: object) -> object:
    """The shape of a JSON value: its keys, nested (the first item of a list)."""
    if isinstance(value, dict):
        return {k: _keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_keys(value[0])] if value else []
    return type(value).__name__ if value is not None else None


def _without_usage(value: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in value.items() if k != "usage"}
