"""Template and slots of task keys (``core.slots``), on values: no store, no embedder."""

from __future__ import annotations

from deltamem.core.slots import adapt, query_slots, roles, slots_of, template, tokens

HEAT = ("go to countertop 1", "take mug 1 from countertop 1", "go to microwave 1",
        "heat mug 1 with microwave 1", "go to shelf 1", "move mug 1 to shelf 1")


def test_the_slots_of_a_key_are_the_words_its_actions_act_on_never_their_verbs() -> None:
    key = "Your task is to: heat some mug and put it in shelf."
    found = slots_of(key, HEAT)
    assert {"mug", "shelf"} <= set(found)
    assert "heat" not in found  # the verb of "heat mug 1 with microwave 1": the template's
    assert "put" not in found and "some" not in found  # no action names them
    assert slots_of(key, ()) == ()


def test_a_coding_sessions_files_and_command_arguments_are_slots() -> None:
    actions = ["Bash: pytest -q tests/test_api.py", "Read: src/api/routes.py"]
    found = slots_of("fix the failing case in tests/test_api.py", actions)
    assert {"tests", "api", "py"} <= set(found)
    assert "fix" not in found and "failing" not in found
    assert template("fix the failing case in tests/test_api.py", found) == \
        "fix the failing case in"


def test_the_template_drops_whole_slot_words_and_keeps_the_rest_in_order() -> None:
    key = "Your task is to: put a clean mug in countertop."
    assert template(key, {"mug", "countertop"}) == "Your task is to: put a clean in"
    assert template(key, ()) == key
    assert tokens("Put a mug-1 in X") == ["put", "a", "mug", "in", "x"]


def test_a_query_word_is_a_slot_when_the_keys_holding_it_hold_it_as_a_slot() -> None:
    stored = [("heat some mug and put it in shelf", ("mug", "shelf")),
              ("find a living thing", ()),  # "living" names the kind here
              ("find a plant, then go to the living room", ("living", "room")),
              ("find a non-living thing", ())]
    found = query_slots("cool some mug and put it in countertop", stored)
    assert found == {"mug"}  # countertop: no stored key names it; cool: no key acts on it
    assert "living" not in query_slots("find a living thing", stored)  # outvoted 2 to 1


def test_roles_map_a_recalled_keys_slots_onto_the_new_tasks_words() -> None:
    key = "Your task is to: heat some mug and put it in shelf."
    new = "Your task is to: heat some egg and put it in countertop."
    mapping = roles(key, {"mug", "shelf"}, new)
    assert mapping == {"mug": "egg", "shelf": "countertop"}
    assert adapt("take mug 1 from countertop 1", mapping) == "take egg 1 from countertop 1"
    assert adapt("move mug 1 to shelf 1", mapping) == "move egg 1 to countertop 1"
    # A word that is no slot is never rewritten, even where the keys differ there.
    assert roles(key, {"mug", "shelf"}, "Your task is to: cool some mug and put it in shelf.") \
        == {}


def test_roles_follow_the_templates_order_where_the_phrasings_differ() -> None:
    key = "Your task is to: heat some mug and put it in shelf."
    new = "Your task is to: put a hot egg in countertop."
    # The alignment maps only the destination ("heat some mug and" against "put a hot egg" is
    # no run of equal length); the order maps both.
    assert roles(key, {"mug", "shelf"}, new) == {"shelf": "countertop"}
    assert roles(key, {"mug", "shelf"}, new, {"egg", "countertop"}) == \
        {"mug": "egg", "shelf": "countertop"}
    # Unequal counts: the alignment decides.
    assert roles(key, {"mug", "shelf"}, "Your task is to: heat some egg and put it in shelf.",
                 {"egg"}) == {"mug": "egg"}
