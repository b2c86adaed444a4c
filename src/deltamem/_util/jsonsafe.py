"""JSON that every backend can store and every reader can parse back.

Python's ``json`` accepts and writes ``NaN`` and ``Infinity`` (not JSON), and a string may hold a
lone surrogate (``"\\ud800"`` is valid JSON but not Unicode text: UTF-8 cannot encode it) or a
NUL (PostgreSQL ``TEXT`` refuses it, SQLite keeps it). Every text a client sends is checked here,
so both backends accept and refuse exactly the same input.
"""

from __future__ import annotations

import json
import math
from typing import Any

MAX_NESTING = 32
MAX_INT = 2**63 - 1  # what every backend and JSON reader holds exactly


def loads(text: str | bytes) -> Any:
    """Parse strict JSON. Raises ``ValueError`` for invalid JSON, NaN/Infinity or deep nesting."""
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except RecursionError as exc:
        raise ValueError("JSON nested too deeply") from exc


def dumps(value: Any) -> str:
    """Compact JSON, non-ASCII kept; raises ``ValueError`` rather than write NaN or Infinity."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def text_problem(text: str) -> str | None:
    """Why ``text`` cannot be stored as text (None when it can)."""
    if "\x00" in text:
        return "contains a NUL character"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "contains a lone surrogate (not valid Unicode text)"
    return None


def value_problem(value: Any, where: str, *, max_nesting: int = MAX_NESTING) -> str | None:
    """The first reason a decoded JSON value cannot be stored, as ``"<path>: <why>"``.

    Allowed: null, booleans, 64-bit integers, finite floats, storable strings, lists and objects
    (with storable string keys) nested at most ``max_nesting`` deep.
    """
    stack: list[tuple[str, Any, int]] = [(where, value, 0)]
    while stack:
        path, item, depth = stack.pop()
        if depth > max_nesting:
            return f"{path}: nested deeper than {max_nesting} levels"
        if isinstance(item, list | tuple):
            stack.extend((f"{path}[{i}]", v, depth + 1) for i, v in enumerate(item))
        elif isinstance(item, dict):
            for key, v in item.items():
                if not isinstance(key, str) or text_problem(key):
                    return f"{path}: key {key!r} is not storable text"
                stack.append((f"{path}.{key}", v, depth + 1))
        else:
            problem = _scalar_problem(item)
            if problem:
                return f"{path}: {problem}"
    return None


def _scalar_problem(item: Any) -> str | None:
    if isinstance(item, str):
        return text_problem(item)
    if isinstance(item, bool) or item is None:
        return None
    if isinstance(item, int):
        return None if -MAX_INT <= item <= MAX_INT else "integer out of the 64-bit range"
    if isinstance(item, float):
        return None if math.isfinite(item) else f"{item} is not a finite number"
    return f"{type(item).__name__} is not a JSON value"
