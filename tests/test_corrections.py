"""Corrections from inside the agent (issue 31 item 9): each is a new root that supersedes the
corrected node in recall, with the chain as its lineage and the delta in its meta; the history
stays."""

from __future__ import annotations

import pytest

from deltamem.core.model import Episode, Lesson, Outcome, Skill, Step, Tree
from deltamem.errors import EpisodeError, NodeNotFound

TASK = "fix the failing checkout test"
ENV = "software project shop at /src/shop"


def _learn(mem, success=True, actions=("pytest -q", "edit cart.py", "pytest -q")):
    return mem.learn(Episode(TASK, ENV, tuple(Step(a, "ok") for a in actions), success=success))


def test_steps_edited_supersede_the_skill_and_keep_history(mem):
    learned = _learn(mem)
    node = learned.task.node
    before = mem.recall(TASK, ENV).context
    assert "edit cart.py" in before
    done = mem.correct(node, steps=["run pytest -q tests/test_checkout.py",
                                    "fix Cart.total", "run the whole suite"], reason="shorter")
    assert done.kind == "steps" and done.of == node and done.tree == Tree.TASK
    recalled = mem.recall(TASK, ENV)
    assert recalled.task.node == done.node
    assert "fix Cart.total" in recalled.context and "edit cart.py" not in recalled.context
    root = mem.get(done.node)
    assert root.lineage == (node,) and root.meta["correction"]["reason"] == "shorter"
    assert root.meta["correction"]["patch"]  # the delta from the old experience
    assert mem.get(node).content == Skill(mem.get(node).content.activation,
                                          mem.get(node).content.steps,
                                          mem.get(node).content.termination)  # untouched
    assert mem.check() == []


def test_outcome_set_to_failure_turns_the_skill_into_a_lesson(mem):
    node = _learn(mem).task.node
    done = mem.correct(node, success=False, reason="the fix broke the build")
    recalled = mem.recall(TASK, ENV)
    assert recalled.task.node == done.node
    assert recalled.task.matched_node.outcome is Outcome.FAILURE
    assert "FAILED" in recalled.context and done.discredited == [node]


def test_a_lesson_that_was_a_success_becomes_a_skill(mem):
    node = _learn(mem, success=False).task.node
    assert isinstance(mem.experience(node), Lesson)
    done = mem.correct(node, success=True, reason="grep finding nothing was expected")
    recalled = mem.recall(TASK, ENV)
    assert recalled.task.node == done.node
    assert isinstance(recalled.task.experience, Skill) and "FAILED" not in recalled.context


def test_marked_wrong_recalls_nothing_of_it(mem):
    learned = _learn(mem)
    mem.correct(learned.task.node, wrong=True)
    mem.correct(learned.env.node, wrong=True)
    recalled = mem.recall(TASK, ENV)
    assert "edit cart.py" not in recalled.context and "pytest" not in recalled.context
    assert mem.check() == []


def test_bad_corrections_are_clear_errors(mem):
    learned = _learn(mem)
    with pytest.raises(EpisodeError):
        mem.correct(learned.task.node)
    with pytest.raises(EpisodeError):
        mem.correct(learned.task.node, wrong=True, success=True)
    with pytest.raises(EpisodeError):
        mem.correct(learned.env.node, steps=["a"])
    with pytest.raises(EpisodeError):
        mem.correct(learned.task.node, steps=[])
    with pytest.raises(NodeNotFound):
        mem.correct("t-0000000000000000", wrong=True)


def test_a_correction_is_redacted(mem):
    node = _learn(mem).task.node
    done = mem.correct(node, steps=["export STRIPE_KEY=sk_live_51Hq8RkLmN0pQ2rS4tUvW6xYz8aB"],
                       reason="token ghp_8fK2mQ9xR4tL7vN1pZ3sW6yB0cD5eH2jA4gU")
    root = mem.get(done.node)
    assert "sk_live_51Hq8" not in str(root.content) and "ghp_8fK2" not in done.reason


FACTS = ("tests (pytest): `pytest -q` works (5 passed)",
         "deploy (kubectl apply): `kubectl apply -f k8s/prod` fails: denied the request",
         "build (docker build): `docker build .` works")


def _knowledge(mem):
    from deltamem.core.model import Knowledge

    [node] = mem.add_roots([(Tree.ENV, ENV, Knowledge("software project shop", FACTS), {})])
    return node


def test_forget_fact_removes_one_fact_and_keeps_the_rest(mem):
    from deltamem.core.tree import compose_chain

    node = _knowledge(mem)
    done = mem.forget_fact(node, "kubectl apply -f", reason="the gate was lifted")
    assert done.kind == "fact" and done.of == node
    kept = compose_chain(mem.chain(done.node))
    assert kept.facts == (FACTS[0], FACTS[2])
    again = mem.forget_fact(done.node, "2")  # by its number as `show` lists the facts
    assert compose_chain(mem.chain(again.node)).facts == (FACTS[0],)
    assert compose_chain(mem.chain(node)).facts == FACTS  # the history stays
    assert mem.check() == []


def test_forget_fact_errors_are_clear(mem):
    node = _knowledge(mem)
    with pytest.raises(EpisodeError, match="2 facts of the 3 match"):
        mem.forget_fact(node, "works")
    with pytest.raises(EpisodeError, match="no facts"):
        mem.forget_fact(node, "terraform")
    with pytest.raises(EpisodeError):
        mem.forget_fact(node, "  ")
    learned = _learn(mem)
    with pytest.raises(EpisodeError, match="scene knowledge"):
        mem.forget_fact(learned.task.node, "pytest")
    with pytest.raises(NodeNotFound):
        mem.forget_fact("e-0000000000000000", "x")
