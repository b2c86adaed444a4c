"""The REST server, driven over real HTTP on loopback (uvicorn in a thread, httpx client)."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from server_live import LiveServer, ServerThread, make_keys, make_spaces

from deltamem.embed.hashing import HashingEmbedder
from deltamem.faces.server.keys import open_keys
from deltamem.faces.server.rest import create_app, route_scopes
from helpers import TEST_SETTINGS

pytestmark = pytest.mark.server

KITCHEN = "a kitchen with a fridge, a microwave and a table"


def episode(task: str = "heat the apple", actions: tuple[str, ...] = ("go to kitchen",
            "take apple", "heat apple"), success: bool = True, env: str = KITCHEN) -> dict:
    """An episode in its JSON wire form."""
    return {"task": task, "env": env, "success": success, "score": 1.0 if success else 0.0,
            "steps": [{"action": a, "observation": f"You {a}."} for a in actions]}


def stats(live: LiveServer, space: str = "a") -> dict:
    with live.client(live.key_all) as c:
        response = c.get(f"/v1/spaces/{space}/stats")
    assert response.status_code == 200
    return response.json()


def test_learn_recall_consolidate_export_import_cycle(tmp_path: Path) -> None:
    """The whole cycle over HTTP: learn, recall, consolidate, export, import elsewhere."""
    db = tmp_path / "cycle.db"
    _, key = make_keys(db)
    settings = TEST_SETTINGS.with_(auto_consolidate=False)
    app = create_app(db, embedder=HashingEmbedder(), settings=settings)
    with ServerThread(app) as running, httpx.Client(
        base_url=f"http://127.0.0.1:{running.port}", headers={"Authorization": f"Bearer {key}"}
    ) as c:
        first = c.post("/v1/spaces/a/learn", json=episode())
        assert first.status_code == 200
        assert first.json()["task"]["action"] == "root"
        longer = episode(actions=("go to kitchen", "open microwave", "take apple", "heat apple"))
        batch = c.post("/v1/spaces/a/learn", json={"episodes": [longer] * 4})
        assert batch.status_code == 200
        assert batch.json()["episodes"] == 4
        actions = [r["task"]["action"] for r in batch.json()["results"]]
        assert actions == ["delta", "dedup", "dedup", "dedup"]

        recall = c.post("/v1/spaces/a/recall",
                        json={"task": "heat the apple", "env": KITCHEN, "explain": True})
        assert recall.status_code == 200
        body = recall.json()
        assert body["task"]["matched"]
        assert body["task"]["node"] == first.json()["task"]["node"]  # ties go to the shallower
        assert body["task"]["skill"]["steps"] == ["go to kitchen", "take apple", "heat apple"]
        assert "1. go to kitchen" in body["context"]
        assert body["explain"]["task"]["candidates"][0]["clears_threshold"] is True
        capped = c.post("/v1/spaces/a/recall", json={"task": "heat the apple", "env": KITCHEN,
                                                     "budget_tokens": 120}).json()
        # A block's head (header, activation, the source naming its node) is about 95 tokens.
        assert 0 < capped["context_tokens"] <= 120 < body["context_tokens"]
        assert c.post("/v1/spaces/a/recall", json={"budget_tokens": -1}).status_code == 422

        done = c.post("/v1/spaces/a/consolidate").json()["consolidated"]
        assert {d["tree"] for d in done} == {"task", "env"}
        assert c.get("/v1/spaces/a/stats").json()["task"]["consolidated_roots"] == 1

        exported = c.get("/v1/spaces/a/export")
        assert exported.status_code == 200
        assert exported.headers["content-type"].startswith("application/x-ndjson")
        lines = [json.loads(line) for line in exported.text.splitlines()]
        assert lines[0]["format"] == "deltamem-export"
        # the two consolidated roots; each tree's root -> delta chain was retired into them
        assert sum(r.get("record") == "node" for r in lines) == 2
        assert sum(r.get("record") == "episode" for r in lines) == 5

        imported = c.post("/v1/spaces/b/import", content=exported.content,
                          headers={"content-type": "application/x-ndjson"})
        assert imported.status_code == 200
        assert imported.json() == {"nodes": 2, "episodes": 5}
        again = c.get("/v1/spaces/b/export").text.splitlines()
        assert [json.loads(x) for x in again[1:]] == lines[1:]


def test_show_and_delete_node(live: LiveServer) -> None:
    """A node can be shown, deleted with its subtree, and is then 404."""
    with live.client(live.key_a) as c:
        root = c.post("/v1/spaces/a/learn", json=episode()).json()["task"]["node"]
        longer = ("go to kitchen", "open microwave", "take apple", "heat apple")
        child = c.post("/v1/spaces/a/learn", json=episode(actions=longer)).json()["task"]
        assert child["action"] == "delta" and child["parent"] == root
        shown = c.get(f"/v1/spaces/a/nodes/{child['node']}").json()
        assert shown["chain"] == [root, child["node"]]
        assert shown["experience"]["steps"] == list(longer)
        deleted = c.delete(f"/v1/spaces/a/nodes/{root}")
        assert deleted.status_code == 200
        assert set(deleted.json()["deleted"]) == {root, child["node"]}
        missing = c.get(f"/v1/spaces/a/nodes/{root}")
        assert missing.status_code == 404
        assert missing.json()["error"]["type"] == "NodeNotFound"


def test_forget_empties_the_space(live: LiveServer) -> None:
    """DELETE on a space removes every node and episode of it and no other space's."""
    with live.client(live.key_all) as c:
        c.post("/v1/spaces/a/learn", json=episode())
        c.post("/v1/spaces/other/learn", json=episode())
        forgot = c.delete("/v1/spaces/a")
        assert forgot.status_code == 200 and forgot.json()["deleted_nodes"] == 2
    assert stats(live, "a")["task"]["nodes"] == 0 and stats(live, "a")["episodes"] == 0
    assert stats(live, "other")["episodes"] == 1


