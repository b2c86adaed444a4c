"""Exact structured deltas between experiences.

A :class:`Patch` is a short tuple of edit operations that turns one experience into another:

* :class:`SetText`  -- replace a scalar (text) field;
* :class:`Edit`     -- revise a few words of a scalar field or of one list item (cheaper than
  restating a long text that changed by a word);
* :class:`Splice`   -- replace the run ``items[start:stop]`` of a list field by new items
  (an insertion when ``start == stop``, a deletion when no items are given);
* :class:`Put`      -- replace the whole experience (used only when the two experiences are of
  different types, e.g. a failure lesson recorded under a skill chain).

Positions always refer to the *original* text or list, and the edits of one field never overlap,
so a patch reads like a unified diff and applying it is order-independent (item edits first, then
splices). Texts are edited at word granularity: a text is split into alternating runs of
whitespace and non-whitespace, which join back to exactly the original. The law this module keeps,
property-tested in ``tests/core/test_delta.py``::

    apply(a, diff(a, b)) == b        for any two experiences a and b

An empty patch means "nothing new": the caller deduplicates instead of writing a node.

**Bounded cost.** :class:`difflib.SequenceMatcher` is superlinear -- near-cubic on texts of
repeated words -- so an adversarial pair of experiences could take minutes. Every diff therefore
draws on a :class:`Budget` of matcher work, counted as ``len(a) * len(b)`` per comparison of
two token or item sequences: a comparison larger than :data:`MAX_MATCH` units, or one the
budget can no longer pay for, falls back to a linear exact encoding (the common prefix and
suffix kept, the middle restated). The patch may then be larger than the smallest one, never
wrong: the law above holds for every input. Ordinary experiences (steps and facts of up to about
a hundred words, lists of up to a few dozen items) stay far below both bounds and get exactly
the patches they always got. The work of one diff is at most
``DIFF_BUDGET * (cost of a unit)`` plus time linear in the sizes of the two experiences.

**Bounds without a diff.** :class:`PatchFloor` gives a lower bound on the characters of any
patch :func:`diff` writes (whatever the budget) and :func:`diff_units_ceiling` an upper bound on
the matcher units it charges, both in linear time; placement uses them to skip candidates that
cannot win (``core.tree.choose_placement``). ``tests/core/test_placement_pruning.py`` checks
both against real diffs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from difflib import SequenceMatcher
from typing import Any, TypeAlias, cast

from deltamem.core.model import Experience, experience_from_dict, experience_to_dict
from deltamem.errors import PatchError as PatchError  # raised here, re-exported


@dataclass(frozen=True, slots=True)
class SetText:
    """Set scalar field ``field`` to ``value``."""

    field: str
    value: str


@dataclass(frozen=True, slots=True)
class Edit:
    """Revise the text of scalar ``field`` (``index`` None) or of ``field[index]``.

    ``edits`` are ``(start, stop, text)`` triples over the original text's word tokens: tokens
    ``start:stop`` are replaced by ``text``.
    """

    field: str
    index: int | None
    edits: tuple[tuple[int, int, str], ...]


@dataclass(frozen=True, slots=True)
class Splice:
    """Replace ``field[start:stop]`` (original positions) with ``items``."""

    field: str
    start: int
    stop: int
    items: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Put:
    """Replace the whole experience with ``value``."""

    value: Experience


Op: TypeAlias = SetText | Edit | Splice | Put
Patch: TypeAlias = tuple[Op, ...]

# The largest single comparison the matcher runs, in units of len(a) * len(b): 128 x 128 tokens
# (a text of about 64 words against another) or items. Larger ones take the linear encoding.
MAX_MATCH = 128 * 128
# The matcher work one diff may do, in the same units (placement shares one budget among all
# the candidates it compares, see core.tree.choose_placement).
DIFF_BUDGET = 100_000

Opcode: TypeAlias = tuple[str, int, int, int, int]


class Budget:
    """What is left of the matcher work a diff (or a whole placement) may do."""

    __slots__ = ("left",)

    def __init__(self, units: int = DIFF_BUDGET):
        self.left = units

    def afford(self, a: Sequence[Any], b: Sequence[Any]) -> bool:
        """Charge a comparison of ``a`` with ``b`` if it is small enough and paid for."""
        units = len(a) * len(b)
        if units > MAX_MATCH or units > self.left:
            return False
        self.left -= units
        return True


def _opcodes(a: Sequence[Any], b: Sequence[Any], budget: Budget) -> list[Opcode]:
    """:class:`SequenceMatcher` opcodes from ``a`` to ``b`` when the budget affords them, else
    the linear encoding: the common prefix and suffix equal, the middle one replacement."""
    if budget.afford(a, b):
        return list(SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes())
    n, m = len(a), len(b)
    p = 0
    while p < n and p < m and a[p] == b[p]:
        p += 1
    s = 0
    while s < n - p and s < m - p and a[n - 1 - s] == b[m - 1 - s]:
        s += 1
    ops: list[Opcode] = []
    if p:
        ops.append(("equal", 0, p, 0, p))
    if p < n - s or p < m - s:
        tag = "replace" if p < n - s and p < m - s else ("delete" if p < n - s else "insert")
        ops.append((tag, p, n - s, p, m - s))
    if s:
        ops.append(("equal", n - s, n, m - s, m))
    return ops


def diff(old: Experience, new: Experience, *, budget: Budget | None = None) -> Patch:
    """Smallest-effort exact patch from ``old`` to ``new``, at a bounded cost.

    List fields are diffed with :class:`difflib.SequenceMatcher` over whole items, so an unchanged
    step costs nothing and a changed step costs one splice. ``budget`` (a fresh
    :data:`DIFF_BUDGET` by default) bounds the matcher work; past it the patch is still exact
    (see the module docstring).

    Complexity: at most ``DIFF_BUDGET`` matcher units plus linear time in the sizes.
    """
    if type(old) is not type(new):
        return (Put(new),)
    budget = Budget() if budget is None else budget
    ops: list[Op] = []
    for name in old.SCALARS:
        before, after = getattr(old, name), getattr(new, name)
        if before != after:
            edit = _edit(name, None, before, after, budget)
            ops.append(edit if edit is not None else SetText(name, after))
    for name in old.LISTS:
        ops.extend(_diff_list(name, getattr(old, name), getattr(new, name), budget))
    return tuple(ops)


def _diff_list(name: str, a: Sequence[str], b: Sequence[str],
               budget: Budget) -> Iterable[Edit | Splice]:
    if a == b:
        return
    for tag, i1, i2, j1, j2 in _opcodes(a, b, budget):
        if tag == "equal":
            continue
        if tag == "replace" and i2 - i1 == j2 - j1:
            # Item for item: revise the items that changed by a few words, restate the others.
            for k in range(i2 - i1):
                if a[i1 + k] == b[j1 + k]:  # only the linear encoding leaves equal items here
                    continue
                edit = _edit(name, i1 + k, a[i1 + k], b[j1 + k], budget)
                yield edit if edit is not None else Splice(name, i1 + k, i1 + k + 1, (b[j1 + k],))
        else:
            yield Splice(name, i1, i2, tuple(b[j1:j2]))


_TOKEN = re.compile(r"\s+|\S+")
# A word-level edit is kept when its texts plus EDIT_OVERHEAD per edit cost less than
# EDIT_SHARE of the text it produces; else the text is restated (patch_chars_floor relies on it).
EDIT_OVERHEAD = 8
EDIT_SHARE = 0.6


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


def _edit(name: str, index: int | None, before: str, after: str,
          budget: Budget) -> Edit | None:
    """A word-level edit from ``before`` to ``after``, or None when restating is cheaper."""
    a, b = _tokens(before), _tokens(after)
    edits = tuple(
        (i1, i2, "".join(b[j1:j2]))
        for tag, i1, i2, j1, j2 in _opcodes(a, b, budget)
        if tag != "equal"
    )
    cost = sum(len(text) + EDIT_OVERHEAD for _, _, text in edits)
    return Edit(name, index, edits) if cost < len(after) * EDIT_SHARE else None


def apply_text_edits(text: str, edits: tuple[tuple[int, int, str], ...]) -> str:
    """Apply word-level ``(start, stop, text)`` edits (original token positions) to ``text``."""
    tokens = _tokens(text)
    last_start = len(tokens) + 1
    for start, stop, replacement in sorted(edits, reverse=True):
        if not 0 <= start <= stop <= len(tokens) or stop > last_start:
            raise PatchError(f"text edit [{start}:{stop}] does not fit {len(tokens)} tokens")
        tokens[start:stop] = [replacement]
        last_start = start
    return "".join(tokens)


def apply(exp: Experience, patch: Patch) -> Experience:
    """Apply ``patch`` to ``exp``; raises :class:`PatchError` if it does not fit."""
    result = exp
    splices: dict[str, list[Splice]] = {}
    item_edits: dict[str, list[Edit]] = {}
    for op in patch:
        if isinstance(op, Put):
            result = op.value
        elif isinstance(op, SetText) or (isinstance(op, Edit) and op.index is None):
            if op.field not in result.SCALARS:
                raise PatchError(f"{result.TYPE} has no text field {op.field!r}")
            value = op.value if isinstance(op, SetText) else apply_text_edits(
                getattr(result, op.field), op.edits)
            result = _with(result, op.field, value)
        else:
            if op.field not in result.LISTS:
                raise PatchError(f"{result.TYPE} has no list field {op.field!r}")
            target = item_edits if isinstance(op, Edit) else splices
            target.setdefault(op.field, []).append(op)  # type: ignore[arg-type]
    for name in {*item_edits, *splices} - set(result.LISTS):
        # A later Put may have replaced the experience with one of another type.
        raise PatchError(f"{result.TYPE} has no list field {name!r}")
    for name, edits in item_edits.items():
        items = list(getattr(result, name))
        for edit in edits:
            if edit.index is None or not 0 <= edit.index < len(items):
                raise PatchError(f"edit of {name}[{edit.index}] does not fit {len(items)} items")
            items[edit.index] = apply_text_edits(items[edit.index], edit.edits)
        result = _with(result, name, tuple(items))
    for name, runs in splices.items():
        result = _with(result, name, _splice(getattr(result, name), runs))
    return result


def _with(exp: Experience, name: str, value: object) -> Experience:
    # dataclasses.replace cannot be typed over a union of dataclasses; the field names are
    # checked against SCALARS / LISTS by the callers.
    changed: Experience = replace(cast(Any, exp), **{name: value})
    return changed


def _splice(items: tuple[str, ...], runs: list[Splice]) -> tuple[str, ...]:
    out = list(items)
    last_start = len(items) + 1
    # Right to left, so earlier positions still refer to the original list.
    for run in sorted(runs, key=lambda r: (r.start, r.stop), reverse=True):
        if not 0 <= run.start <= run.stop <= len(items) or run.stop > last_start:
            raise PatchError(
                f"splice {run.field}[{run.start}:{run.stop}] does not fit a list of {len(items)}"
            )
        out[run.start : run.stop] = run.items
        last_start = run.start
    return tuple(out)


def compose(root: Experience, patches: Iterable[Patch]) -> Experience:
    """Composition of a chain: the root's experience with every patch applied in order."""
    result = root
    for patch in patches:
        result = apply(result, patch)
    return result


