"""The text-game scene: layouts, places, triggers and facts of TextWorld(Express), ScienceWorld
and ALFWorld descriptions (moved here from core: the core knows no game's phrasing)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from deltamem.core.knowledge import contradictions
from deltamem.core.model import Episode, Step
from deltamem.scenes import Scene, make_scene
from deltamem.scenes.text_games import TextGames, layout_signature, scene_room

KITCHEN = ("You are in the kitchen. In one part of the room you see a stove. \nTo the North you "
           "see a closed wood door. To the West you see the corridor. ")


@given(st.text(max_size=60), st.sampled_from(["You are in the kitchen.",
                                              "This room is called the hallway.", "",
                                              "To the North you see a closed door."]))
def test_layout_signature_is_total(noise, scene):
    """Any text has a signature; it is empty exactly when no room is named."""
    for sample in (noise, scene + noise, noise + scene):
        assert (layout_signature(sample) == "") == (scene_room(sample) == "")


ALF_BATH = ("You are in the middle of a room. Looking quickly around you, you see a cabinet 2, "
            "a cabinet 1, a countertop 1, a sinkbasin 1, and a toilet 1.")


def test_alfworld_floor_plans_are_layouts():
    """Bad case (ALFWorld unseen floor plans): every room starts "You are in the middle of a
    room.", so facts of another floor plan were recalled ("On the toilet 1, you see a cloth
    1"). The receptacles of the first glance tell floor plans apart; their order does not."""
    reordered = ("You are in the middle of a room. Looking quickly around you, you see a toilet 1,"
                 " a sinkbasin 1, a countertop 1, a cabinet 1 and a cabinet 2.")
    other = ALF_BATH.replace("a cabinet 2, ", "")
    assert layout_signature(ALF_BATH) == layout_signature(reordered)
    assert layout_signature(ALF_BATH) != layout_signature(other)
    assert layout_signature(ALF_BATH).startswith("middle of a room|see=cabinet 1")


def test_door_states_do_not_change_a_layout():
    opened = KITCHEN.replace("a closed wood door", "an open wood door")
    assert layout_signature(KITCHEN) == layout_signature(opened)
    assert layout_signature(KITCHEN) == "kitchen|north=wood door|west=corridor"
    assert layout_signature(KITCHEN.replace("the corridor", "the pantry")) != layout_signature(
        KITCHEN)


def test_text_games_is_the_default_scene_and_a_scene():
    scene = make_scene()
    assert isinstance(scene, TextGames) and isinstance(scene, Scene)
    assert scene.name == "text-games"
    assert scene.signature(KITCHEN) == layout_signature(KITCHEN)
    assert scene.place("You are in the corridor. It is dark.") == "corridor"
    assert scene.place("The door is now open.") == ""
    assert scene.trigger(KITCHEN, 300) == "You are in the kitchen."
    assert scene.trigger(KITCHEN, 10) == "You are..."


def test_facts_read_rooms_exits_doors_and_placements():
    episode = Episode(
        task="put the pot in the sink", env=KITCHEN, success=True,
        steps=(Step("open door to north", "You open the wood door, revealing the laundry room."),
               Step("move pot to sink", "You move the pot to the sink."),
               Step("inventory", "In your inventory, you see: a coin."),
               Step("dance", "I don't understand that.")))
    facts = TextGames().facts(episode, 300)
    assert facts == ("North of the kitchen: the laundry room (through the wood door)",
                     "pot: in the sink")
    assert contradictions(facts) == []


