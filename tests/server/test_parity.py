"""One memory, four faces: the library, the CLI, the REST server and the MCP server give the
same JSON for the same operation.

The same script (learn an episode, learn a batch, recall with and without explain, count an
outcome, list, show, stats, a dry-run consolidation, a correction, export) runs once per face, each
on its own fresh database. Every answer must parse exactly into its wire model of
:mod:`deltamem.formats.api` (nothing dropped, nothing invented), and after naming node and episode
ids by order of first appearance and dropping the clock (``wall_ms``, ``created_at``), every face's
answer must equal the library's. The embedding cache is off for all faces: each CLI command is a new
process with a cold cache, and usage counts would otherwise differ for that reason alone.

The faces offer what suits them: MCP has no batch learn and no JSON Lines export (an agent gets
``export_skills`` instead); ``OFFERED`` lists it, and a face that gains an operation must join
the comparison.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from fastapi.testclient import TestClient
from mcp import Client as McpClient
from pydantic import BaseModel

from deltamem.embed.hashing import HashingEmbedder
from deltamem.engine.memory import DeltaMem
from deltamem.extract.trace import TraceExtractor
from deltamem.faces.cli.app import main as cli_main
from deltamem.faces.server.mcp import build_server
from deltamem.faces.server.rest import create_app
from deltamem.formats import api, operations
from deltamem.formats.episodes import episode_from_dict
from deltamem.store.sqlite import SQLiteStore
from helpers import TEST_SETTINGS

pytestmark = pytest.mark.server

SETTINGS = TEST_SETTINGS.with_(embed_cache=0)
CLI_ENV = {"DELTAMEM_EMBEDDER": "hashing", "DELTAMEM_TAU_TASK": str(SETTINGS.tau_task),
           "DELTAMEM_TAU_ENV": str(SETTINGS.tau_env), "DELTAMEM_EMBED_CACHE": "0"}
SPACE = "p"
KITCHEN = "a kitchen with a fridge, a microwave and a table"
HEAT = ("go to kitchen", "take apple", "heat apple")
LONGER = ("go to kitchen", "open microwave", "take apple", "heat apple")


def episode(task: str = "heat the apple", actions: tuple[str, ...] = HEAT, success: bool = True,
            env: str = KITCHEN, **meta: Any) -> dict[str, Any]:
    return {"task": task, "env": env, "success": success, "score": 1.0 if success else 0.0,
            "steps": [{"action": a, "observation": f"You {a}."} for a in actions],
            "meta": meta}


FIRST = episode(run=1, user="alice")  # its nodes are the ones the filtered calls find
ALICE = {"user": "alice"}
BATCH = [episode(actions=LONGER), episode(actions=LONGER), episode(actions=LONGER),
         episode(actions=("look around",), success=False),
         episode(task="cool the milk", actions=("go to fridge", "cool milk"),
                 env="a pantry with shelves and a fridge")]
OPS = ("learn", "learn_many", "recall", "recall_explain", "record_outcome", "list", "show",
       "stats", "consolidate", "correct", "export", "recall_filtered", "list_filtered",
       "forget_fact")
FIXED = ["go to kitchen", "open microwave", "heat apple in microwave"]
# The script's steps of each operation of the table; delete and forget end a memory (their
# answers are checked in test_rest/test_mcp), export_skills writes files (test_skills), and
# import_ is checked by the export it loads.
STEPS = {"learn": {"learn"}, "learn_many": {"learn_many"},
         "recall": {"recall", "recall_explain", "recall_filtered"},
         "record_outcome": {"record_outcome"}, "list_nodes": {"list", "list_filtered"},
         "show": {"show"}, "stats": {"stats"}, "consolidate": {"consolidate"},
         "correct": {"correct"}, "export": {"export"}, "forget_fact": {"forget_fact"}}
UNSCRIPTED = {"delete", "forget", "export_skills", "import_"}
OFFERED = {"library": set(OPS), "cli": set(OPS), "rest": set(OPS),
           "mcp": {step for op in operations.OPERATIONS if op.tool != "" and op.name in STEPS
                   for step in STEPS[op.name]}}


class Face(Protocol):
    """One face of the memory: each call returns the face's JSON answer."""

    def learn(self, episode: dict[str, Any]) -> Any: ...
    def learn_many(self, episodes: list[dict[str, Any]]) -> Any: ...
    def recall(self, task: str, env: str, explain: bool,
               filters: dict[str, str] | None = None) -> Any: ...
    def record_outcome(self, nodes: list[str], success: bool) -> Any: ...
    def list(self, tree: str, limit: int, filters: dict[str, str] | None = None) -> Any: ...
    def show(self, node_id: str) -> Any: ...
    def stats(self) -> Any: ...
    def consolidate(self, dry_run: bool) -> Any: ...
    def correct(self, node_id: str, steps: list[str], reason: str) -> Any: ...
    def forget_fact(self, node_id: str, fact: str, reason: str) -> Any: ...
    def export(self) -> list[dict[str, Any]]: ...