def patch_to_json(patch: Patch) -> list[list[Any]]:
    """Plain-JSON form of a patch (the wire and storage form): one compact array per operation.

    ``["set", field, value]``, ``["edit", field, index|null, [[start, stop, text], ...]]``,
    ``["splice", field, start, stop, [items...]]`` and ``["put", experience]``. Positional arrays
    instead of keyed objects keep a one-word revision at a few dozen characters.
    """
    out: list[list[Any]] = []
    for op in patch:
        if isinstance(op, Put):
            out.append(["put", experience_to_dict(op.value)])
        elif isinstance(op, SetText):
            out.append(["set", op.field, op.value])
        elif isinstance(op, Edit):
            out.append(["edit", op.field, op.index, [list(e) for e in op.edits]])
        else:
            out.append(["splice", op.field, op.start, op.stop, list(op.items)])
    return out


def patch_from_json(data: list[Any]) -> Patch:
    """Inverse of :func:`patch_to_json`; raises ``ValueError`` naming the bad operation.

    Also reads the keyed-object form earlier versions wrote (``{"op": "splice", ...}``).
    """
    if not isinstance(data, list):
        raise ValueError("patch must be a list of operations")
    ops: list[Op] = []
    for i, raw in enumerate(data):
        try:
            ops.append(_op_from_json(_positional(raw)))
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise ValueError(f"patch[{i}]: {exc}") from exc
    return tuple(ops)


