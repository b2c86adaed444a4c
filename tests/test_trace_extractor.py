"""The trace extractor's documented rules."""

from __future__ import annotations

from deltamem.core.knowledge import contradictions
from deltamem.core.model import Episode, Knowledge, Lesson, Skill, Step, Tree
from deltamem.extract.base import ExtractRequest
from deltamem.extract.trace import TraceExtractor
from helpers import make_episode

# Real TextWorldExpress coin observations (seed 0 of the train fold).
TWX_KITCHEN = (
    "You are in the kitchen. In one part of the room you see a stove. There is also an oven. You "
    "also see a fridge that is closed. In another part of the room you see a counter, that has "
    "nothing on it. \nTo the North you see a closed wood door. To the East you see a closed "
    "frosted-glass door. To the West you see the corridor. ")
TWX_CORRIDOR = (
    "You are in the corridor. In one part of the room you see a key holder, that has nothing on "
    "it. There is also a shoe cabinet that is closed. \nTo the North you see a closed wood door. "
    "To the East you see the kitchen. To the West you see a closed patio door. ")
DEPLOY = Episode(
    task="deploy the web service to production", env="a CI runner with docker and kubectl",
    success=False,
    steps=(Step("build docker image", "Successfully built 3f2a1b9c"),
           Step("kubectl apply -f k8s/prod",
                "error: forbidden, production requires an approved change ticket")))


def test_success_becomes_skill_with_verbatim_actions():
    """Steps are the actions in order; termination is the last observation."""
    ep = make_episode(actions=("open  door", "go to kitchen"))
    got = TraceExtractor().extract(ExtractRequest(ep, Tree.TASK)).experience
    assert got == Skill("heat the apple", ("open door", "go to kitchen"), "You go to kitchen.")


def test_look_around_loop_is_not_copied_into_the_skill():
    """Bad case: six `look around` with the same answer became a six-step skill."""
    look = Step("look around", TWX_KITCHEN)
    ep = Episode(task="find the coin", env=TWX_KITCHEN, success=True,
                 steps=(look,) * 6 + (Step("dance", "I don't understand that."),
                                      Step("move west", TWX_CORRIDOR),
                                      Step("look around", TWX_CORRIDOR),
                                      Step("take coin", "You take the coin.")))
    skill = TraceExtractor().skill(ep)
    # Repeats of the step just kept and rejected actions go; a later look (after a move) stays.
    assert skill.steps == ("look around", "move west", "look around", "take coin")


TWX_PANTRY = ("You are in the pantry. In one part of the room you see a folding chair, that has "
              "nothing on it. There is also a shelf, that has nothing on it. \nTo the South you "
              "see the kitchen. ")
TWX_BEDROOM = ("You are in the bedroom. In one part of the room you see a bed. \nTo the East you "
               "see the corridor. ")


def test_rooms_looked_into_and_left_are_not_copied_into_the_skill():
    """Bad case: Coin Collector's gold path (north into the pantry and back, west into the
    corridor, into the bedroom and back) became a 13-step skill that sent an agent back and
    forth until it ran out of steps; the route is three moves."""
    steps = [Step("look around", TWX_KITCHEN)]
    steps += [Step("move north", TWX_PANTRY), Step("move south", TWX_KITCHEN)] * 2
    steps += [Step("move west", TWX_CORRIDOR), Step("move west", TWX_BEDROOM),
              Step("move east", TWX_CORRIDOR), Step("move north", TWX_PANTRY + " (other)"),
              Step("take coin", "You take the coin.")]
    ep = Episode(task="find the coin", env=TWX_KITCHEN, success=True, steps=tuple(steps))
    assert TraceExtractor().skill(ep).steps == ("look around", "move west", "move north",
                                                "take coin")


def test_retraced_rooms_only_count_when_the_descriptions_match_word_for_word():
    """A room that looks different on the way back (something changed there) keeps the walk."""
    changed = TWX_KITCHEN.replace("a stove", "a stove and a coin")
    ep = Episode(task="find the coin", env=TWX_KITCHEN, success=True,
                 steps=(Step("move west", TWX_CORRIDOR), Step("move east", changed),
                        Step("take coin", "You take the coin.")))
    assert TraceExtractor().skill(ep).steps == ("move west", "move east", "take coin")


