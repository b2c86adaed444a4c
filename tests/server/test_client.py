"""deltamem.Client and AsyncClient against the real server on loopback, and the wire models.

Every route's real answer is checked against its model of :mod:`deltamem.formats.api` both ways: the
model accepts it, and dumping the model gives back exactly the JSON the server sent (a field
the server sends that the model lacks would be dropped, and fail).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import BaseModel
from server_live import LiveServer

from deltamem import AsyncClient, Client, Episode, Step
from deltamem.errors import EpisodeError, NodeNotFound, RemoteError
from deltamem.formats import api
from helpers import make_episode

pytestmark = pytest.mark.server

KITCHEN = "a kitchen with a fridge, a microwave and a table"
LONGER = ("go to kitchen", "open microwave", "take apple", "heat apple")


def exact(model: type[BaseModel], data: Any) -> BaseModel:
    """``data`` parsed into ``model``, asserting that nothing was lost or invented."""
    parsed = model.model_validate(data)
    assert parsed.model_dump(mode="json", exclude_unset=True) == data, model.__name__
    return parsed


@pytest.fixture
def client(live: LiveServer) -> Iterator[Client]:
    with Client(live.url, api_key=live.key_a, space="a") as c:
        yield c


def test_client_speaks_the_facade_vocabulary(client: Client, tmp_path: Path) -> None:
    """learn, learn_many, recall, record_outcome, show, list_nodes, stats, consolidate,
    export, import_, delete and forget, each with a typed result."""
    first = client.learn(make_episode(env=KITCHEN))
    assert isinstance(first, api.LearnOut) and first.task.action == "root"
    batch = client.learn_many([make_episode(actions=LONGER, env=KITCHEN)] * 4)
    assert [r.task.action for r in batch.results] == ["delta", "dedup", "dedup", "dedup"]
    assert [r.index for r in batch.results] == [0, 1, 2, 3]

    recall = client.recall(task="heat the apple", env=KITCHEN, explain=True)
    assert recall.task.matched and recall.task.skill is not None
    assert "open microwave" in recall.task.skill.steps and recall.explain is not None
    node = recall.task.node
    assert node is not None and recall.task.chain[-1].id == node

    shown = client.show(node)
    assert shown.id == node and shown.experience.type == "skill"
    assert "open microwave" in shown.experience.steps
    # the batch's successes consolidated root -> delta into one root, which replaced them
    listed = client.list_nodes("task", kind="root")
    assert listed.total == 1 and listed.nodes[0].kind == "root" and listed.nodes[0].id == node
    assert listed.nodes[0].key == "heat the apple"
    assert client.list_nodes(limit=1).truncated
    assert client.stats().task.nodes >= 1

    counted = client.record_outcome([node], success=False)
    assert counted == api.OutcomeOut(nodes=[node], success=False, consolidated=[])
    assert client.show(node).stats.failures == 1
    consolidated = client.consolidate()
    assert isinstance(consolidated, api.ConsolidateOut) and consolidated.dry_run is False
    assert all(isinstance(c, api.ConsolidationOut) for c in consolidated.consolidated)

    export = tmp_path / "a.jsonl"
    records = client.export(export)
    assert records == len(export.read_text().splitlines()) and records > 2
    with Client(client.base_url, space="b") as anonymous, pytest.raises(RemoteError) as info:
        anonymous.stats()
    assert info.value.status == 401 and info.value.kind == "Unauthorized"

    deleted = client.delete(node)
    assert deleted.deleted[0] == node
    assert client.forget().deleted_nodes >= 1
    imported = client.import_(export)
    assert imported.nodes == records - 1 - imported.episodes


def test_errors_are_the_library_exceptions(client: Client, live: LiveServer) -> None:
    """NodeNotFound and EpisodeError come back as themselves; auth and reachability are
    RemoteError."""
    with pytest.raises(NodeNotFound) as missing:
        client.show("t-missing")
    assert str(missing.value) == "no node 't-missing' in space 'a'"
    assert missing.value.node_id == "t-missing"
    with pytest.raises(EpisodeError) as bad:
        client.learn({"task": "x", "success": "yes"})
    assert bad.value.field == "success" and "success" in str(bad.value)
    with (Client(live.url, api_key=live.key_a, space="other") as wrong_space,
          pytest.raises(RemoteError) as forbidden):
        wrong_space.stats()
    assert forbidden.value.status == 403
    with (Client("http://127.0.0.1:9", api_key="x") as nowhere,
          pytest.raises(RemoteError, match="no answer") as down):
        nowhere.stats()
    assert down.value.status is None


def test_async_client_matches_the_sync_one(live: LiveServer, tmp_path: Path) -> None:
    async def scenario() -> tuple[api.LearnOut, list[api.RecallOut], api.StatsOut, int]:
        async with AsyncClient(live.url, api_key=live.key_a, space="a") as mem:
            learned = await mem.learn(Episode(task="heat the apple", env=KITCHEN, success=True,
                                              steps=(Step("heat apple", "Done."),)))
            recalls = await asyncio.gather(*(mem.recall(task="heat the apple", env=KITCHEN)
                                             for _ in range(4)))
            with pytest.raises(NodeNotFound):
                await mem.show("t-missing")
            return learned, list(recalls), await mem.stats(), await mem.export(tmp_path / "x")

    learned, recalls, stats, exported = asyncio.run(scenario())
    assert {r.task.node for r in recalls} == {learned.task.node}
    assert stats.episodes == 1 and exported == 1 + stats.task.nodes + stats.env.nodes + 1


def test_every_route_answers_exactly_its_model(live: LiveServer, tmp_path: Path) -> None:
    """The raw JSON of every route, successes and errors, round-trips through its model."""
    with httpx.Client(base_url=live.url, timeout=30.0,
                      headers={"Authorization": f"Bearer {live.key_a}"}) as http:
        def call(method: str, path: str, model: type[BaseModel], status: int = 200,
                 **kwargs: Any) -> Any:
            response = http.request(method, f"/v1/spaces/a{path}", **kwargs)
            assert response.status_code == status, response.text
            return exact(model, response.json())

        episode = {"task": "heat the apple", "env": KITCHEN, "success": True, "score": 1.0,
                   "steps": [{"action": a, "observation": "ok"} for a in LONGER[:2]]}
        call("POST", "/learn", api.LearnOut, json=episode)
        longer = {**episode, "steps": [{"action": a, "observation": "ok"} for a in LONGER]}
        failure = {**episode, "success": False, "steps": [{"action": "look", "observation": ""}]}
        call("POST", "/learn", api.BatchOut, json={"episodes": [longer, longer, longer, failure]})
        recall = call("POST", "/recall", api.RecallOut, json={"task": "heat the apple",
                                                              "env": KITCHEN, "explain": True})
        call("POST", "/recall", api.RecallOut, json={"task": "an unrelated goal"})
        node = recall.task.node
        call("GET", f"/nodes/{node}", api.ShowOut)
        call("GET", f"/nodes/{recall.env.node}", api.ShowOut)
        call("GET", "/nodes", api.NodeListOut, params={"outcome": "failure"})
        call("GET", "/stats", api.StatsOut)
        call("POST", "/outcome", api.OutcomeOut, json={"nodes": [node], "success": True})
        call("POST", "/outcome", api.ErrorBody, 404, json={"nodes": ["t-missing"],
                                                            "success": True})
        call("POST", "/outcome", api.ErrorBody, 422, json={"nodes": [], "success": True})
        call("POST", "/consolidate", api.ConsolidateOut)
        call("POST", "/consolidate", api.ConsolidateOut, params={"dry_run": "true"})
        export = http.get("/v1/spaces/a/export")
        assert export.headers["content-type"].startswith("application/x-ndjson")
        call("GET", "/nodes/t-missing", api.ErrorBody, 404)
        call("POST", "/learn", api.ErrorBody, 422, json={"task": "x", "success": 3})
        call("POST", "/recall", api.ErrorBody, 422, json={"top_k": 0})
        call("GET", "/nodes", api.ErrorBody, 422, params={"tree": "bogus"})
        call("DELETE", f"/nodes/{node}", api.DeleteOut)
        call("DELETE", "", api.ForgetOut)
        call("POST", "/import", api.ImportOut, content=export.content,
             headers={"Content-Type": "application/x-ndjson"})
        exact(api.HealthOut, http.get("/healthz").json())
        exact(api.ReadyOut, http.get("/readyz").json())
        anonymous = httpx.get(f"{live.url}/v1/spaces/a/stats")
        assert anonymous.status_code == 401
        exact(api.ErrorBody, anonymous.json())


def test_a_failure_match_carries_its_lesson(client: Client) -> None:
    """A recall whose best match is a failure reports the lesson (an optional field)."""
    client.learn(make_episode(task="open the safe", env="a vault", success=False,
                              actions=("pull handle",)))
    recall = client.recall(task="open the safe", env="a vault")
    assert recall.task.lesson is not None and recall.task.skill is None
    assert json.loads(recall.model_dump_json())["task"]["lesson"]["failed"]


def test_client_corrects_and_forgets_a_node(client: Client, live: LiveServer) -> None:
    """correct (a new root supersedes the node) and its errors, sync and async; delete."""
    learned = client.learn(make_episode(env=KITCHEN))
    node = learned.task.node
    assert node is not None
    done = client.correct(node, steps=["go to kitchen", "heat apple in microwave"],
                          reason="the microwave heats it")
    assert isinstance(done, api.CorrectionOut) and done.of == node and done.kind == "steps"
    recall = client.recall(task="heat the apple", env=KITCHEN)
    assert recall.task.node == done.node
    assert recall.task.skill is not None and "heat apple in microwave" in recall.task.skill.steps
    with pytest.raises(EpisodeError):
        client.correct(node)  # no correction given
    with pytest.raises(NodeNotFound):
        client.correct("t-0000000000000000", wrong=True)

    async def wrong() -> api.CorrectionOut:
        async with AsyncClient(live.url, api_key=live.key_a, space="a") as aclient:
            return await aclient.correct(done.node, wrong=True, reason="retracted")

    assert asyncio.run(wrong()).kind == "wrong"
    assert done.node in client.delete(done.node).deleted


def test_client_filters_recall_and_list_by_episode_meta(client: Client,
                                                        live: LiveServer) -> None:
    """``filters=`` on recall and list_nodes, sync and async, keeps only the nodes of the
    episodes whose meta matches; a bad filter is one clear error."""
    alice = client.learn(make_episode(env=KITCHEN, user="alice", run=7))
    bob = client.learn(make_episode(actions=LONGER, env=KITCHEN, user="bob"))
    for who, learned in (("alice", alice), ("bob", bob)):
        got = client.recall(task="heat the apple", env=KITCHEN, filters={"user": who})
        assert got.task.node == learned.task.node
    assert client.recall(task="heat the apple", filters={"user": "alice", "run": 7}).task.matched
    assert not client.recall(task="heat the apple", filters={"user": "carol"}).task.matched
    listed = client.list_nodes(filters={"user": "bob"})
    assert {n.id for n in listed.nodes} == {bob.task.node, bob.env.node}
    assert client.list_nodes("task", filters={"user": "alice"}).nodes[0].id == alice.task.node
    with pytest.raises(RemoteError, match="filters"):
        client.recall(task="heat the apple", filters={"user": ["a", "b"]})
    with pytest.raises(RemoteError, match="key=value"):  # a 422 naming the field, as recall's
        client.list_nodes(filters={"": "x"})

    async def scenario() -> tuple[api.RecallOut, api.NodeListOut]:
        async with AsyncClient(live.url, api_key=live.key_a, space="a") as mem:
            return (await mem.recall(task="heat the apple", filters={"user": "bob"}),
                    await mem.list_nodes(filters={"user": "alice"}))

    recall, nodes = asyncio.run(scenario())
    assert recall.task.node == bob.task.node
    assert {n.id for n in nodes.nodes} == {alice.task.node, alice.env.node}