def test_missing_and_wrong_keys_are_401(live: LiveServer) -> None:
    """No key, a malformed key and a wrong secret are all 401 with a Bearer challenge."""
    for key in (None, "not-a-key", live.key_a[:-3] + "xyz", "dmk_nosuchid_secret"):
        with live.client(key) as c:
            response = c.post("/v1/spaces/a/recall", json={"task": "x"})
        assert response.status_code == 401, key
        assert response.headers["www-authenticate"] == "Bearer"
        assert response.json()["error"]["type"] == "Unauthorized"


def test_key_for_space_a_on_space_b_is_403(live: LiveServer) -> None:
    """A key scoped to space a may not read or write space b."""
    with live.client(live.key_a) as c:
        assert c.post("/v1/spaces/a/recall", json={"task": "x"}).status_code == 200
        assert c.post("/v1/spaces/b/recall", json={"task": "x"}).status_code == 403
        assert c.post("/v1/spaces/b/learn", json=episode()).status_code == 403
        assert c.delete("/v1/spaces/b").status_code == 403
    assert stats(live, "b")["episodes"] == 0


def test_revoked_key_is_401(live: LiveServer) -> None:
    """Revoking a key takes effect on the next request."""
    keys = open_keys(str(live.db))
    record, secret = keys.create(["a"])
    with live.client(secret) as c:
        assert c.get("/v1/spaces/a/stats").status_code == 200
        assert keys.revoke(record.id)
        assert c.get("/v1/spaces/a/stats").status_code == 401
    keys.close()


def test_oversized_body_is_413_and_changes_nothing(live: LiveServer) -> None:
    """Bodies over the limit get 413, declared or chunked, and nothing is learned."""
    before = stats(live)
    big = episode()
    big["meta"] = {"blob": "x" * 1_200_000}
    with live.client(live.key_a) as c:
        declared = c.post("/v1/spaces/a/learn", json=big)
        assert declared.status_code == 413
        assert declared.json()["error"]["type"] == "PayloadTooLarge"

        def chunks() -> Iterator[bytes]:
            data = json.dumps(big).encode()
            for i in range(0, len(data), 64 * 1024):
                yield data[i:i + 64 * 1024]

        chunked = c.post("/v1/spaces/a/learn", content=chunks(),
                         headers={"content-type": "application/json"})
        assert chunked.status_code == 413
    assert stats(live) == before


