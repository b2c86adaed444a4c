"""Laws of exact structured deltas (property-tested)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deltamem.core.delta import (
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
# Real text: any unicode (including the separators and quotes facts and lessons use).
real = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)
real_items = st.lists(st.one_of(item, real), max_size=10).map(tuple)
real_experiences = st.one_of(
    st.builds(Skill, activation=real, steps=real_items, termination=real),
    st.builds(Knowledge, trigger=real, facts=real_items),
    st.builds(Lesson, situation=real, failed=real_items, untried=real_items, worked=real_items),
)
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


@given(experiences)
def test_diff_of_equal_is_empty(a):
    """An experience differs from itself by nothing (the dedup rule)."""
    assert diff(a, a) == ()


@given(experiences, experiences)
def test_patch_json_roundtrip(a, b):
    """A patch survives its JSON form unchanged."""
    patch = diff(a, b)
    assert patch_from_json(patch_to_json(patch)) == patch


@given(st.lists(skills, min_size=1, max_size=5))
def test_compose_chain_of_diffs_reaches_last(chain):
    """Composing successive residuals reproduces the last experience exactly."""
    patches = [diff(x, y) for x, y in zip(chain, chain[1:], strict=False)]
    assert compose(chain[0], patches) == chain[-1]


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