_KEYED_FIELDS = {"put": ("value",), "set": ("field", "value"),
                 "edit": ("field", "index", "edits"),
                 "splice": ("field", "start", "stop", "items")}


def _positional(raw: Any) -> list[Any]:
    """An operation in the array form, converting the older keyed-object form."""
    if isinstance(raw, list) and raw:
        return raw
    if not isinstance(raw, dict):
        raise ValueError(f"an operation must be an array, got {type(raw).__name__}")
    kind = raw.get("op")
    names = _KEYED_FIELDS.get(str(kind))
    if names is None:
        raise ValueError(f"unknown op {kind!r}")
    defaults: dict[str, Any] = {"index": None, "items": []}
    return [kind, *(raw[n] if n in raw or n not in defaults else defaults[n] for n in names)]


def _op_from_json(raw: list[Any]) -> Op:
    kind = raw[0]
    if kind == "put" and len(raw) == 2:
        return Put(experience_from_dict(raw[1]))
    if kind == "set" and len(raw) == 3:
        return SetText(str(raw[1]), _str(raw[2]))
    if kind == "edit" and len(raw) == 4:
        index = raw[2]
        return Edit(str(raw[1]), None if index is None else _int(index),
                    tuple((_int(a), _int(b), _str(t)) for a, b, t in raw[3]))
    if kind == "splice" and len(raw) == 5:
        return Splice(str(raw[1]), _int(raw[2]), _int(raw[3]), tuple(_str(x) for x in raw[4]))
    raise ValueError(f"unknown op {kind!r} with {len(raw) - 1} argument(s)")


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"expected an integer, got {type(value).__name__}")
    return value


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {type(value).__name__}")
    return value