def test_malformed_and_invalid_bodies_are_422_naming_the_field(live: LiveServer) -> None:
    """Bad JSON, a bad episode field, or one bad episode in a batch: 422, nothing learned."""
    before = stats(live)
    with live.client(live.key_a) as c:
        bad_json = c.post("/v1/spaces/a/learn", content=b'{"task": "x",',
                          headers={"content-type": "application/json"})
        assert bad_json.status_code == 422
        assert bad_json.json()["error"]["field"] == "body"

        bad_step = episode()
        bad_step["steps"][1] = {"action": 7}
        response = c.post("/v1/spaces/a/learn", json=bad_step)
        assert response.status_code == 422
        assert response.json()["error"]["field"] == "steps[1].action"

        no_success = episode()
        del no_success["success"]
        batch = c.post("/v1/spaces/a/learn", json={"episodes": [episode(), no_success]})
        assert batch.status_code == 422
        assert batch.json()["error"]["field"] == "episodes[1].success"

        recall = c.post("/v1/spaces/a/recall", json={"task": "x", "top_k": 0})
        assert recall.status_code == 422 and recall.json()["error"]["field"] == "top_k"
        unknown = c.post("/v1/spaces/a/recall", json={"goal": "x"})
        assert unknown.status_code == 422 and unknown.json()["error"]["field"] == "goal"
    assert stats(live) == before


def test_bad_import_file_is_422_and_changes_nothing(live: LiveServer) -> None:
    """An import body that is not an export is refused before any write."""
    before = stats(live)
    with live.client(live.key_a) as c:
        response = c.post("/v1/spaces/a/import", content=b'{"record": "node"}\nnot json\n')
        assert response.status_code == 422
    assert stats(live) == before


def test_health_ready_docs_and_viewer(live: LiveServer) -> None:
    """Health, readiness, OpenAPI docs and the viewer page are served."""
    with live.client() as c:
        assert c.get("/healthz").json() == {"status": "ok"}
        assert c.get("/readyz").json()["status"] == "ready"
        assert c.get("/docs").status_code == 200
        paths = c.get("/openapi.json").json()["paths"]
        assert "/v1/spaces/{space}/recall" in paths and "/v1/spaces/{space}/learn" in paths
    with live.client(live.key_a) as c:
        c.post("/v1/spaces/a/learn", json=episode())
        page = c.get("/v1/spaces/a/view")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "heat the apple" in page.text