def exact(model: type[BaseModel], data: Any) -> Any:
    """``data``, after asserting that it parses into ``model`` with nothing lost or invented."""
    assert model.model_validate(data).model_dump(mode="json", exclude_unset=True) == data, \
        model.__name__
    return data


class LibraryFace:
    def __init__(self, db: Path) -> None:
        self.mem = DeltaMem(SQLiteStore(db), HashingEmbedder(), TraceExtractor(), space=SPACE,
                            settings=SETTINGS)

    def learn(self, episode: dict[str, Any]) -> Any:
        return exact(api.LearnOut, self.mem.learn(episode_from_dict(episode)).wire())

    def learn_many(self, episodes: list[dict[str, Any]]) -> Any:
        batch = self.mem.learn_many([episode_from_dict(e) for e in episodes])
        return exact(api.BatchOut, batch.wire())

    def recall(self, task: str, env: str, explain: bool,
               filters: dict[str, str] | None = None) -> Any:
        return exact(api.RecallOut,
                     self.mem.recall(task, env, filters=filters, explain=explain).wire())

    def record_outcome(self, nodes: list[str], success: bool) -> Any:
        return exact(api.OutcomeOut, self.mem.record_outcome(nodes, success).wire())

    def list(self, tree: str, limit: int, filters: dict[str, str] | None = None) -> Any:
        return exact(api.NodeListOut,
                     self.mem.list_nodes(tree, filters=filters, limit=limit).wire())

    def show(self, node_id: str) -> Any:
        return exact(api.ShowOut, self.mem.show(node_id).wire())

    def stats(self) -> Any:
        return exact(api.StatsOut, self.mem.stats().wire())

    def consolidate(self, dry_run: bool) -> Any:
        return exact(api.ConsolidateOut, self.mem.consolidate(dry_run=dry_run).wire())

    def correct(self, node_id: str, steps: list[str], reason: str) -> Any:
        return exact(api.CorrectionOut,
                     self.mem.correct(node_id, steps=steps, reason=reason).wire())

    def forget_fact(self, node_id: str, fact: str, reason: str) -> Any:
        return exact(api.CorrectionOut,
                     self.mem.forget_fact(node_id, fact, reason=reason).wire())

    def export(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.mem.iter_export()]


class CliFace:
    """``deltamem ... --json``, run in this process through the console entry point."""

    def __init__(self, db: Path, tmp: Path) -> None:
        self.db, self.tmp = db, tmp

    def run(self, *args: str) -> Any:
        out = io.StringIO()
        with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as done:
            cli_main([*args, "--db", str(self.db), "--space", SPACE, "--json"])
        assert done.value.code == 0, args
        return json.loads(out.getvalue())

    def _learn_file(self, episodes: list[dict[str, Any]], *flags: str) -> Any:
        path = self.tmp / "episodes.jsonl"
        path.write_text("".join(json.dumps(e) + "\n" for e in episodes), encoding="utf-8")
        summary = self.run("learn", str(path), *flags)
        for result in summary["results"]:  # the CLI also names each episode's line
            assert result.pop("line") == result["index"] + 1
        return exact(api.BatchOut, summary)

    def learn(self, episode: dict[str, Any]) -> Any:
        (result,) = self._learn_file([episode])["results"]
        assert result.pop("index") == 0
        return exact(api.LearnOut, result)

    def learn_many(self, episodes: list[dict[str, Any]]) -> Any:
        return self._learn_file(episodes, "--strict")  # one transaction, as learn_many

    def recall(self, task: str, env: str, explain: bool,
               filters: dict[str, str] | None = None) -> Any:
        flags = (["--explain"] if explain else []) + _filter_flags(filters)
        return exact(api.RecallOut, self.run("recall", "--task", task, "--env", env, *flags))

    def record_outcome(self, nodes: list[str], success: bool) -> Any:
        word = "--success" if success else "--failure"
        return exact(api.OutcomeOut, self.run("outcome", *nodes, word))

    def list(self, tree: str, limit: int, filters: dict[str, str] | None = None) -> Any:
        return exact(api.NodeListOut, self.run("list", "--tree", tree, "--limit", str(limit),
                                               *_filter_flags(filters)))

    def show(self, node_id: str) -> Any:
        return exact(api.ShowOut, self.run("show", node_id))

    def stats(self) -> Any:
        return exact(api.StatsOut, self.run("stats"))

    def consolidate(self, dry_run: bool) -> Any:
        flags = ["--dry-run"] if dry_run else []
        return exact(api.ConsolidateOut, self.run("consolidate", *flags))

    def correct(self, node_id: str, steps: list[str], reason: str) -> Any:
        flags = [arg for step in steps for arg in ("--step", step)]
        return exact(api.CorrectionOut, self.run("correct", node_id, *flags, "--reason", reason))

    def forget_fact(self, node_id: str, fact: str, reason: str) -> Any:
        return exact(api.CorrectionOut,
                     self.run("forget-fact", node_id, fact, "--reason", reason))

    def export(self) -> list[dict[str, Any]]:
        path = self.tmp / "export.jsonl"
        written = self.run("export", str(path))
        lines = path.read_text(encoding="utf-8").splitlines()
        assert written == {"records": len(lines), "file": str(path)}
        return [json.loads(line) for line in lines]