def patch_chars(patch: Patch) -> int:
    """Size of a patch as serialised JSON characters (the unit of ``stats``)."""
    return len(json.dumps(patch_to_json(patch), ensure_ascii=False, separators=(",", ":")))


# -- bounds on a diff without running it (placement prunes with them, core.tree) ---------------

def _editable(text: str) -> bool:
    """Whether :func:`_edit` can return an :class:`Edit` ending at ``text``: its cheapest edit
    (one triple with an empty text) costs ``EDIT_OVERHEAD``, and an edit is kept only below
    ``EDIT_SHARE`` of the text."""
    return len(text) * EDIT_SHARE > EDIT_OVERHEAD


def _op_chars(op: Op) -> int:
    """Characters of ``op`` in a serialised patch (without the patch's brackets and commas)."""
    return patch_chars((op,)) - 2


_MIN_EDIT = ((0, 0, ""),)  # the shortest edit triple any Edit carries


def _field_floors(name: str, index: int | None) -> tuple[int, int]:
    """The shortest :class:`Edit` of field ``name`` (an item when ``index`` is not None) and
    the shortest :class:`Splice` of it, in characters."""
    key = (name, index is None)
    floors = _FLOORS.get(key)
    if floors is None:
        floors = (_op_chars(Edit(name, index, _MIN_EDIT)), _op_chars(Splice(name, 0, 0)))
        _FLOORS[key] = floors
    return floors


_FLOORS: dict[tuple[str, bool], tuple[int, int]] = {}


def patch_chars_floor(old: Experience, new: Experience) -> int:
    """A lower bound on ``patch_chars(diff(old, new, budget=b))`` for *every* budget ``b``,
    computed without a matcher (exact when the types differ, 0 for equal experiences); see
    :class:`PatchFloor`, which serves many ``old`` against one ``new``."""
    return PatchFloor(new)(old)


