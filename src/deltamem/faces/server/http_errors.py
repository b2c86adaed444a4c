"""Library errors -> HTTP statuses, in one table, and the one JSON error body every route uses.

Error body: ``{"error": {"type": "EpisodeError", "message": "...", "field": "steps[0].action"}}``
(``field`` only when one field is to blame).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from deltamem.errors import (
    BudgetExceeded,
    ConfigError,
    DeltaMemError,
    EmbedderMismatch,
    EpisodeError,
    ExtractionError,
    InvalidExport,
    NodeNotFound,
    PatchError,
    ProviderError,
    SchemaError,
    SpaceNotFound,
    StoreError,
    redacted,
)

# A URL or store address inside a message: the server's business, not the client's.
INTERNAL_ADDRESS = re.compile(r"\b(?:https?|postgres(?:ql)?|sqlite):[^\s'\"),;]+")

# The most specific class in an exception's MRO wins (SchemaError before StoreError, ...).
STATUS: dict[type[DeltaMemError], int] = {
    EpisodeError: 422,
    ExtractionError: 422,
    ConfigError: 400,
    NodeNotFound: 404,
    SpaceNotFound: 404,
    PatchError: 409,
    EmbedderMismatch: 409,
    InvalidExport: 422,
    SchemaError: 500,
    StoreError: 409,
    BudgetExceeded: 429,
    ProviderError: 502,
    DeltaMemError: 500,
}


def status_for(exc: DeltaMemError) -> int:
    """The HTTP status of a library error."""
    for cls in type(exc).__mro__:
        if cls in STATUS:
            return STATUS[cls]
    return 500


def error_body(kind: str, message: str, field: str | None = None) -> dict[str, Any]:
    """The JSON error envelope."""
    error: dict[str, Any] = {"type": kind, "message": _encodable(redacted(message))}
    if field:
        error["field"] = _encodable(field)
    return {"error": error}


def _encodable(text: str) -> str:
    """Messages quote what the client sent, which may hold lone surrogates: escape them."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def public_message(exc: DeltaMemError, paths: tuple[str, ...] = ()) -> str:
    """A library error's message as a remote caller (REST or MCP) may read it: the server's own
    addresses (the LLM endpoint, the database URL, the file ``paths``) and every configured or
    recognisable secret replaced."""
    text = str(exc)
    for path in paths:
        text = text.replace(path, "<server-side>")
    return redacted(INTERNAL_ADDRESS.sub("<server-side>", text))


def library_error_body(exc: DeltaMemError, paths: tuple[str, ...] = ()) -> dict[str, Any]:
    """The envelope for a library error (EpisodeError names its field), its message as
    :func:`public_message` leaves it."""
    field = exc.field if isinstance(exc, EpisodeError) else None
    if isinstance(exc, EpisodeError) and exc.where and field:
        field = f"{exc.where}.{field}"
    return error_body(type(exc).__name__, public_message(exc, paths), field)


def validation_field(loc: tuple[Any, ...] | list[Any]) -> str:
    """A pydantic error location as a dotted field name, without the leading ``body``."""
    parts = [p for p in loc if p not in ("body", "query", "path")]
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "body"


def private_paths(db: object) -> tuple[str, ...]:
    """The spellings of a SQLite database's file path an error message may carry (longest
    first); none for a URL (``INTERNAL_ADDRESS`` hides those)."""
    import os

    text = str(db).removeprefix("sqlite:")
    if not text or "://" in text or text == ":memory:":
        return ()
    forms = {text, os.path.abspath(text), os.path.realpath(text)}
    return tuple(sorted((f for f in forms if f), key=len, reverse=True))


class ApiError(Exception):
    """An HTTP error raised by the server's own checks (auth, a bad input, ...)."""

    def __init__(self, status: int, kind: str, message: str, field: str | None = None,
                 headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.body = error_body(kind, message, field)
        self.headers = headers


def invalid_input(errors: Sequence[Mapping[str, Any]], where: str, raw: bytes = b"") -> ApiError:
    """The 422 of an input that failed validation (pydantic's ``errors()``), naming its first
    bad field (``where`` when the error has no place: "body", "query", a path field). An
    undecodable JSON body says why: not UTF-8 (seen in ``raw``), nested too deeply, or the
    parser's reason and where."""
    first: dict[str, Any] = (dict(errors[0]) if errors
                             else {"loc": (), "msg": "invalid request", "type": ""})
    loc = tuple(first.get("loc", ()))
    if first.get("type") == "json_invalid":
        detail = str((first.get("ctx") or {}).get("error", "invalid JSON"))
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as bad:
            detail = f"not valid UTF-8 (byte {bad.start}); send UTF-8 encoded JSON"
        if "recursion" in detail:
            detail = "nested too deeply; send at most 32 levels of nesting"
        at = f" at character {loc[-1]}" if loc and isinstance(loc[-1], int) else ""
        return ApiError(422, "ValidationError", f"malformed JSON body: {detail}{at}", "body")
    field = validation_field(loc) if loc else where
    return ApiError(422, "ValidationError", f"{field}: {first['msg']}", field)


def unreadable_body(status: int, detail: Any, cause: BaseException | None) -> str | None:
    """Why FastAPI could not decode a JSON body (its 400 "error parsing the body", caused by
    ``cause``), or None for any other HTTP error."""
    if status != 400 or cause is None or detail != PARSE_FAILED:
        return None
    if isinstance(cause, UnicodeDecodeError):
        return (f"malformed JSON body: not valid UTF-8 (byte {cause.start}); send UTF-8 "
                "encoded JSON")
    if isinstance(cause, RecursionError):
        return "malformed JSON body: nested too deeply; send at most 32 levels of nesting"
    return f"malformed JSON body: {type(cause).__name__}"


PARSE_FAILED = "There was an error parsing the body"  # FastAPI's 400 for an undecodable body