class RestFace:
    """The real REST app (served without keys), through its ASGI test client."""

    def __init__(self, http: TestClient) -> None:
        self.http = http

    def call(self, method: str, path: str, model: type[BaseModel], **kwargs: Any) -> Any:
        response = self.http.request(method, f"/v1/spaces/{SPACE}{path}", **kwargs)
        assert response.status_code == 200, response.text
        return exact(model, response.json())

    def learn(self, episode: dict[str, Any]) -> Any:
        return self.call("POST", "/learn", api.LearnOut, json=episode)

    def learn_many(self, episodes: list[dict[str, Any]]) -> Any:
        return self.call("POST", "/learn", api.BatchOut, json={"episodes": episodes})

    def recall(self, task: str, env: str, explain: bool,
               filters: dict[str, str] | None = None) -> Any:
        return self.call("POST", "/recall", api.RecallOut,
                         json={"task": task, "env": env, "explain": explain,
                               **({"filters": filters} if filters else {})})

    def record_outcome(self, nodes: list[str], success: bool) -> Any:
        return self.call("POST", "/outcome", api.OutcomeOut,
                         json={"nodes": nodes, "success": success})

    def list(self, tree: str, limit: int, filters: dict[str, str] | None = None) -> Any:
        pairs = [f"{k}={v}" for k, v in (filters or {}).items()]
        return self.call("GET", "/nodes", api.NodeListOut,
                         params={"tree": tree, "limit": limit, "filters": pairs})

    def show(self, node_id: str) -> Any:
        return self.call("GET", f"/nodes/{node_id}", api.ShowOut)

    def stats(self) -> Any:
        return self.call("GET", "/stats", api.StatsOut)

    def consolidate(self, dry_run: bool) -> Any:
        return self.call("POST", "/consolidate", api.ConsolidateOut,
                         params={"dry_run": str(dry_run).lower()})

    def correct(self, node_id: str, steps: list[str], reason: str) -> Any:
        return self.call("POST", f"/nodes/{node_id}/correct", api.CorrectionOut,
                         json={"steps": steps, "reason": reason})

    def forget_fact(self, node_id: str, fact: str, reason: str) -> Any:
        return self.call("POST", f"/nodes/{node_id}/forget-fact", api.CorrectionOut,
                         json={"fact": fact, "reason": reason})

    def export(self) -> list[dict[str, Any]]:
        response = self.http.get(f"/v1/spaces/{SPACE}/export")
        assert response.status_code == 200, response.text
        return [json.loads(line) for line in response.text.splitlines()]


