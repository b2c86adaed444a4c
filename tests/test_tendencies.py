"""Scene knowledge as tendencies across layouts, end to end: the trace extractor, the text-game
scene and the environment tree on a real SQLite store (hashing test embedder)."""

from __future__ import annotations

import sys
from pathlib import Path

from deltamem.core.knowledge import contradictions, tendency
from deltamem.core.model import Knowledge
from deltamem.core.tree import forest_problems

sys.path.insert(0, str(Path(__file__).parent / "scenes"))
from test_text_games import ALF_KITCHEN, ALF_KITCHEN_2, kitchen_episode  # noqa: E402

ALF_KITCHEN_3 = ("You are in the middle of a room. Looking quickly around you, you see a cabinet 9,"
                 " a countertop 3, a drawer 2, a fridge 1, and a microwave 1.")


def test_scene_knowledge_transfers_to_unseen_floor_plans_with_support_counts(mem):
    """Bad case (ALFWorld dev games, issue 47): the environment tree matched 13 % of unseen floor
    plans, since a layout is the plan's receptacle list, and what it held were instances. Now a
    floor plan of the same kind of room recalls the type-level tendencies, and each episode
    absorbed tallies them: seen again adds k and n, contradicted adds n only."""
    mem.learn(kitchen_episode(ALF_KITCHEN))
    recall = mem.recall("put a clean mug in sinkbasin", ALF_KITCHEN_2)
    assert recall.env.matched  # another layout, recalled by what it contains
    assert isinstance(recall.env.experience, Knowledge)
    assert "mug: found in countertop (1 of 1 episodes); found in cabinet (1 of 1 episodes)" \
        in recall.env.experience.facts

    mem.learn(kitchen_episode(ALF_KITCHEN_2))
    second = kitchen_episode(ALF_KITCHEN_3)
    only_cabinet = second.steps[2:]  # this time no mug on the countertop
    mem.learn(type(second)(second.task, env=second.env, steps=only_cabinet, success=True))
    recall = mem.recall("put a clean mug in sinkbasin", ALF_KITCHEN)
    assert recall.env.matched
    knowledge = recall.env.experience
    assert isinstance(knowledge, Knowledge)
    [mug] = [tendency(f) for f in knowledge.facts if f.startswith("mug:")]
    assert mug is not None and mug.n == 3
    assert mug.claims == (("found in cabinet", 3), ("found in countertop", 2))
    assert contradictions(knowledge.facts) == []
    # one chain of residuals: roots full, deltas only the subjects each episode observed
    chain = recall.env.nodes
    assert chain[0].is_root and all(not n.is_root for n in chain[1:])
    assert forest_problems(mem.store.nodes(mem.space)) == []


def test_scenes_of_other_contents_and_scenes_without_instances_keep_apart(mem):
    """A bathroom shares no knowledge with a kitchen; TextWorld's exact layouts are unchanged."""
    mem.learn(kitchen_episode(ALF_KITCHEN))
    bathroom = ("You are in the middle of a room. Looking quickly around you, you see a "
                "bathtubbasin 1, a sinkbasin 1, a toilet 1, and a towelholder 1.")
    assert not mem.recall("put a clean cloth in bathtubbasin", bathroom).env.matched


# -- the same mechanism for coding sessions ------------------------------------------------------

def test_project_facts_count_the_sessions_that_support_them():
    """"The tests run with `pytest -q` in k of n sessions": a claim seen again counts once more
    (whatever each run's totals), a failure in another session records n without k for the
    passing claim, and an edit makes the failing claim stale while the count stays."""
    from deltamem.core.model import Episode, Step
    from deltamem.extract.coding_session import CodingExtractor

    scene = "software project shop at /home/bob/src/shop"
    extractor = CodingExtractor()

    def session(*steps: tuple[str, str]) -> Episode:
        return Episode("run the tests", scene, steps=tuple(Step(a, o) for a, o in steps),
                       success=True)

    known = extractor.knowledge(session(("Bash: pytest -q", "3 passed in 0.2s")))
    assert known.facts == ("tests (pytest): `pytest -q` works (3 passed in 0.2s)",)  # 1 of 1
    known = extractor.knowledge(session(("Bash: pytest -q", "5 passed in 0.3s")), known)
    assert known.facts == ("tests (pytest): `pytest -q` works (5 passed in 0.3s) "
                           "(2 of 2 sessions)",)
    failing = ("Bash: pytest -q", "error: Exit code 1\nFAILED tests/test_a.py::test_x - "
                                  "assert 1 == 2\n1 failed, 4 passed in 0.3s")
    known = extractor.knowledge(session(failing), known)
    [fact] = known.facts
    counted = tendency(fact)
    assert counted is not None and counted.n == 3 and counted.unit == "sessions"
    # the latest word, as before, now with its support: 1 of the 3 sessions that ran the tests
    assert len(counted.claims) == 1 and counted.claims[0][1] == 1
    assert counted.claims[0][0].startswith("`pytest -q` fails")
    known = extractor.knowledge(session(failing), known)
    counted = tendency(known.facts[0])
    assert counted is not None and counted.n == 4 and counted.claims[0][1] == 2
    # an edit makes the failing claim stale: it goes
    edited = session(("Edit: /home/bob/src/shop/a.py", "The file has been updated."))
    assert extractor.knowledge(edited, known).facts == ()


def test_latest_first_keeps_the_latest_statement_with_its_support():
    from deltamem.core.knowledge import absorb, episode_tendencies

    known = absorb(episode_tendencies(["tests (make): `make test` works"], "sessions"),
                   episode_tendencies(["tests (make): `make test` works"], "sessions"))
    newer = episode_tendencies(["tests (make): `make test` fails"], "sessions")
    assert absorb(known, newer, 1, latest=True) == (
        "tests (make): `make test` fails (1 of 3 sessions)",)
    assert absorb(known, newer, 1) == ("tests (make): `make test` works (2 of 3 sessions)",)