def test_repeated_replies_and_looks_are_not_mistaken_for_retraced_moves():
    """ScienceWorld answers every door with "The door is now open." and a look after a focus
    shows the same room: neither pair is a detour (both steps are needed)."""
    sw_room = "This room is called the outside. In it, you see: \n\ta baby elephant\n"
    ep = Episode(task="focus on the elephant", env="This room is called the hallway.",
                 success=True,
                 steps=(Step("open door to greenhouse", "The door is now open."),
                        Step("go to greenhouse", "You move to the greenhouse."),
                        Step("open door to outside", "The door is now open."),
                        Step("go to outside", "You move to the outside."),
                        Step("look around", sw_room),
                        Step("focus on baby elephant", "You focus on the baby elephant."),
                        Step("look around", sw_room),
                        Step("focus on adult elephant", "You focus on the adult elephant.")))
    assert TraceExtractor().skill(ep).steps == tuple(s.action for s in ep.steps)


TWC_HALL = ("-= Hallway =-\nYou arrive in a hallway. You see a shoe cabinet. The shoe cabinet is "
            "closed. You make out a brown business shoes on the floor.")


def test_steps_the_agent_undid_are_not_copied_into_the_skill():
    """Bad case (online run, stream episode 43): the agent's first win opened and shut the shoe
    cabinet on the way; every later game recalled that walk as its skill, and played 51
    open-then-close pairs a game in 10 steps."""
    ep = Episode(task="tidy up the house", env=TWC_HALL, success=True, steps=(
        Step("open shoe cabinet", "You open the shoe cabinet."),
        Step("close shoe cabinet", "You close the shoe cabinet."),
        Step("open shoe cabinet", "You open the shoe cabinet."),
        Step("take brown business shoes", "You pick up the brown business shoes."),
        Step("put brown business shoes in shoe cabinet", "You put the shoes in the cabinet.")))
    assert TraceExtractor().skill(ep).steps == (
        "open shoe cabinet", "take brown business shoes",
        "put brown business shoes in shoe cabinet")


def test_detours_nest_and_only_true_undos_count():
    """Once a detour goes, the steps around it are consecutive: a room entered, a cupboard
    opened and shut there, the room left is all detour. A close that did nothing ("already
    closed") undoes nothing, two different objects are not a pair, and a device switched on
    and off did its work meanwhile (ScienceWorld's sink fills a cup)."""
    ep = Episode(task="find the coin", env=TWX_KITCHEN, success=True, steps=(
        Step("move north", TWX_PANTRY),
        Step("open cupboard", "You open the cupboard."),
        Step("close cupboard", "You close the cupboard."),
        Step("move south", TWX_KITCHEN),
        Step("open fridge", "You open the fridge."),
        Step("close oven", "The oven is already closed."),
        Step("close fridge", "You close the fridge."),
        Step("open drawer", "You open the drawer."),
        Step("close cabinet", "You close the cabinet."),
        Step("activate sink", "The sink is now activated."),
        Step("deactivate sink", "The sink is now deactivated."),
        Step("take coin", "You take the coin.")))
    assert TraceExtractor().skill(ep).steps == (
        "open fridge", "close oven", "close fridge", "open drawer", "close cabinet",
        "activate sink", "deactivate sink", "take coin")


def test_the_last_step_is_never_dropped_as_a_retraced_move():
    """Walking back into the start room can be the goal ("return to the kitchen")."""
    ep = Episode(task="visit the corridor and return to the kitchen", env=TWX_KITCHEN,
                 success=True,
                 steps=(Step("move west", TWX_CORRIDOR), Step("move east", TWX_KITCHEN)))
    assert TraceExtractor().skill(ep).steps == ("move west", "move east")


def test_failure_lesson_keeps_the_error_and_what_worked():
    """Bad case: the error text was dropped and a step that worked was flagged as failed."""
    lesson = TraceExtractor().extract(ExtractRequest(DEPLOY, Tree.TASK)).experience
    assert lesson == Lesson(
        situation="deploy the web service to production",
        failed=('kubectl apply -f k8s/prod (step 2) -> "error: forbidden, production requires an '
                'approved change ticket"',),
        worked=("build docker image",))


def test_failure_lesson_says_what_the_matched_skill_did_that_was_not_tried():
    """Untried = the matched skill's steps this attempt never played."""
    skill = Skill("deploy", ("build docker image", "open change ticket",
                             "kubectl apply -f k8s/prod"))
    lesson = TraceExtractor().extract(ExtractRequest(DEPLOY, Tree.TASK, matched=skill)).experience
    assert isinstance(lesson, Lesson) and lesson.untried == ("open change ticket",)


