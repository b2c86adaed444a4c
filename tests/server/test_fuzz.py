"""Hostile bodies against the real server: never a 500, and the store stays exactly right.

Every write route gets at least 300 bodies: valid episodes mutated with the values that once
broke it (lone surrogates, NUL, a 400-digit score, ``true`` where a number goes, ``[1]`` where a
boolean goes, NaN and Infinity, huge and deeply nested values, truncated or non-UTF-8 bytes) and
exports with damaged records. Each answer must be 2xx, or 4xx with the JSON error envelope; at
the end the space passes ``check`` and holds exactly the episodes the server acknowledged.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from server_live import LiveServer

from deltamem.embed.hashing import HashingEmbedder
from deltamem.engine.memory import DeltaMem
from deltamem.extract.trace import TraceExtractor
from deltamem.store.sqlite import SQLiteStore
from helpers import TEST_SETTINGS

pytestmark = pytest.mark.server

BODIES = 320  # per route
HOSTILE: list[Any] = [
    "\ud800", "a\udfffb", "nul\x00byte", "", " ", "\u202e\u200b", "x" * 100_001, 10**400,
    -(10**400), 1e308, -0.0, True, False, None, [1], [], {}, {"a": [1, {"b": None}]}, 0, -1,
    2**63, "1", "true", [None], [[[[[]]]]], {"task": "nested"}, "🧪" * 50, 3.5,
]
RAW: list[bytes] = [
    b"", b"{", b"[]", b"null", b"1", b'"task"', b"\xff\xfe\x00garbage", b'{"task": "x",',
    b'{"task": NaN, "success": true}', b'{"task": "x", "success": true, "score": Infinity}',
    b'{"task": "x", "success": true, "score": 1e999}', b"[" * 5000 + b"]" * 5000,
    b'{"task": "x", "success": true, "meta": ' + b'{"a":' * 3000 + b"1" + b"}" * 3000 + b"}",
    b'{"task": "x", "success": true, "score": ' + b"9" * 5000 + b"}",
    b'{"task": "\\ud800", "success": true}', b'{"task": "a\\u0000b", "success": true}',
    b'{"task": "x", "task": "y", "success": true}', b"\x00" * 64,
]


def episode(rng: random.Random) -> dict[str, Any]:
    verbs = ["heat", "cool", "open", "take", "put", "wash"]
    things = ["apple", "milk", "door", "cup"]
    task = f"{rng.choice(verbs)} the {rng.choice(things)}"
    steps = [{"action": f"{rng.choice(verbs)} {rng.choice(things)}",
              "observation": f"You see a {rng.choice(things)}."}
             for _ in range(rng.randint(0, 4))]
    return {"task": task, "env": f"a room with a {rng.choice(things)}", "steps": steps,
            "success": rng.random() < 0.7, "score": rng.choice([None, 0.0, 1.0]),
            "meta": {"run": rng.randint(0, 9)}}


def mutate(value: dict[str, Any], rng: random.Random, paths: list[list[Any]]) -> Any:
    """``value`` with one to three values somewhere inside it replaced by hostile ones."""
    out = json.loads(json.dumps(value))
    for _ in range(rng.randint(1, 3)):
        path = rng.choice(paths)
        target: Any = out
        try:
            for key in path[:-1]:
                target = target[key]
            if isinstance(target, list) and not target:
                target.append(rng.choice(HOSTILE))
            else:
                target[path[-1]] = rng.choice(HOSTILE)
        except (KeyError, IndexError, TypeError):
            continue
    return out


EPISODE_PATHS: list[list[Any]] = [
    ["task"], ["env"], ["success"], ["score"], ["steps"], ["meta"], ["meta", "run"],
    ["steps", 0], ["steps", 0, "action"], ["steps", 0, "observation"], ["steps", 0, "thought"],
    ["extra"], ["steps", 0, "extra"],
]


def learn_bodies(rng: random.Random) -> Iterator[bytes]:
    for i in range(BODIES):
        if i % 10 == 0:
            yield rng.choice(RAW)
        elif i % 10 == 1:
            batch = [episode(rng) for _ in range(rng.randint(0, 4))]
            if batch and rng.random() < 0.6:
                batch[rng.randrange(len(batch))] = mutate(batch[0], rng, EPISODE_PATHS)
            yield json.dumps({"episodes": batch}).encode()
        elif i % 10 == 2:
            yield json.dumps(episode(rng)).encode()  # valid: acknowledged episodes accumulate
        else:
            yield json.dumps(mutate(episode(rng), rng, EPISODE_PATHS)).encode()


def recall_bodies(rng: random.Random) -> Iterator[bytes]:
    paths: list[list[Any]] = [["task"], ["env"], ["top_k"], ["explain"], ["goal"]]
    for i in range(BODIES):
        if i % 8 == 0:
            yield rng.choice(RAW)
        else:
            body = {"task": episode(rng)["task"], "env": "a room", "top_k": 2, "explain": True}
            yield json.dumps(mutate(body, rng, paths)).encode()


def import_bodies(rng: random.Random, export: list[dict[str, Any]]) -> Iterator[bytes]:
    node_paths: list[list[Any]] = [[k] for k in export[1]] + [["parent_id"], ["vector"]]
    for i in range(BODIES):
        records = json.loads(json.dumps(export))
        if i % 9 == 0:
            yield rng.choice(RAW)
            continue
        which = rng.randrange(len(records))
        if which == 0:
            records[0] = mutate(records[0], rng, [["format"], ["version"], ["embedder"],
                                                  ["dim"]])
        else:
            records[which] = mutate(records[which], rng, node_paths)
        if rng.random() < 0.2:
            records.append({**records[-1], "parent_id": records[-1].get("id")})
        yield "\n".join(json.dumps(r) for r in records).encode()


def check_answer(response: httpx.Response, where: str) -> None:
    assert response.status_code < 500, f"{where}: {response.status_code} {response.text[:300]}"
    if response.status_code >= 400:
        error = response.json()["error"]
        assert error["type"] and error["message"], where


def test_hostile_bodies_never_500_and_the_store_stays_exact(live: LiveServer) -> None:
    rng = random.Random(13)
    acknowledged = 0
    headers = {"content-type": "application/json"}
    with live.client(live.key_all) as c:
        for i, body in enumerate(learn_bodies(rng)):
            response = c.post("/v1/spaces/a/learn", content=body, headers=headers)
            check_answer(response, f"learn #{i}")
            if response.status_code == 200:
                data = response.json()
                acknowledged += data["episodes"] if "results" in data else 1
        for i, body in enumerate(recall_bodies(rng)):
            check_answer(c.post("/v1/spaces/a/recall", content=body, headers=headers),
                         f"recall #{i}")
        export = [json.loads(line) for line in c.get("/v1/spaces/a/export").text.splitlines()]
        copy = DeltaMem(SQLiteStore(live.db), HashingEmbedder(), TraceExtractor(), space="b",
                        settings=TEST_SETTINGS)
        for i, body in enumerate(import_bodies(rng, export)):
            response = c.post("/v1/spaces/b/import", content=body)
            check_answer(response, f"import #{i}")
            if response.status_code == 200:  # the damage was harmless (e.g. a counter of 0)
                assert copy.check() == [], f"import #{i}"
                assert c.delete("/v1/spaces/b").status_code == 200
            else:
                assert copy.stats().episodes == 0 and list(copy.nodes()) == [], i
        copy.close()
        for i, value in enumerate(HOSTILE + ["t-1", "../a", "%00", "a" * 5000]):
            node = quote(str(value).encode("utf-8", "surrogatepass")[:6000], safe="")
            check_answer(c.get(f"/v1/spaces/a/nodes/{node}"), f"show #{i}")
            check_answer(c.delete(f"/v1/spaces/b/nodes/{node}"), f"delete #{i}")
        for name in ("A%0A", "%00", "a" * 65, ".a", "a b", "%F0%9F%A7%AA"):
            check_answer(c.post(f"/v1/spaces/{name}/consolidate"), f"consolidate {name}")
            check_answer(c.delete(f"/v1/spaces/{name}"), f"forget {name}")
        check_answer(c.post("/v1/spaces/a/consolidate"), "consolidate a")
        stats = c.get("/v1/spaces/a/stats").json()
    assert acknowledged > 30 and stats["episodes"] == acknowledged
    with DeltaMem(SQLiteStore(live.db), HashingEmbedder(), TraceExtractor(), space="a",
                  settings=TEST_SETTINGS, create=False) as mem:
        assert mem.check() == []
        assert mem.store.count_episodes("a") == acknowledged
