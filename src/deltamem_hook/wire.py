"""JSON for the hook client without importing :mod:`json` (standard library only).

A hook's start-up time is its latency, and ``import json`` costs a hook process about as much as
the interpreter's own start (it imports ``re`` and compiles its patterns). The scanner and the
encoder ``json`` itself runs on are the C functions of CPython's ``_json``; :func:`loads` and
:func:`dumps` call them directly, configured as ``json.loads`` and ``json.dumps`` configure
them. Where ``_json`` is missing or does not behave as expected (another interpreter, another
version), both fall back to ``json``. ``tests/integrations/test_hook_wire.py`` checks them
against ``json`` value for value.
"""

from __future__ import annotations

TYPE_CHECKING = False  # ``typing`` is not imported at run time (see deltamem_hook)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


def _default(obj: Any) -> Any:
    raise TypeError(f"Object of type {obj.__class__.__name__} is not JSON serializable")


def _constant(name: str) -> float:
    return {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}[name]


class _Context:
    """What ``_json.make_scanner`` reads from a decoder: ``json.JSONDecoder()``'s settings."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = staticmethod(_constant)
    memo: dict[str, str] = {}


def _c_codec() -> tuple[Callable[[str], Any], Callable[[Any, bool], str]]:
    import _json

    scan = _json.make_scanner(_Context())  # type: ignore[arg-type]  # (typeshed: a decoder)
    strings = {True: _json.encode_basestring_ascii, False: _json.encode_basestring}

    def loads(text: str) -> Any:
        text = text.strip(" \t\n\r")
        try:
            value, end = scan(text, 0)
        except StopIteration:
            raise ValueError("Expecting value: not a JSON document") from None
        if end != len(text):
            raise ValueError(f"Extra data after the JSON value (at {end})")
        return value

    def dumps(value: Any, ensure_ascii: bool = True) -> str:
        encoder = _json.make_encoder({}, _default, strings[ensure_ascii], None, ": ", ", ",
                                     False, False, True)  # markers: a cycle is a ValueError
        return "".join(encoder(value, 0))

    sample = {"a": [1, 2.5, None, True, "é\n"], "b": {}}
    if dumps(sample) != '{"a": [1, 2.5, null, true, "\\u00e9\\n"], "b": {}}' \
            or dumps(sample, False) != '{"a": [1, 2.5, null, true, "é\\n"], "b": {}}' \
            or loads(' {"a": [1, 2.5, null, true, "\\u00e9\\n"], "b": {}}\n') != sample:
        raise ImportError("_json does not behave as json does here")
    return loads, dumps


def _py_codec() -> tuple[Callable[[str], Any], Callable[[Any, bool], str]]:
    import json

    def dumps(value: Any, ensure_ascii: bool = True) -> str:
        return json.dumps(value, ensure_ascii=ensure_ascii)

    return json.loads, dumps


try:
    _loads, _dumps = _c_codec()
except (ImportError, AttributeError, TypeError, ValueError):  # pragma: no cover - not CPython
    _loads, _dumps = _py_codec()


def loads(text: str | bytes) -> Any:
    """``json.loads(text)`` (bytes as UTF-8). Raises ValueError on what is not one JSON value."""
    if isinstance(text, bytes | bytearray):
        text = bytes(text).decode("utf-8")
    return _loads(text)


def dumps(value: Any, *, ensure_ascii: bool = True) -> str:
    """``json.dumps(value, ensure_ascii=ensure_ascii)``."""
    return _dumps(value, ensure_ascii)
