"""The operation table is the one declaration of an operation: a row added to it (with its facade
method and models) appears on the REST server (and its OpenAPI document), as an MCP tool behind
its scope, on both Python clients and on the async facade, with nothing else written."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client as McpClient
from pydantic import BaseModel, ConfigDict, Field
from server_live import ServerThread, make_keys

from deltamem import AsyncClient, AsyncDeltaMem, Client, DeltaMem, RemoteError
from deltamem.embed.hashing import HashingEmbedder
from deltamem.faces.server.mcp import build_server, tool_scopes
from deltamem.faces.server.rest import create_app, route_scopes
from deltamem.formats import api, operations
from deltamem.formats.operations import OPERATIONS, Operation
from helpers import TEST_SETTINGS, make_episode

pytestmark = pytest.mark.server


class EchoRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(max_length=50, description="What to echo.")
    times: int = Field(1, ge=1, le=3, description="How often.")


class EchoOut(api.Model):
    node: str
    echoed: str
    space: str


ECHO = Operation(
    "echo_node", EchoRequest, EchoOut, "POST", "/nodes/{node_id}/echo", "write",
    idempotent=True, title="Echo", summary="Echo a text next to a node id.",
    description="A test double of an operation: echoes `text` `times` times next to a node id.")


def echo_node(self: DeltaMem, node_id: str, *, text: str, times: int = 1) -> EchoOut:
    """The facade method of the dummy operation."""
    self.get(node_id)  # NodeNotFound for a missing node, as a real operation
    return EchoOut.build(node=node_id, echoed=text * times, space=self.space)


@pytest.fixture
def echo(monkeypatch: pytest.MonkeyPatch) -> Iterator[Operation]:
    monkeypatch.setattr(operations, "OPERATIONS", (*OPERATIONS, ECHO))
    monkeypatch.setattr(DeltaMem, "echo_node", echo_node, raising=False)
    yield ECHO


def test_a_new_row_appears_on_every_face(echo: Operation, tmp_path: Path) -> None:
    db = tmp_path / "echo.db"
    key, admin = make_keys(db)
    with DeltaMem.open(db, embedder="hashing", settings=TEST_SETTINGS, space="a") as mem:
        node = mem.learn(make_episode()).task.node
    app = create_app(db, embedder=HashingEmbedder(), settings=TEST_SETTINGS)
    assert route_scopes()["echo_node"] == "write"
    schema = app.openapi()["paths"]["/v1/spaces/{space}/nodes/{node_id}/echo"]["post"]
    assert schema["operationId"] == "echo_node" and schema["x-deltamem-idempotent"] is True

    with ServerThread(app) as running:
        url = f"http://127.0.0.1:{running.port}"
        with Client(url, api_key=key, space="a") as client:
            got = client.echo_node(node, text="hi", times=2)
            assert isinstance(got, EchoOut) and got.echoed == "hihi" and got.node == node
            with pytest.raises(RemoteError, match="times"):
                client.echo_node(node, text="hi", times=9)  # the model's bound, a 422

        async def remote() -> Any:
            async with AsyncClient(url, api_key=key, space="a") as client:
                return await client.echo_node(node_id=node, text="yo")

        assert asyncio.run(remote()).echoed == "yo"

    async def local() -> Any:
        return await AsyncDeltaMem(DeltaMem.open(db, embedder="hashing",
                                                 settings=TEST_SETTINGS, space="a")
                                   ).echo_node(node, text="as")

    assert asyncio.run(local()).echoed == "as"

    with DeltaMem.open(db, embedder="hashing", settings=TEST_SETTINGS, space="a") as mem:
        server = build_server(mem)
        assert tool_scopes()["echo_node"] == "write"

        async def tool() -> Any:
            async with McpClient(server) as client:
                listed = {t.name: t for t in (await client.list_tools()).tools}
                answer = await client.call_tool("echo_node", {"node_id": node, "text": "mc"})
                return listed["echo_node"], answer

        listed, answer = anyio.run(tool)
    assert listed.description == ECHO.description
    assert listed.input_schema["properties"]["times"]["maximum"] == 3
    assert listed.output_schema["properties"]["echoed"]["type"] == "string"
    assert not answer.is_error and answer.structured_content["echoed"] == "mc"


def test_every_row_is_served_where_the_table_says() -> None:
    """Each row REST derives is a route of that name, method and path; each row MCP derives is
    a tool; the clients and the async facade have a method of each row they derive."""
    app = create_app(":memory:", embedder=HashingEmbedder(), settings=TEST_SETTINGS,
                     require_keys=False)
    routes = {(r.name, tuple(sorted(r.methods)), r.path) for r in app.routes
              if hasattr(r, "methods")}
    for op in OPERATIONS:
        if op.on("rest"):
            assert (op.name, (op.method,), op.route) in routes, op.name
        if op.on("client"):
            assert callable(getattr(Client, op.name, None)), op.name
            assert callable(getattr(AsyncClient, op.name, None)), op.name
        if op.on("rest") or op.name in ("learn", "learn_many"):
            assert callable(getattr(AsyncDeltaMem, op.name, None)), op.name
    assert set(tool_scopes()) >= {op.tool_name for op in OPERATIONS if op.on("mcp")}
