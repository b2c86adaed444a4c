"""One pydantic model per shape: each input and output has a single model in
:mod:`deltamem.formats.api` that validates it and documents it on every face.

The episode is the case the architecture review found defined three times (hand-written checks
in ``episodes.py``, a documentation-only model for REST, another model for MCP). Here its one
model must be what the REST OpenAPI document shows, what the MCP ``learn`` tool's input schema
holds, and what the CLI's JSON Lines reader and the library's ``episode_from_dict`` validate
with; a field added to the model must reach all of them, and a bad field must be refused naming
the same field everywhere. The answers are built as their wire models (``to_wire``), and the
client's request bodies are the request models' fields.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from fastapi.testclient import TestClient
from pydantic import Field

from deltamem.client import Client
from deltamem.embed.hashing import HashingEmbedder
from deltamem.engine.memory import DeltaMem
from deltamem.engine.results import BatchResult
from deltamem.errors import EpisodeError
from deltamem.extract.trace import TraceExtractor
from deltamem.faces.cli.app import main as cli_main
from deltamem.faces.server.mcp import build_server
from deltamem.faces.server.rest import create_app
from deltamem.formats import api
from deltamem.formats.episodes import episode_from_dict
from deltamem.store.sqlite import SQLiteStore
from helpers import TEST_SETTINGS

pytestmark = pytest.mark.server

COMPONENTS = "#/components/schemas/{model}"
EPISODE = {"task": "heat the apple", "env": "a kitchen", "success": True, "score": 1.0,
           "steps": [{"action": "go to kitchen", "observation": "You are in the kitchen."}],
           "meta": {"user": "alice"}}
# Words of a schema that describe rather than constrain (a face may word its own help).
PROSE = {"description", "title", "default", "examples"}


def bounds(schema: dict[str, Any]) -> dict[str, Any]:
    """A property's schema without its prose: the type and the bounds."""
    return {k: (bounds(v) if isinstance(v, dict) else v) for k, v in schema.items()
            if k not in PROSE}


def mcp_tools(tmp_path: Path) -> dict[str, Any]:
    mem = DeltaMem(SQLiteStore(tmp_path / "mcp.db"), HashingEmbedder(), TraceExtractor(),
                   settings=TEST_SETTINGS)
    try:
        return {t.name: t for t in anyio.run(build_server(mem).list_tools)}
    finally:
        mem.close()


def openapi(tmp_path: Path) -> dict[str, Any]:
    app = create_app(tmp_path / "rest.db", embedder=HashingEmbedder(), settings=TEST_SETTINGS,
                     require_keys=False)
    return app.openapi()


def learn_body(spec: dict[str, Any]) -> list[str]:
    learn = spec["paths"]["/v1/spaces/{space}/learn"]["post"]
    body = learn["requestBody"]["content"]["application/json"]["schema"]["anyOf"]
    return [b["$ref"].rsplit("/", 1)[1] for b in body]


def cli(tmp_path: Path, lines: list[Any]) -> tuple[int, dict[str, Any], str]:
    """``deltamem learn FILE --json`` on these episodes: exit code, JSON answer, stderr."""
    path = tmp_path / "episodes.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in lines), encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
            pytest.raises(SystemExit) as done:
        cli_main(["learn", str(path), "--db", str(tmp_path / "cli.db"), "--json"])
    code = done.value.code
    return code if isinstance(code, int) else 0, json.loads(out.getvalue()), err.getvalue()


def test_the_episode_model_is_the_schema_of_every_face(tmp_path: Path) -> None:
    """REST documents api.EpisodeIn and api.StepIn exactly; the MCP learn tool's steps are
    api.StepIn and its other episode fields have EpisodeIn's types and bounds."""
    episode = api.EpisodeIn.model_json_schema(ref_template=COMPONENTS)
    step = episode.pop("$defs")["StepIn"]

    spec = openapi(tmp_path)
    schemas = spec["components"]["schemas"]
    assert learn_body(spec) == ["EpisodeIn", "EpisodesIn"]
    assert schemas["EpisodeIn"] == episode
    assert schemas["StepIn"] == step

    learn = mcp_tools(tmp_path)["learn"].input_schema
    assert learn["$defs"]["StepIn"] == step
    props = learn["properties"]
    assert props["steps"]["anyOf"][0]["items"] == {"$ref": "#/$defs/StepIn"}
    assert bounds(props["steps"]["anyOf"][0])["maxItems"] == episode["properties"]["steps"][
        "maxItems"]
    for name in ("env", "score", "success"):
        assert bounds(props[name]) == bounds(episode["properties"][name]), name
    meta = bounds(episode["properties"]["meta"])
    assert bounds(props["meta"]) == {"anyOf": [meta, {"type": "null"}]}
    task = bounds(episode["properties"]["task"])
    assert bounds(props["task"])["anyOf"][0]["maxLength"] == task["maxLength"]


def test_the_request_models_are_the_mcp_tools_arguments(tmp_path: Path) -> None:
    """The tools derived from the operation table (recall, list, correct) take the request
    models' fields with their bounds and defaults; record_outcome (written by hand, for the
    session's last recall) takes the same node ids."""
    tools = mcp_tools(tmp_path)

    def same(tool: str, model: type[api.BaseModel], pairs: dict[str, str]) -> None:
        mine = model.model_json_schema()["properties"]
        theirs = tools[tool].input_schema["properties"]
        for ours, name in pairs.items():
            assert bounds(theirs[name]) == bounds(mine[ours]), (tool, name)

    same("recall", api.RecallRequest, {"task": "task", "env": "env", "filters": "filters",
                                       "budget_tokens": "budget_tokens", "explain": "explain",
                                       "top_k": "top_k"})
    same("list", api.ListRequest, {name: name for name in api.ListRequest.model_fields})
    same("correct", api.CorrectRequest, {"steps": "steps", "reason": "reason"})
    outcome = bounds(api.OutcomeRequest.model_json_schema()["properties"]["nodes"])
    node_ids = bounds(tools["record_outcome"].input_schema["properties"]["node_ids"])
    assert node_ids["anyOf"][0] == {k: v for k, v in outcome.items() if k != "minItems"}