class McpFace:
    """The real MCP server's tools, called by the SDK's client connected in process."""

    def __init__(self, portal: BlockingPortal, client: McpClient) -> None:
        self.portal, self.client = portal, client

    def call(self, tool: str, model: type[BaseModel], **args: Any) -> Any:
        result = self.portal.call(self.client.call_tool, tool, args)
        assert not result.is_error, result.content
        return exact(model, result.structured_content)

    def learn(self, episode: dict[str, Any]) -> Any:
        return self.call("learn", api.LearnOut, **episode)

    def learn_many(self, episodes: list[dict[str, Any]]) -> Any:
        raise AssertionError("MCP has no batch learn (see OFFERED)")

    def recall(self, task: str, env: str, explain: bool,
               filters: dict[str, str] | None = None) -> Any:
        return self.call("recall", api.RecallOut, task=task, env=env, explain=explain,
                         filters=filters)

    def record_outcome(self, nodes: list[str], success: bool) -> Any:
        return self.call("record_outcome", api.OutcomeOut, node_ids=nodes, success=success)

    def list(self, tree: str, limit: int, filters: dict[str, str] | None = None) -> Any:
        return self.call("list", api.NodeListOut, tree=tree, limit=limit, filters=filters)

    def show(self, node_id: str) -> Any:
        return self.call("show", api.ShowOut, node_id=node_id)

    def stats(self) -> Any:
        return self.call("stats", api.StatsOut)

    def consolidate(self, dry_run: bool) -> Any:
        return self.call("consolidate", api.ConsolidateOut, dry_run=dry_run)

    def correct(self, node_id: str, steps: list[str], reason: str) -> Any:
        return self.call("correct", api.CorrectionOut, node_id=node_id, steps=steps,
                         reason=reason)

    def forget_fact(self, node_id: str, fact: str, reason: str) -> Any:
        return self.call("forget_fact", api.CorrectionOut, node_id=node_id, fact=fact,
                         reason=reason)

    def export(self) -> list[dict[str, Any]]:
        raise AssertionError("MCP has no JSON Lines export (see OFFERED)")


def script(face: Face, offered: set[str]) -> dict[str, Any]:
    """The operations in order; ids passed on come from the face's own earlier answers."""
    out: dict[str, Any] = {}

    def step(name: str, call: Callable[[], Any]) -> None:
        if name in offered:
            out[name] = call()

    step("learn", lambda: face.learn(FIRST))
    if "learn_many" in offered:
        step("learn_many", lambda: face.learn_many(BATCH))
        learned = out["learn_many"]["results"]
    else:  # the same episodes one call at a time, so the memory is the same afterwards
        learned = [face.learn(item) for item in BATCH]
    delta = learned[0]["task"]["node"]
    step("recall", lambda: face.recall("heat the apple", KITCHEN, False))
    step("recall_explain", lambda: face.recall("heat the apple", KITCHEN, True))
    # The delta's third success makes its chain due: counting it compiles a new root.
    step("record_outcome", lambda: face.record_outcome([delta, out["recall"]["env"]["node"]],
                                                       True))
    step("list", lambda: face.list("task", 2))
    step("show", lambda: face.show(delta))
    step("stats", face.stats)
    step("consolidate", lambda: face.consolidate(True))
    step("correct", lambda: face.correct(delta, FIXED, "the microwave heats it"))
    step("export", face.export)
    step("recall_filtered", lambda: face.recall("heat the apple", KITCHEN, False, ALICE))
    step("list_filtered", lambda: face.list("task", 10, ALICE))
    # Last, as it supersedes the scene node the filtered recall finds.
    step("forget_fact", lambda: face.forget_fact(out["recall"]["env"]["node"], "1",
                                                 "not so in this kitchen"))
    return out


def _filter_flags(filters: dict[str, str] | None) -> list[str]:
    return [arg for k, v in (filters or {}).items() for arg in ("--filter", f"{k}={v}")]


ID = re.compile(r"(?:t|e|ep)-[0-9a-f]{16}")
CLOCK = {"wall_ms", "created_at"}


def canonical(data: Any) -> Any:
    """``data`` with ids renamed by first appearance, in values and inside texts (keys walked in
    sorted order, so key order does not matter) and the clock fields dropped."""
    names: dict[str, str] = {}

    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: walk(value[k]) for k in sorted(value) if k not in CLOCK}
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, str):  # an id, or a text naming ids (a note's "Node <id>")
            return ID.sub(lambda m: names.setdefault(m.group(0),
                                                     f"{m.group(0).split('-')[0]}#{len(names)}"),
                          value)
        return value

    return walk(data)


