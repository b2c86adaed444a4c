"""Laws of exact structured deltas (property-tested)."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st
from real_text import experiences as real_experiences
from real_text import item as real_item

from deltamem.core.delta import (
    MAX_MATCH,
    Budget,
    Edit,
    PatchError,
    Put,
    SetText,
    Splice,
    apply,
    compose,
    diff,
    patch_chars,
    patch_from_json,
    patch_to_json,
)
from deltamem.core.model import Knowledge, Lesson, Skill

# Small alphabets make equal items (and therefore real alignments) likely.
item = st.sampled_from(["open door", "go to kitchen", "take apple", "heat apple", "look", "x"])
items = st.lists(item, max_size=8).map(tuple)
text = st.sampled_from(["", "heat the apple", "when hungry", "done", "apple is hot"])
skills = st.builds(Skill, activation=text, steps=items, termination=text)
knowledge = st.builds(Knowledge, trigger=text, facts=items)
lessons = st.builds(Lesson, situation=text, failed=items, untried=items, worked=items)
experiences = st.one_of(skills, knowledge, lessons)
# Multi-word texts with odd whitespace, so that word-level edits are exercised.
word = st.sampled_from(["the", "red", "apple", "box", "kitchen", "  ", "\n\t", "to", "go"])
sentence = st.lists(word, max_size=12).map(" ".join)
wordy = st.builds(Skill, activation=sentence, steps=st.lists(sentence, max_size=6).map(tuple),
                  termination=sentence)


@given(experiences, experiences)
def test_apply_diff_roundtrip(a, b):
    """apply(a, diff(a, b)) == b for any two experiences."""
    assert apply(a, diff(a, b)) == b


@given(real_experiences, real_experiences)
def test_apply_diff_roundtrip_on_unicode_text(a, b):
    """The law holds for arbitrary unicode text, through the JSON form too."""
    patch = diff(a, b)
    assert apply(a, patch) == b
    assert apply(a, patch_from_json(json.loads(json.dumps(patch_to_json(patch))))) == b


@given(wordy, wordy)
def test_word_level_edits_roundtrip(a, b):
    """Word-level edits of texts and items reproduce the target exactly, through JSON too."""
    patch = diff(a, b)
    assert apply(a, patch) == b
    assert apply(a, patch_from_json(patch_to_json(patch))) == b


def test_small_text_change_is_an_edit_not_a_restatement():
    """Changing one word of a long step stores the word, not the step."""
    long = "move the dove egg to the red box in the kitchen and then wait for two steps"
    a = Skill("t", ("look around", long))
    b = Skill("t", ("look around", long.replace("red", "blue")))
    (op,) = diff(a, b)
    # Tokens alternate word and whitespace, so "red" is token 12.
    assert isinstance(op, Edit) and op.index == 1 and op.edits == ((12, 13, "blue"),)
    assert patch_to_json((op,)) == [["edit", "steps", 1, [[12, 13, "blue"]]]]


def test_patch_encoding_is_compact_and_reads_the_keyed_form():
    """One array per operation (no repeated key names); the older keyed form still loads."""
    patch = (Splice("steps", 1, 1, ("open fridge",)), SetText("termination", "hot"))
    assert patch_to_json(patch) == [["splice", "steps", 1, 1, ["open fridge"]],
                                    ["set", "termination", "hot"]]
    keyed = [{"op": "splice", "field": "steps", "start": 1, "stop": 1, "items": ["open fridge"]},
             {"op": "set", "field": "termination", "value": "hot"}]
    assert patch_from_json(keyed) == patch
    assert patch_chars(patch) < len(json.dumps(keyed, separators=(",", ":"))) * 0.7


@given(real_experiences)
def test_diff_of_equal_is_empty(a):
    """An experience differs from itself by nothing (the dedup rule)."""
    assert diff(a, a) == ()


@given(real_experiences, real_experiences)
def test_patch_json_roundtrip(a, b):
    """A patch survives its JSON form, as text too, unchanged."""
    patch = diff(a, b)
    assert patch_from_json(patch_to_json(patch)) == patch
    assert patch_from_json(json.loads(json.dumps(patch_to_json(patch)))) == patch


@given(st.lists(real_experiences, min_size=1, max_size=6))
def test_compose_chain_of_diffs_reaches_last(chain):
    """Composing successive residuals reproduces every experience of the chain exactly, across
    experience types (a change of type is a Put)."""
    patches = [diff(x, y) for x, y in zip(chain, chain[1:], strict=False)]
    for n in range(len(chain)):
        assert compose(chain[0], patches[:n]) == chain[n]


@given(real_experiences, st.integers(0, 200), real_item)
def test_one_inserted_item_is_one_splice_of_that_item(exp, where, new):
    """Inserting one item into a list (long, with repeats) stores exactly that item."""
    name = exp.LISTS[0]
    old = getattr(exp, name)
    where = min(where, len(old))
    grown = replace(exp, **{name: (*old[:where], new, *old[where:])})
    (op,) = diff(exp, grown)
    assert isinstance(op, Splice) and op.items == (new,) and op.start == op.stop
    assert apply(exp, (op,)) == grown


fields = st.sampled_from(["steps", "facts", "failed", "worked", "untried", "activation",
                          "trigger", "situation", "termination", "bogus"])
small = st.integers(-3, 12)
hostile_ops = st.one_of(
    st.builds(Splice, fields, small, small, st.lists(real_item, max_size=3).map(tuple)),
    st.builds(SetText, fields, real_item),
    st.builds(Edit, fields, st.one_of(st.none(), small),
              st.lists(st.tuples(small, small, real_item), max_size=3).map(tuple)),
    st.builds(Put, real_experiences),
)


@given(real_experiences, st.lists(hostile_ops, max_size=5).map(tuple))
def test_a_patch_that_does_not_fit_is_a_patch_error(exp, patch):
    """Any patch either applies (to an experience whose JSON form holds) or raises PatchError:
    never an IndexError, a TypeError or a silently wrong type."""
    try:
        result = apply(exp, patch)
    except PatchError:
        return
    assert type(result) in (Skill, Knowledge, Lesson)
    for name in result.LISTS:
        assert all(isinstance(v, str) for v in getattr(result, name))


@given(real_experiences, st.integers(0, 4), real_item, st.data())
def test_an_op_past_the_end_is_refused(exp, beyond, new, data):
    """A splice, an item edit or a text edit past the end of what it edits is a PatchError
    (a slice past the end would otherwise append silently)."""
    name = data.draw(st.sampled_from(exp.LISTS))
    n = len(getattr(exp, name))
    with pytest.raises(PatchError):
        apply(exp, (Splice(name, n + 1 + beyond, n + 1 + beyond, (new,)),))
    with pytest.raises(PatchError):
        apply(exp, (Edit(name, n + beyond, ((0, 0, new),)),))
    scalar = data.draw(st.sampled_from(exp.SCALARS))
    tokens = len(re.findall(r"\s+|\S+", getattr(exp, scalar)))
    with pytest.raises(PatchError):
        apply(exp, (Edit(scalar, None, ((tokens + 1 + beyond, tokens + 1 + beyond, new),)),))


json_values = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-5, 20),
                                     st.floats(allow_nan=False), real_item),
                           lambda inner: st.one_of(st.lists(inner, max_size=6),
                                                   st.dictionaries(real_item, inner, max_size=4)),
                           max_leaves=12)


@given(st.lists(json_values, max_size=4))
def test_patch_from_json_refuses_any_malformed_json_as_value_error(raw):
    """Whatever a damaged store or a hostile import holds, reading it is a ValueError, or a
    patch that writes back as the same JSON (it was a well-formed patch after all)."""
    try:
        patch = patch_from_json(raw)
    except ValueError:
        return
    assert patch_to_json(patch) == raw


def test_unchanged_steps_cost_nothing():
    """Inserting one step yields one insertion splice, not a rewrite."""
    a = Skill("heat", ("go to kitchen", "take apple", "heat apple"), "done")
    b = Skill("heat", ("go to kitchen", "open fridge", "take apple", "heat apple"), "done")
    assert diff(a, b) == (Splice("steps", 1, 1, ("open fridge",)),)


def test_type_change_is_a_put():
    """A lesson recorded under a skill is stored whole (types cannot be diffed)."""
    lesson = Lesson("heat", ("look",))
    assert diff(Skill("heat"), lesson) == (Put(lesson),)


def test_apply_rejects_misfit():
    """Patches that do not fit raise PatchError instead of corrupting the experience."""
    with pytest.raises(PatchError):
        apply(Skill("a", ("x",)), (Splice("steps", 3, 4, ()),))
    with pytest.raises(PatchError):
        apply(Skill("a"), (SetText("trigger", "y"),))
    with pytest.raises(PatchError):
        apply(Skill("a", ("x", "y")), (Splice("steps", 0, 2, ()), Splice("steps", 1, 2, ())))


@pytest.mark.parametrize("raw", [{"op": "nope"}, {"op": "set", "field": "a"}, "x",
                                 {"op": "splice", "field": "steps", "start": "a", "stop": 1},
                                 ["splice", "steps", 0], ["edit", "steps", "1", []], []])
def test_patch_from_json_names_the_bad_op(raw):
    """Malformed stored patches are reported with their position."""
    with pytest.raises(ValueError, match=r"patch\[0\]"):
        patch_from_json([raw])


# -- bounded cost ----------------------------------------------------------------------------
budgets = st.integers(0, 400)


@given(wordy, wordy, budgets)
def test_the_law_holds_whatever_the_budget(a, b, units):
    """Past its budget a diff falls back to the linear encoding, and stays exact."""
    patch = diff(a, b, budget=Budget(units))
    assert apply(a, patch) == b
    assert apply(a, patch_from_json(json.loads(json.dumps(patch_to_json(patch))))) == b


@given(experiences, experiences, budgets)
def test_the_law_holds_for_any_experiences_and_budget(a, b, units):
    assert apply(a, diff(a, b, budget=Budget(units))) == b
    assert diff(a, a, budget=Budget(units)) == ()  # a duplicate is still a dedup


@given(wordy, wordy)
def test_an_ordinary_diff_is_the_same_under_the_default_budget(a, b):
    """Small experiences never reach the bounds: the patch is the matcher's own."""
    assert diff(a, b) == diff(a, b, budget=Budget(10**12))


def test_a_crafted_pair_is_diffed_at_a_bounded_cost():
    """Texts of repeated words make the matcher near-cubic: the budget stops it, and the
    linear encoding keeps the common prefix and suffix of every item."""
    a = ("a " * 150)[:299]
    b = ("a b " * 75)[:299]
    old = Skill("task", tuple(f"{i} {a}" for i in range(1_000)), "done")
    new = Skill("task", tuple(f"{i} {b}" for i in range(1_000)), "done")
    budget = Budget()
    patch = diff(old, new, budget=budget)
    assert apply(old, patch) == new
    assert budget.left >= 0
    assert all(isinstance(op, Edit | Splice) for op in patch)
    assert len(a) * len(b) > MAX_MATCH  # each item alone is past the single-comparison bound
