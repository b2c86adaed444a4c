"""Every operation of the table over REST, fed generated inputs (hypothesis): JSON bodies and
query strings built from the operation's own field names plus strangers, with any JSON value
in them, and node ids of any text. Each answer is 2xx, or 4xx with the one error envelope:
never a 5xx (a retracted skill once made recall 500; a keyless import record too)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deltamem.embed.hashing import HashingEmbedder
from deltamem.faces.server.rest import create_app
from deltamem.formats.operations import OPERATIONS, Operation
from helpers import TEST_SETTINGS

pytestmark = pytest.mark.server

REST_OPS = [op for op in OPERATIONS if op.on("rest")]
SCALARS = (st.none() | st.booleans() | st.integers(-(2**70), 2**70)
           | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=40))
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)
EPISODE = {"task": "heat the apple", "env": "a kitchen", "success": True,
           "steps": [{"action": "heat apple", "observation": "hot"}]}


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    db = Path(tmp_path_factory.mktemp("fuzz")) / "fuzz.db"
    app = create_app(db, embedder=HashingEmbedder(), settings=TEST_SETTINGS,
                     require_keys=False)
    with TestClient(app, raise_server_exceptions=False) as client:
        node = client.post("/v1/spaces/a/learn", json=EPISODE).json()["task"]["node"]
        assert client.post(f"/v1/spaces/a/nodes/{node}/correct",
                           json={"wrong": True}).status_code == 200
        client.node = node  # type: ignore[attr-defined]
        yield client


def inputs(op: Operation) -> st.SearchStrategy[dict[str, Any]]:
    names = st.sampled_from([*op.request.model_fields, "x", "node_id"])
    return st.dictionaries(names, JSON, max_size=5)


def _query(value: Any) -> Any:
    if isinstance(value, list):
        return [json.dumps(v) if not isinstance(v, str) else v for v in value]
    return value if isinstance(value, str) else json.dumps(value)


@pytest.mark.parametrize("op", REST_OPS, ids=[op.name for op in REST_OPS])
def test_generated_inputs_never_get_a_5xx(http: TestClient, op: Operation) -> None:
    @settings(max_examples=120, deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture,
                                     HealthCheck.too_slow])
    @given(fields=inputs(op), node=st.one_of(st.just(http.node), st.text(min_size=1)),  # type: ignore[attr-defined]
           raw=st.one_of(st.none(), st.binary(max_size=60)), space=st.sampled_from(["a", "b"]))
    def run(fields: dict[str, Any], node: str, raw: bytes | None, space: str) -> None:
        path = op.route.replace("{space}", space).replace("{node_id}", quote(node, safe=""))
        if op.in_query:
            answer = http.request(op.method, path,
                                  params={k: _query(v) for k, v in fields.items()})
        elif raw is not None:
            answer = http.request(op.method, path, content=raw,
                                  headers={"Content-Type": "application/json"})
        else:
            answer = http.request(op.method, path, json=fields)
        assert answer.status_code < 500, (op.name, fields, answer.text)
        if answer.status_code >= 400:
            assert set(answer.json()) == {"error"}, answer.text

    run()