def test_the_games_own_noise_phrases_live_in_the_text_game_scene():
    """ScienceWorld's "No known action matches" and "You decide to wait" are the text-game
    scene's noise; the generic rules (every other scene) know only domain-free phrasing."""
    from deltamem.extract.trace import TraceExtractor
    from deltamem.scenes.plain import Plain
    from deltamem.scenes.text import GENERIC, noise_of

    games = noise_of(TextGames())
    assert games.rejected("No known action matches that input.")
    assert games.says_nothing("You decide to wait for 1 iterations.")
    assert games.rejected("I don't understand that.") and GENERIC.rejected("I don't understand.")
    assert not GENERIC.rejected("No known action matches that input.")
    assert not GENERIC.says_nothing("You decide to wait for 1 iterations.")
    assert noise_of(Plain()) is GENERIC and noise_of(object()) is GENERIC

    episode = Episode(task="boil water", env="a lab", success=True, steps=(
        Step("boil", "No known action matches that input."), Step("activate stove",
                                                                   "The stove is now on.")))
    assert TraceExtractor().skill(episode).steps == ("activate stove",)
    assert TraceExtractor(scene=Plain()).skill(episode).steps == ("boil", "activate stove")
    lost = Episode(task="boil water", env="a lab", success=False, steps=episode.steps)
    assert TraceExtractor().lesson(lost).failed == (
        'boil (step 1) -> "No known action matches that input."',)


# -- instances and tendencies (ALFWorld's floor plans) -----------------------------------------

ALF_KITCHEN = ("You are in the middle of a room. Looking quickly around you, you see a cabinet 4, "
               "a cabinet 3, a countertop 1, a drawer 1, a fridge 1, and a sinkbasin 1.")
ALF_KITCHEN_2 = ("You are in the middle of a room. Looking quickly around you, you see a cabinet 2,"
                 " a cabinet 1, a countertop 2, a countertop 1, a fridge 1, and a toaster 1.")


def kitchen_episode(scene: str = ALF_KITCHEN) -> Episode:
    steps = (
        Step("go to countertop 1", "You arrive at countertop 1. On the countertop 1, you see a "
                                   "bread 1, and a mug 2."),
        Step("go to cabinet 3", "You arrive at cabinet 3. The cabinet 3 is closed."),
        Step("open cabinet 3", "You open the cabinet 3. The cabinet 3 is open. In it, you see a "
                               "mug 1."),
        Step("take mug 1 from cabinet 3", "You pick up the mug 1 from the cabinet 3."),
        Step("go to sinkbasin 1", "You arrive at sinkbasin 1. On the sinkbasin 1, you see "
                                  "nothing."),
        Step("move mug 1 to sinkbasin 1", "You move the mug 1 to the sinkbasin 1."),
        Step("look", "You are facing the sinkbasin 1. Next to it, you see nothing. On the "
                     "sinkbasin 1, you see a mug 1."),
    )
    return Episode("put a clean mug in sinkbasin", env=scene, steps=steps, success=True)


def test_a_scene_of_instances_has_its_types_as_contents():
    """Instance numbers are stripped ("a cabinet 4" is a cabinet); two floor plans of the same
    kind of room share contents though their layouts differ; TextWorld has no instances."""
    assert TextGames().contents(ALF_KITCHEN) == {"cabinet", "countertop", "drawer", "fridge",
                                                 "sinkbasin"}
    assert layout_signature(ALF_KITCHEN) != layout_signature(ALF_KITCHEN_2)
    assert TextGames().contents(ALF_KITCHEN_2) == {"cabinet", "countertop", "fridge", "toaster"}
    assert TextGames().contents(KITCHEN) == frozenset()
    assert TextGames(tendencies=False).contents(ALF_KITCHEN) == frozenset()


def test_a_scene_of_instances_teaches_type_level_tendencies():
    """Bad case (ALFWorld, issue 47): the trace extractor stored instances ("go to countertop 1
    ...: On the countertop 1, you see a mug 2"), which no other floor plan has. Every sighting
    becomes "<type>: found in <type>", once per episode, counted; what the agent moved itself is
    no sighting."""
    facts = TextGames().facts(kitchen_episode(), 300)
    assert facts == ("bread: found in countertop (1 of 1 episodes)",
                     "mug: found in countertop (1 of 1 episodes); "
                     "found in cabinet (1 of 1 episodes)")
    assert not any(char.isdigit() for fact in facts for char in fact.split("(")[0])
    assert contradictions(facts) == []
    old = TextGames(tendencies=False).facts(kitchen_episode(), 300)
    assert any("countertop 1" in fact for fact in old)  # the rule before: instances