def test_each_request_logs_one_json_line_without_secrets(live: LiveServer,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    """The access log has method, path, status, ms and space, and never the key."""
    with caplog.at_level(logging.INFO, logger="deltamem.server"), live.client(live.key_a) as c:
        started = time.perf_counter()
        c.post("/v1/spaces/a/recall", json={"task": "heat the apple"})
        waited_ms = (time.perf_counter() - started) * 1000
    records = [json.loads(r.getMessage()) for r in caplog.records if r.name == "deltamem.server"]
    line = next(r for r in records if r["path"] == "/v1/spaces/a/recall")
    assert line["method"] == "POST" and line["status"] == 200 and line["space"] == "a"
    # The server's own measure of the request lies within the client's wait for it.
    assert isinstance(line["ms"], float) and 0 < line["ms"] <= waited_ms
    assert all(live.key_a not in r.getMessage() for r in caplog.records)


def test_concurrent_learners_lose_no_episode(live: LiveServer) -> None:
    """Eight threads learning distinct episodes at once: every episode is stored."""
    errors: list[str] = []

    def worker(n: int) -> None:
        with live.client(live.key_a) as c:
            for i in range(5):
                ep = episode(task=f"task {n} number {i}", env=f"room {n} {i}")
                response = c.post("/v1/spaces/a/learn", json=ep)
                if response.status_code != 200:
                    errors.append(response.text)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert stats(live)["episodes"] == 40


def test_scopes_limit_what_a_key_may_do(live: LiveServer) -> None:
    """A read key recalls but may not learn; a read+write key may not forget (403 naming it)."""
    keys = open_keys(str(live.db))
    try:
        reader = keys.create(["a"], scopes=["read"])[1]
        writer = keys.create(["a"])[1]  # default: read and write
    finally:
        keys.close()
    with live.client(reader) as c:
        assert c.post("/v1/spaces/a/recall", json={"task": "x"}).status_code == 200
        refused = c.post("/v1/spaces/a/learn", json=episode())
        assert refused.status_code == 403 and "'write' scope" in refused.json()["error"]["message"]
    with live.client(writer) as c:
        assert c.post("/v1/spaces/a/learn", json=episode()).status_code == 200
        assert c.delete("/v1/spaces/a").status_code == 403
    assert stats(live)["episodes"] == 1


def test_every_space_route_has_a_scope() -> None:
    """Each /v1/spaces route is named in route_scopes() (a renamed route would need admin)."""
    app = create_app(":memory:", embedder=HashingEmbedder(), settings=TEST_SETTINGS,
                     require_keys=False)
    names = {getattr(r, "name", "") for r in app.routes
             if getattr(r, "path", "").startswith("/v1/spaces/")}
    assert names == set(route_scopes())


def test_per_key_rate_limit_is_429_with_retry_after(tmp_path: Path,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    """Past its limit a key gets 429 and Retry-After; another key is not affected; the log
    names the key by id only."""
    db = tmp_path / "limited.db"
    keys = open_keys(str(db))
    try:
        tight_record, tight = keys.create(["a"], rate_limit=2)
        roomy = keys.create(["a"])[1]
    finally:
        keys.close()
    make_spaces(db, "a")
    app = create_app(db, embedder=HashingEmbedder(), settings=TEST_SETTINGS, rate_limit=100)
    with ServerThread(app) as running, caplog.at_level(logging.INFO, logger="deltamem.server"):
        base = f"http://127.0.0.1:{running.port}"
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {tight}"}) as c:
            codes = [c.post("/v1/spaces/a/recall", json={"task": "x"}).status_code
                     for _ in range(3)]
            limited = c.post("/v1/spaces/a/recall", json={"task": "x"})
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {roomy}"}) as c:
            assert c.post("/v1/spaces/a/recall", json={"task": "x"}).status_code == 200
    assert codes == [200, 200, 429]
    assert limited.json()["error"]["type"] == "RateLimited"
    assert int(limited.headers["retry-after"]) >= 1
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "deltamem.server"]
    assert {line["key"] for line in lines if line["status"] == 429} == {tight_record.id}
    assert all(tight not in r.getMessage() and roomy not in r.getMessage()
               for r in caplog.records)


def test_undecodable_bodies_and_impossible_node_ids_get_the_documented_errors(
        tmp_path: Path) -> None:
    """Invalid UTF-8 and nesting too deep for the parser get 422 naming the body (not a
    generic 400); a node id holding a NUL is 404 NodeNotFound on show, delete and outcome
    (PostgreSQL said 409, SQLite cut the id at the NUL), and the real node is untouched."""
    db = tmp_path / "odd.db"
    _, key = make_keys(db)
    app = create_app(db, embedder=HashingEmbedder(), settings=TEST_SETTINGS)
    json_type = {"Content-Type": "application/json"}
    deep = b"[" * 100_000 + b"]" * 100_000
    with ServerThread(app) as running, httpx.Client(
        base_url=f"http://127.0.0.1:{running.port}", headers={"Authorization": f"Bearer {key}"}
    ) as c:
        node = c.post("/v1/spaces/a/learn", json=episode()).json()["task"]["node"]
        before = c.get(f"/v1/spaces/a/nodes/{node}").json()["stats"]
        for route in ("learn", "recall", "outcome"):
            for body, why in ((b'{"task": "a\xff"}', "UTF-8"), (deep, "nested too deeply")):
                answer = c.post(f"/v1/spaces/a/{route}", content=body, headers=json_type)
                assert answer.status_code == 422, (route, answer.text)
                error = answer.json()["error"]
                assert error["type"] == "ValidationError" and error["field"] == "body"
                assert why in error["message"]
        odd = node + "%00"
        for answer in (c.get(f"/v1/spaces/a/nodes/{odd}"), c.delete(f"/v1/spaces/a/nodes/{odd}"),
                       c.post("/v1/spaces/a/outcome", json={"nodes": [node + "\0"],
                                                             "success": True})):
            assert answer.status_code == 404, answer.text
            assert answer.json()["error"]["type"] == "NodeNotFound"
        assert c.get(f"/v1/spaces/a/nodes/{node}").json()["stats"] == before  # not counted


def test_recall_and_list_take_metadata_filters(live: LiveServer) -> None:
    """``filters`` in the recall body (JSON values) and as repeated ``filters=key=value`` query
    parameters on the listing; bad filters are 422 or 400 with one clear message."""
    with live.client(live.key_a) as c:
        alice = c.post("/v1/spaces/a/learn", json={**episode(), "meta": {"user": "alice",
                                                                          "run": 3}}).json()
        bob = c.post("/v1/spaces/a/learn", json={**episode(actions=(
            "go to kitchen", "open microwave", "take apple", "heat apple")),
            "meta": {"user": "bob"}}).json()
        got = c.post("/v1/spaces/a/recall", json={"task": "heat the apple", "env": KITCHEN,
                                                  "filters": {"user": "alice", "run": 3}})
        assert got.status_code == 200 and got.json()["task"]["node"] == alice["task"]["node"]
        got = c.post("/v1/spaces/a/recall", json={"task": "heat the apple",
                                                  "filters": {"run": "3"}})
        assert got.json()["task"]["matched"] is False  # the string "3" is not the number 3
        listed = c.get("/v1/spaces/a/nodes", params={"filters": ["user=bob"], "tree": "task"})
        assert [n["id"] for n in listed.json()["nodes"]] == [bob["task"]["node"]]
        both = c.get("/v1/spaces/a/nodes", params={"filters": ["user=bob", "user=alice"]})
        assert both.status_code == 422 and "given twice" in both.json()["error"]["message"]
        bad = c.post("/v1/spaces/a/recall", json={"task": "x", "filters": {"user": [1]}})
        assert bad.status_code == 422 and bad.json()["error"]["field"].startswith("filters")


def test_a_retracted_skill_and_a_keyless_import_answer_4xx_never_500(live: LiveServer) -> None:
    """After ``correct ... wrong=true`` on a skill, recall of that task answers 200 (showing
    nothing of it) rather than 500; an export whose node record lacks ``key`` is refused with a
    4xx naming the field, and nothing is imported."""
    with live.client(live.key_all) as c:
        node = c.post("/v1/spaces/a/learn", json=episode()).json()["task"]["node"]
        assert c.post(f"/v1/spaces/a/nodes/{node}/correct", json={"wrong": True}).status_code \
            == 200
        for explain in (False, True):
            recall = c.post("/v1/spaces/a/recall", json={"task": "heat the apple",
                                                         "env": KITCHEN, "explain": explain})
            assert recall.status_code == 200, recall.text
            assert recall.json()["task"]["skill"] is None
            assert "lesson" not in recall.json()["task"]
        records = [json.loads(line) for line in c.get("/v1/spaces/a/export").text.splitlines()]
        for record in records:
            if record.get("record") == "node":
                del record["key"]
        body = "".join(json.dumps(r) + "\n" for r in records)
        imported = c.post("/v1/spaces/b/import", content=body,
                          headers={"Content-Type": "application/x-ndjson"})
        assert 400 <= imported.status_code < 500, imported.text
        assert "'key'" in imported.json()["error"]["message"]
        assert c.get("/v1/spaces/b/stats").json()["task"]["nodes"] == 0
