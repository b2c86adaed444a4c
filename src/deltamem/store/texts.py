"""Steps and facts stored once per space: the texts table behind node rows.

A residual tree already stores what an experience shares with its parent once, but the same
step or fact still recurs across branches, trees and consolidated roots (a compiled root
restates its whole chain). Every store therefore keeps each list item longer than
:data:`INTERN_FROM` characters -- a step, a fact, a failed or worked attempt -- once per space,
in a texts table, and a node row's JSON holds its number in the item's place. List items of an
experience are strings, so a number there can only be such a reference. Only a row's own JSON
changes: :class:`~deltamem.core.model.Node` values, exports and every reader see the texts
themselves (:func:`deltamem.store.rows.node_from_row` resolves them).

Texts are never rewritten: a text's number means that text for as long as any row refers to it.
Deleting nodes deletes the texts no remaining row refers to (a deletion or a scrub leaves
nothing of what it removed behind), and forgetting a space deletes all of its texts.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from deltamem.core.delta import Put, Splice
from deltamem.core.model import Experience, Node

# A list item longer than this (in characters) is kept once per space and referenced by number;
# shorter ones stay inline, where they cost about what a reference would.
INTERN_FROM = 16


def node_texts(node: Node) -> list[str]:
    """The texts of ``node`` its stored row refers to by number (in order, repeats once)."""
    out: list[str] = []
    if node.content is not None:
        out += _experience_texts(node.content)
    for op in node.patch or ():
        if isinstance(op, Splice):
            out += [t for t in op.items if _internable(t)]
        elif isinstance(op, Put):
            out += _experience_texts(op.value)
    return list(dict.fromkeys(out))


def _experience_texts(exp: Experience) -> Iterator[str]:
    for name in exp.LISTS:
        yield from (t for t in getattr(exp, name) if _internable(t))


def _internable(text: str) -> bool:
    # A NUL stays in the JSON, which escapes it: PostgreSQL's text columns refuse it.
    return len(text) > INTERN_FROM and "\x00" not in text


def encode_content(data: dict[str, Any], ids: Mapping[str, int]) -> dict[str, Any]:
    """An experience's JSON (``experience_to_dict``) with its known texts replaced by numbers."""
    return {k: [ids.get(t, t) for t in v] if isinstance(v, list) else v for k, v in data.items()}


def encode_patch(data: list[list[Any]], ids: Mapping[str, int]) -> list[list[Any]]:
    """A patch's JSON (``patch_to_json``) with its known texts replaced by numbers."""
    out = []
    for op in data:
        if op[0] == "splice":
            op = [*op[:4], [ids.get(t, t) for t in op[4]]]
        elif op[0] == "put":
            op = ["put", encode_content(op[1], ids)]
        out.append(op)
    return out


def content_refs(data: Any) -> Iterator[int]:
    """The text numbers an experience's stored JSON refers to."""
    if isinstance(data, dict):
        for value in data.values():
            if isinstance(value, list):
                yield from (i for i in value if _is_ref(i))


def patch_refs(data: Any) -> Iterator[int]:
    """The text numbers a patch's stored JSON refers to."""
    for op in data if isinstance(data, list) else ():
        if isinstance(op, list) and op and op[0] == "splice" and len(op) == 5 \
                and isinstance(op[4], list):
            yield from (i for i in op[4] if _is_ref(i))
        elif isinstance(op, list) and op and op[0] == "put" and len(op) == 2:
            yield from content_refs(op[1])


def decode_content(data: Any, texts: Mapping[int, str]) -> Any:
    """Inverse of :func:`encode_content` (``KeyError``: a number with no text)."""
    if not isinstance(data, dict):
        return data
    return {k: [texts[i] if _is_ref(i) else i for i in v] if isinstance(v, list) else v
            for k, v in data.items()}


def decode_patch(data: Any, texts: Mapping[int, str]) -> Any:
    """Inverse of :func:`encode_patch` (``KeyError``: a number with no text)."""
    if not isinstance(data, list):
        return data
    out = []
    for op in data:
        if isinstance(op, list) and op and op[0] == "splice" and len(op) == 5 \
                and isinstance(op[4], list):
            op = [*op[:4], [texts[i] if _is_ref(i) else i for i in op[4]]]
        elif isinstance(op, list) and op and op[0] == "put" and len(op) == 2:
            op = ["put", decode_content(op[1], texts)]
        out.append(op)
    return out


def row_refs(content: Any, patch: Any) -> set[int]:
    """Every text number of a node row's parsed ``content`` and ``patch`` JSON."""
    return {*content_refs(content), *patch_refs(patch)}


def referenced(rows: Iterable[tuple[str | None, str | None]]) -> set[int]:
    """The text numbers the stored ``(content, patch)`` JSON columns of ``rows`` refer to."""
    out: set[int] = set()
    for content, patch in rows:
        out |= row_refs(None if content is None else json.loads(content),
                        None if patch is None else json.loads(patch))
    return out


def _is_ref(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