def test_a_step_that_lowered_the_score_is_a_failed_step():
    """Bad case (online Commonsense): "You put the hiking boots in the umbrella stand." reads as
    fine but took a point away; the lesson listed it as worked. A step that lowered the score
    is failed, with the drop; a step that earned nothing is not blamed for it, nor listed as
    worked (the 135M agent replayed a lost game's "Worked: open shoe cabinet" lines)."""
    ep = Episode(task="tidy up", env="You are in the corridor.", success=False, steps=(
        Step("take hiking boots", "You take the hiking boots.", reward=0.25),
        Step("put hiking boots in umbrella stand",
             "You put the hiking boots in the umbrella stand.", reward=-0.25),
        Step("open shoe cabinet", "You open the shoe cabinet.", reward=0.0),
        Step("take gray coat", "You take the gray coat.", reward=0.25)))
    lesson = TraceExtractor().lesson(ep)
    assert lesson.failed == ('put hiking boots in umbrella stand (step 2, score -0.25) -> '
                             '"You put the hiking boots in the umbrella stand."',)
    assert lesson.worked == ("take hiking boots", "take gray coat")


def test_failure_without_an_error_blames_the_last_step():
    """When no reply reads as an error, the episode stopped at its last step."""
    ep = make_episode(actions=("look", "go north"), success=False)
    lesson = TraceExtractor().lesson(ep)
    assert lesson.failed == ('go north (step 2) -> "You go north."',)
    assert lesson.worked == ("look",)


def test_knowledge_is_statements_about_the_scene_not_a_transcript():
    """Bad case: facts were `look around: ...` lines; now they say what is where."""
    ep = Episode(task="find the coin", env=TWX_KITCHEN, success=False, steps=(
        Step("look around", TWX_KITCHEN), Step("look around", TWX_KITCHEN),
        Step("open door to north", "You open the wood door, revealing the laundry room. "),
        Step("dance", "I don't understand that."),
        Step("move west", TWX_CORRIDOR)))
    facts = TraceExtractor().knowledge(ep).facts
    assert facts == (
        "In the kitchen: a stove; an oven; a fridge (closed); a counter (nothing on it)",
        "North of the kitchen: the laundry room (through the wood door)",
        "East of the kitchen: a closed frosted-glass door",
        "West of the kitchen: the corridor",
        "In the corridor: a key holder (nothing on it); a shoe cabinet (closed)",
        "North of the corridor: a closed wood door",
        "East of the corridor: the kitchen",
        "West of the corridor: a closed patio door",
    )
    assert not any(f.startswith("look around") for f in facts)
    assert contradictions(facts) == []


def test_scienceworld_room_description_gives_contents_and_doors():
    """ScienceWorld's tab-indented listing: contents in one fact, one fact per door."""
    hallway = ("This room is called the hallway. In it, you see: \n\tthe agent\n\ta substance "
               "called air\n\ta picture\nYou also see:\n\tA door to the art studio (that is open)"
               "\n\tA door to the kitchen (that is closed)")
    ep = Episode(task="t", env=hallway, steps=(
        Step("look around", hallway), Step("go to kitchen", "You move to the kitchen."),
        Step("pick up thermometer", "You move the thermometer to the inventory."),
        Step("move metal pot to sink", "You move the metal pot to the sink."),
        Step("activate sink", "The sink is now activated.")))
    assert TraceExtractor().knowledge(ep).facts == (
        "In the hallway: a substance called air; a picture",
        "Door from the hallway to the art studio: open",
        "Door from the hallway to the kitchen: closed",
        "metal pot: in the sink",
        "activate sink in the kitchen: The sink is now activated.",
    )


