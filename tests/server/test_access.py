"""The small pieces the REST face is assembled from, each on its own: who may call a space
(``access``), the 422 of a bad input and of an undecodable body (``http_errors``), and an
operation's OpenAPI extras (``docs``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from starlette.requests import Request

from deltamem.faces.server.access import authorise, limit, presented_key
from deltamem.faces.server.docs import operation_extras, repeated_fields
from deltamem.faces.server.http_errors import (
    PARSE_FAILED,
    ApiError,
    invalid_input,
    unreadable_body,
)
from deltamem.faces.server.keys import open_keys
from deltamem.faces.server.limits import RateLimiter
from deltamem.formats import api
from deltamem.formats.operations import operation


def request(authorization: str | None = None) -> Request:
    headers = [] if authorization is None else [(b"authorization", authorization.encode())]
    return Request({"type": "http", "method": "GET", "path": "/", "headers": headers,
                    "state": {}})


def test_the_presented_key_is_the_bearer_token_in_any_case() -> None:
    assert presented_key(request("Bearer dmk_a_b")) == "dmk_a_b"
    assert presented_key(request("bearer  dmk_a_b ")) == "dmk_a_b"
    assert presented_key(request("Basic dmk_a_b")) is None
    assert presented_key(request("Bearer ")) is None
    assert presented_key(request()) is None


def test_authorise_answers_401_403_or_the_key(tmp_path: Path) -> None:
    keys = open_keys(str(tmp_path / "k.db"))
    try:
        _, reader = keys.create(["a"], scopes=["read"])
        statuses = []
        for presented, space, scope in ((None, "a", "read"), ("Bearer dmk_x_y", "a", "read"),
                                        (f"Bearer {reader}", "b", "read"),
                                        (f"Bearer {reader}", "a", "write")):
            with pytest.raises(ApiError) as refused:
                authorise(request(presented), keys, space, scope)
            statuses.append(refused.value.status)
        assert statuses == [401, 401, 403, 403]
        asked = request(f"Bearer {reader}")
        key = authorise(asked, keys, "a", "read")
        assert key.covers("a") and asked.state.key_id == key.id  # the access log's key id
    finally:
        keys.close()


def test_a_spent_rate_limit_is_429_with_retry_after(tmp_path: Path) -> None:
    keys = open_keys(str(tmp_path / "k.db"))
    try:
        key, _ = keys.create(["a"])
        limiter = RateLimiter(clock=lambda: 0.0)
        limit(limiter, key, None)  # no limit at all
        limit(limiter, key, 1)
        with pytest.raises(ApiError) as spent:
            limit(limiter, key, 1)
        assert spent.value.status == 429 and spent.value.headers == {"Retry-After": "60"}
    finally:
        keys.close()


def errors_of(raw: bytes) -> list[Any]:
    with pytest.raises(ValidationError) as bad:
        api.RecallRequest.model_validate_json(raw)
    return list(bad.value.errors())


@pytest.mark.parametrize(("raw", "field", "says"), [
    (b'{"task": "x",', "body", "malformed JSON body"),
    (b'{"task": "a\xff"}', "body", "not valid UTF-8 (byte 11)"),
    (b"[" * 10_000 + b"]" * 10_000, "body", "nested too deeply"),
    (b'{"top_k": 0}', "top_k", "top_k: Input should be greater than or equal to 1"),
    (b'{"goal": "x"}', "goal", "goal: Extra inputs are not permitted"),
])
def test_an_invalid_input_is_422_naming_its_field(raw: bytes, field: str, says: str) -> None:
    error = invalid_input(errors_of(raw), "body", raw)
    assert error.status == 422 and error.body["error"]["field"] == field
    assert says in error.body["error"]["message"]


def test_an_error_without_a_place_names_where_it_came_from() -> None:
    error = invalid_input([{"loc": (), "msg": "String should have at most 200 characters",
                            "type": "string_too_long"}], "node_id")
    assert error.body["error"] == {"type": "ValidationError", "field": "node_id",
                                   "message": "node_id: String should have at most 200 "
                                              "characters"}
    fastapi_style = invalid_input([{"loc": ("body", 12), "msg": "JSON decode error",
                                    "type": "json_invalid", "ctx": {"error": "Expecting"}}],
                                  "body")
    assert fastapi_style.body["error"]["message"] == ("malformed JSON body: Expecting at "
                                                      "character 12")


def test_an_undecodable_body_is_named_only_for_fastapis_parse_failure() -> None:
    bad_utf8 = UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")
    assert "not valid UTF-8" in (unreadable_body(400, PARSE_FAILED, bad_utf8) or "")
    assert "nested too deeply" in (unreadable_body(400, PARSE_FAILED, RecursionError()) or "")
    assert unreadable_body(404, "Not Found", None) is None
    assert unreadable_body(400, "something else", bad_utf8) is None


def test_an_operations_openapi_extras_follow_its_row() -> None:
    recall, listing = operation("recall"), operation("list_nodes")
    extras = operation_extras(recall)
    assert extras["x-deltamem-scope"] == "read" and extras["x-deltamem-idempotent"] is True
    assert extras["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/RecallRequest"}
    assert repeated_fields(api.ListRequest) == {"filters"}
    query = {p["name"]: p for p in operation_extras(listing)["parameters"]}
    assert set(query) == set(api.ListRequest.model_fields)
    assert query["filters"]["schema"] == {"type": "array", "items": {"type": "string"}}
    assert operation_extras(listing)["security"] == [{"HTTPBearer": []}]