@pytest.fixture
def faces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Face]]:
    for name, value in CLI_ENV.items():
        monkeypatch.setenv(name, value)
    (tmp_path / "cli").mkdir()
    library = LibraryFace(tmp_path / "library.db")
    mcp_mem = DeltaMem(SQLiteStore(tmp_path / "mcp.db"), HashingEmbedder(), TraceExtractor(),
                       space=SPACE, settings=SETTINGS)
    app = create_app(tmp_path / "rest.db", embedder=HashingEmbedder(), settings=SETTINGS,
                     require_keys=False)
    with (TestClient(app) as http, start_blocking_portal() as portal,
          portal.wrap_async_context_manager(McpClient(build_server(mcp_mem))) as client):
        yield {"library": library, "cli": CliFace(tmp_path / "cli.db", tmp_path / "cli"),
               "rest": RestFace(http), "mcp": McpFace(portal, client)}
    library.mem.close()
    mcp_mem.close()


def test_every_face_gives_the_library_json(faces: dict[str, Face]) -> None:
    """Each operation's answer through the CLI, REST and MCP equals the library's."""
    runs = {name: script(face, OFFERED[name]) for name, face in faces.items()}
    for name, run in runs.items():
        # Ids are named over the operations this face offers, in the same order as the library's.
        expected = canonical({op: runs["library"][op] for op in OPS if op in run})
        got = canonical({op: run[op] for op in OPS if op in run})
        assert set(run) == OFFERED[name]
        for op in got:
            assert got[op] == expected[op], f"{name} differs from the library on {op}"
    # The script reached what it is for: a delta, a dedup, a failure lesson, both trees
    # matched, an explanation, a counted outcome that compiled a chain, and a full export.
    lib = runs["library"]
    actions = [r["task"]["action"] for r in lib["learn_many"]["results"]]
    assert lib["learn"]["task"]["action"] == "root"
    assert actions == ["delta", "dedup", "dedup", "root", "root"]  # the failure: a lesson root
    assert lib["recall"]["task"]["matched"] and lib["recall"]["env"]["matched"]
    assert "explain" not in lib["recall"]
    assert lib["recall_explain"]["explain"]["task"]["candidates"]
    delta = lib["learn_many"]["results"][0]["task"]["node"]
    assert lib["record_outcome"]["nodes"] == [delta, lib["recall"]["env"]["node"]]
    assert [c["source"] for c in lib["record_outcome"]["consolidated"]] == [delta]
    # the delta was retired into the root compiled from its chain: its id shows that root
    compiled = lib["record_outcome"]["consolidated"][0]["root"]
    assert lib["show"]["id"] == compiled and lib["show"]["kind"] == "root"
    assert lib["list"]["truncated"] and len(lib["list"]["nodes"]) == 2
    assert lib["stats"]["episodes"] == 1 + len(BATCH)
    kinds = [r.get("record") for r in lib["export"]]
    assert kinds.count("episode") == 1 + len(BATCH)
    assert lib["correct"]["of"] == compiled and lib["correct"]["kind"] == "steps"
    # Every node, plus the correction root written after the stats.
    assert kinds.count("node") == lib["stats"]["task"]["nodes"] + lib["stats"]["env"]["nodes"] + 1
    # The filtered calls found only the nodes of the episode that carried the meta.
    first = lib["learn"]
    assert lib["recall_filtered"]["task"]["node"] == first["task"]["node"]
    assert lib["recall_filtered"]["env"]["node"] == first["env"]["node"]
    assert [r["id"] for r in lib["list_filtered"]["nodes"]] == [first["task"]["node"]]
    assert lib["forget_fact"]["of"] == lib["recall"]["env"]["node"]
    assert lib["forget_fact"]["kind"] == "fact" and lib["forget_fact"]["tree"] == "env"


def test_canonical_names_ids_and_drops_the_clock() -> None:
    """The comparison's normaliser: same shape with other ids is equal, another value is not."""
    a = {"b": "t-0123456789abcdef", "a": ["e-0123456789abcdef", "t-0123456789abcdef"],
         "created_at": 1.0, "usage": {"wall_ms": 3.0, "embed_calls": 1}}
    b = {"a": ["e-fedcba9876543210", "t-1111111111111111"], "b": "t-1111111111111111",
         "created_at": 2.0, "usage": {"wall_ms": 9.0, "embed_calls": 1}}
    assert canonical(a) == canonical(b)
    assert canonical(a) != canonical({**b, "b": "t-2222222222222222"})
    assert canonical(a) != canonical({**b, "usage": {"embed_calls": 2}})


def test_the_script_covers_every_operation_of_the_table() -> None:
    """Each row of the operation table is scripted (on the faces that offer it) or named as
    checked elsewhere: a new operation must join the comparison."""
    names = {op.name for op in operations.OPERATIONS}
    assert names == set(STEPS) | UNSCRIPTED
    assert set().union(*STEPS.values()) == set(OPS)