@pytest.mark.parametrize(("patch", "field"), [
    ({"steps": [{"action": "a", "reward": "1"}]}, "steps[0].reward"),
    ({"steps": [{"action": "a", "mood": "calm"}]}, "steps[0].mood"),
    ({"env": "\ud800"}, "env"),
    ({"score": float("inf")}, "score"),
])
def test_every_face_refuses_a_bad_episode_naming_the_same_field(
        tmp_path: Path, patch: dict[str, Any], field: str) -> None:
    bad = {**EPISODE, **patch}
    with pytest.raises(EpisodeError) as library:
        episode_from_dict(bad)
    assert library.value.field == field

    if patch != {"score": float("inf")}:  # JSON has no Infinity: only a library caller sends it
        code, answer, stderr = cli(tmp_path, [EPISODE, bad])
        assert code == 2 and answer["episodes"] == 1
        (error,) = answer["errors"]
        assert error["line"] == 2 and error["field"] == field
        assert f"'{field}'" in stderr

        app = create_app(tmp_path / "rest.db", embedder=HashingEmbedder(),
                         settings=TEST_SETTINGS, require_keys=False)
        with TestClient(app) as http:
            refused = http.post("/v1/spaces/s/learn", content=json.dumps(bad),
                                headers={"content-type": "application/json"})
        assert refused.status_code == 422
        assert refused.json()["error"] == {"type": "EpisodeError", "field": field,
                                           "message": str(library.value)}


def test_a_field_added_to_the_episode_model_reaches_every_face(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Change the model only: the library and CLI accept and bound the new field, the REST
    document and the MCP learn tool's schema show it."""

    class StepIn(api.StepIn):
        mood: str = Field("", max_length=5, description="How it went.")

    class EpisodeIn(api.EpisodeIn):
        steps: list[StepIn] = Field(default_factory=list)  # type: ignore[assignment]

    class EpisodesIn(api.EpisodesIn):
        episodes: list[EpisodeIn] = Field(max_length=api.MAX_BATCH)  # type: ignore[assignment]

    monkeypatch.setattr(api, "StepIn", StepIn)
    monkeypatch.setattr(api, "EpisodeIn", EpisodeIn)
    monkeypatch.setattr(api, "EpisodesIn", EpisodesIn)
    tagged = {**EPISODE, "steps": [{"action": "go to kitchen", "mood": "calm"}]}

    assert episode_from_dict(tagged).steps[0].action == "go to kitchen"
    with pytest.raises(EpisodeError) as too_long:
        episode_from_dict({**EPISODE, "steps": [{"action": "a", "mood": "furious"}]})
    assert too_long.value.field == "steps[0].mood"
    code, answer, _ = cli(tmp_path, [tagged])
    assert code == 0 and answer["episodes"] == 1

    spec = openapi(tmp_path)
    (single, _) = learn_body(spec)
    step_ref = spec["components"]["schemas"][single]["properties"]["steps"]["items"]["$ref"]
    assert "mood" in spec["components"]["schemas"][step_ref.rsplit("/", 1)[1]]["properties"]

    learn = mcp_tools(tmp_path)["learn"].input_schema
    assert "mood" in learn["$defs"]["StepIn"]["properties"]


def test_answers_are_built_as_their_wire_models(mem: DeltaMem) -> None:
    """The library's JSON is its wire model dumped; a model refuses a field it lacks."""
    learned = mem.learn(episode_from_dict(EPISODE))
    assert isinstance(learned, api.LearnOut)
    assert api.LearnOut.model_validate(learned.wire()).wire() == learned.wire()
    recall = mem.recall("heat the apple", "a kitchen")
    assert isinstance(recall.to_wire(explain=True), api.RecallOut)
    assert recall.to_dict(explain=True)["explain"]["task"]["tree"] == "task"
    batch = BatchResult.of([learned]).placed([(0, 7)])
    assert isinstance(batch, api.BatchOut) and batch.results[0].line == 7
    with pytest.raises(TypeError, match="no field 'mood'"):
        api.WriteOut.build(action="root", node=None, parent=None, mood="calm")


def test_the_client_sends_the_request_models_fields() -> None:
    """Every body the client builds validates against its request model as is."""
    client = Client("http://127.0.0.1:1", space="s", retries=0)
    try:
        recall = client._call("recall", task="t", env="e", top_k=3, explain=True,
                              budget_tokens=100, filters={"user": "alice"})
        assert api.RecallRequest.model_validate(recall.json).top_k == 3
        outcome = client._call("record_outcome", nodes=["t-1"], success=True)
        assert api.OutcomeRequest.model_validate(outcome.json).nodes == ["t-1"]
        correct = client._call("correct", "t-1", steps=["a"], wrong=False, reason="why")
        assert api.CorrectRequest.model_validate(correct.json).steps == ["a"]
        assert correct.path == "/v1/spaces/s/nodes/t-1/correct"
        listed = client._call("list_nodes", tree="task", filters={"user": "alice"}, limit=5)
        assert api.ListRequest.model_validate(listed.params).filters == {"user": "alice"}
        batch = client._learn_many([EPISODE])
        assert api.EpisodesIn.model_validate(batch.json).episodes[0].task == EPISODE["task"]
    finally:
        client.close()
    with pytest.raises(TypeError, match="no field 'goal'"):
        api.request_body(api.RecallRequest, goal="x")
