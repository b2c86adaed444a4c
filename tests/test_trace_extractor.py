"""The trace extractor's documented rules."""

from __future__ import annotations

from deltamem.core.model import Knowledge, Lesson, Skill, Tree
from deltamem.extract.base import ExtractRequest
from deltamem.extract.trace import TraceExtractor
from helpers import make_episode


def test_success_becomes_skill_with_verbatim_actions():
    """Steps are the actions in order; termination is the last observation."""
    ep = make_episode(actions=("open  door", "go to kitchen"))
    got = TraceExtractor().extract(ExtractRequest(ep, Tree.TASK)).experience
    assert got == Skill("heat the apple", ("open door", "go to kitchen"), "You go to kitchen.")


def test_failure_becomes_lesson():
    """A failed episode records what was tried."""
    ep = make_episode(actions=("look",), success=False)
    assert TraceExtractor().extract(ExtractRequest(ep, Tree.TASK)).experience == \
        Lesson("heat the apple", ("look",))


def test_knowledge_drops_uninformative_observations_and_duplicates():
    """Facts keep informative observations once, in order, whatever the outcome."""
    ep = make_episode(
        env="This room is called the kitchen. In it, you see a fridge.",
        actions=("look", "dance", "look", "open fridge"),
        observations=("A fridge.", "No known action matches that input.", "A fridge.",
                      "The fridge is now open."),
        success=False,
    )
    got = TraceExtractor().extract(ExtractRequest(ep, Tree.ENV)).experience
    assert got == Knowledge("This room is called the kitchen.",
                            ("look: A fridge.", "open fridge: The fridge is now open."))


def test_long_text_is_capped():
    """Noisy observations cannot blow up the memory."""
    ep = make_episode(actions=("look",), observations=("x" * 5000,))
    knowledge = TraceExtractor(max_chars=100).knowledge(ep)
    assert len(knowledge.facts[0]) <= 110


def test_knowledge_accumulates_on_a_known_scene():
    """Matched knowledge keeps its facts and gains the new ones (the residual is the new ones)."""
    known = Knowledge("old", ("look: a fridge.", "look: a table."))
    ep = make_episode(actions=("look", "open fridge"),
                      observations=("A table.", "The fridge is now open."))
    request = ExtractRequest(ep, Tree.ENV, matched=known)
    got = TraceExtractor().extract(request)
    assert got.experience.facts == ("look: a fridge.", "look: a table.", "look: A table.",
                                    "open fridge: The fridge is now open.")
    assert got.standalone == TraceExtractor().knowledge(ep)


def test_knowledge_cap_forgets_oldest_unseen_facts():
    """Over the cap, facts the episode saw again survive; the oldest others go."""
    known = Knowledge("old", ("a: 1.", "a: 2.", "a: 3."))
    ep = make_episode(actions=("a", "a"), observations=("1.", "4."))
    got = TraceExtractor(max_facts=3).knowledge(ep, known)
    assert got.facts == ("a: 1.", "a: 3.", "a: 4.")