def test_a_failed_episodes_unrewarded_placements_are_not_learned_as_where_things_go():
    """Bad case (online Commonsense): the agent put the boots in the umbrella stand, the score
    did not move, the episode failed, and the next episode recalled that placement as a fact;
    "open shoe cabinet: You open the shoe cabinet." from lost games became the next agent's
    first steps. A rewarded placement of the same episode stays, and so does a door the step
    revealed (the map, not the agent's move), and every fact when the episode succeeded or
    its steps carry no reward."""
    steps = (Step("put hiking boots in umbrella stand",
                  "You put the hiking boots in the umbrella stand.", reward=0.0),
             Step("move metal pot to sink", "You move the metal pot to the sink.", reward=0.0),
             Step("put gray coat in coat hanger", "You put the gray coat in the coat hanger.",
                  reward=0.5),
             Step("open shoe cabinet", "You open the shoe cabinet. It's empty inside.",
                  reward=0.0),
             Step("open door to north", "You open the wood door, revealing the laundry room.",
                  reward=0.0))
    failed = Episode(task="t", env=TWX_CORRIDOR, steps=steps, success=False)
    assert TraceExtractor().knowledge(failed).facts == (
        "put gray coat in coat hanger in the corridor: You put the gray coat in the coat hanger.",
        "North of the corridor: the laundry room (through the wood door)")
    for episode in (Episode(task="t", env=TWX_CORRIDOR, steps=steps, success=True),
                    Episode(task="t", env=TWX_CORRIDOR, success=False,
                            steps=tuple(Step(s.action, s.observation) for s in steps))):
        facts = TraceExtractor().knowledge(episode).facts
        assert len(facts) == 5 and "metal pot: in the sink" in facts
        assert "open shoe cabinet in the corridor: You open the shoe cabinet. It's empty " \
               "inside." in facts


def test_known_facts_are_superseded_in_place_not_contradicted():
    """Bad case: one block held "To the West you see the pantry" and "To the North ..."."""
    known = Knowledge("You are in the kitchen.", (
        "In the kitchen: a stove; a coin", "West of the kitchen: the pantry",
        "North of the kitchen: a closed wood door"))
    ep = Episode(task="t", env=TWX_KITCHEN, steps=(
        Step("open door to north", "You open the wood door, revealing the pantry. "),))
    merged = TraceExtractor().knowledge(ep, known)
    assert merged.facts == ("In the kitchen: a stove; a coin", "West of the kitchen: the pantry",
                            "North of the kitchen: the pantry (through the wood door)")
    assert contradictions(merged.facts) == []


def test_knowledge_accumulates_on_a_known_scene():
    """Matched knowledge keeps its facts and gains the new ones (the residual is the new ones)."""
    known = Knowledge("old", ("look in the kitchen: a fridge.", "open drawer: it is empty."))
    ep = make_episode(actions=("open fridge",), observations=("The fridge is now open.",))
    got = TraceExtractor().extract(ExtractRequest(ep, Tree.ENV, matched=known))
    assert got.experience.facts == ("look in the kitchen: a fridge.", "open drawer: it is empty.",
                                    "open fridge: The fridge is now open.")
    assert got.standalone == TraceExtractor().knowledge(ep)


def test_knowledge_cap_forgets_oldest_unseen_facts():
    """Over the cap, facts the episode saw again survive; the oldest others go."""
    known = Knowledge("old", ("a: 1.", "b: 2.", "c: 3."))
    ep = make_episode(actions=("a", "d"), observations=("1.", "4."))
    got = TraceExtractor(max_facts=3).knowledge(ep, known)
    assert got.facts == ("a: 1.", "c: 3.", "d: 4.")


def test_long_text_is_capped():
    """Noisy observations cannot blow up the memory."""
    ep = make_episode(actions=("look",), observations=("x" * 5000,))
    knowledge = TraceExtractor(max_chars=100).knowledge(ep)
    assert len(knowledge.facts[0]) <= 110


def test_a_won_episodes_mistakes_are_neither_steps_nor_facts():
    """Bad case (online Commonsense, dev split): the agent's first win put the peanut oil on the
    folding chair twice (each -0.25) before the shelf; the skill and the scene knowledge of
    that win sent every later game's objects to the chair. A step that lowered the score is
    left out of the skill and gives no fact, however the episode ended."""
    ep = Episode(task="tidy up", env="You are in the pantry.", success=True, steps=(
        Step("take peanut oil", "You take the peanut oil.", reward=0.25),
        Step("put peanut oil in folding chair", "You put the peanut oil in the folding chair.",
             reward=-0.25),
        Step("take peanut oil", "You take the peanut oil.", reward=0.25),
        Step("put peanut oil in shelf", "You put the peanut oil in the shelf.", reward=0.25)))
    extractor = TraceExtractor()
    # With the mistake gone, taking the oil back repeats the step before it.
    assert extractor.skill(ep).steps == ("take peanut oil", "put peanut oil in shelf")
    assert extractor.knowledge(ep).facts == (
        "put peanut oil in shelf in the pantry: You put the peanut oil in the shelf.",)