class PatchFloor:
    """Lower bounds on the size of the patches :func:`diff` writes from any experience to
    ``new``: ``PatchFloor(new)(old) <= patch_chars(diff(old, new, budget=b))`` for every
    budget ``b``, computed without a matcher, exact when the types differ, 0 for equal ones.

    Derived from what any patch :func:`diff` writes must hold, counting each operation with the
    comma or bracket after it (plus the patch's opening bracket): a changed text field takes one
    :class:`SetText` (its exact size) or one :class:`Edit` (at least the shortest edit, and only
    for a text long enough that an edit can be kept); a changed list field takes at least one
    operation, and every item of the new list that the old one does not hold (as multisets) is
    restated in a :class:`Splice` (its JSON string: at least its length + 2) or is the result
    of an item :class:`Edit` of its own -- the cheaper for the bound, one splice's frame paid
    once when any item is restated.
    """

    __slots__ = ("_lists", "_new", "_put", "_scalars")

    def __init__(self, new: Experience):
        self._new = new
        self._put: int | None = None
        self._scalars: list[tuple[str, str, int]] = []
        for name in new.SCALARS:
            after = getattr(new, name)
            stated = _op_chars(SetText(name, after))
            if _editable(after):
                stated = min(stated, _field_floors(name, None)[0])
            self._scalars.append((name, after, stated + 1))
        self._lists: list[tuple[str, tuple[str, ...], int, int, tuple[tuple[int, bool], ...]]] = []
        for name in new.LISTS:
            items = tuple(getattr(new, name))
            edit, splice = _field_floors(name, 0)
            costs = tuple((min(len(i) + 2, edit + 1), True) if _editable(i) else (len(i) + 2, False)
                          for i in items)
            self._lists.append((name, items, edit + 1, splice + 1, costs))

    def __call__(self, old: Experience) -> int:
        new = self._new
        if type(old) is not type(new):
            if self._put is None:
                self._put = patch_chars((Put(new),))
            return self._put
        total = 1
        changed = False
        for name, after, stated in self._scalars:
            if getattr(old, name) != after:
                changed = True
                total += stated
        for name, b, edit, splice, costs in self._lists:
            a = tuple(getattr(old, name))
            if a == b:
                continue
            changed = True
            held: dict[str, int] = {}
            for item in a:
                held[item] = held.get(item, 0) + 1
            fresh = 0  # b's items a does not hold, as a multiset difference
            restated = splice  # at least one splice, each fresh item restated or edited
            editable = True
            for item, (cost, can_edit) in zip(b, costs, strict=True):
                if held.get(item, 0):
                    held[item] -= 1
                else:
                    fresh += 1
                    restated += cost
                    editable = editable and can_edit
            # ... or every fresh item its own item edit, where each can be an edit's result.
            total += min(restated, max(1, fresh) * edit) if editable else restated
        return total if changed else 0


def token_count(text: str) -> int:
    """How many word tokens (runs of whitespace or of other characters) ``text`` splits into,
    the unit the matcher compares texts in."""
    return len(_tokens(text))


def diff_units_ceiling(old: Experience, new: Experience,
                       count: Callable[[str], int] = token_count) -> int:
    """An upper bound on the matcher units :func:`diff` charges its budget for ``old`` ->
    ``new``, whatever the budget. ``count`` gives a text's tokens or more: ``len`` (a token is
    at least one character) makes a coarser bound that needs no tokenising.

    A diff whose budget holds at least this many units is never refused for want of budget, so
    its patch is a function of the two experiences alone. Charged are: each changed text field
    (tokens x tokens), each changed list field (items x items) and, within it, each pair of
    items revised word by word; those pairs pair distinct items, so they cost at most
    ``max tokens of an old item * tokens of all new items``.
    """
    if type(old) is not type(new):
        return 0
    units = 0
    for name in new.SCALARS:
        before, after = getattr(old, name), getattr(new, name)
        if before != after:
            units += count(before) * count(after)
    for name in new.LISTS:
        a, b = tuple(getattr(old, name)), tuple(getattr(new, name))
        if a == b:
            continue
        units += len(a) * len(b)
        if a and b:
            units += max(map(count, a)) * sum(map(count, b))
    return units
