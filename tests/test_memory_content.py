"""What recall hands an agent: consistent facts, teaching lessons, loop-free skills, a budget.

Each test named after a bad case reproduces what a new user saw before (it fails on that code).
"""

from __future__ import annotations

import pytest

from deltamem.config import Settings
from deltamem.core.knowledge import contradictions
from deltamem.core.model import Episode, Knowledge, Lesson, Step
from deltamem.core.render import estimate_tokens, render_patch
from deltamem.embed.hashing import HashingEmbedder
from deltamem.engine.memory import DeltaMem
from deltamem.errors import ConfigError
from deltamem.extract.trace import TraceExtractor
from deltamem.store.sqlite import SQLiteStore
from helpers import make_episode
from test_trace_extractor import DEPLOY, TWX_CORRIDOR

# Two TextWorldExpress coin maps (train seeds 0 and 4): both start in the same kitchen, but the
# rooms behind its doors differ.
KITCHEN_A = ("You are in the kitchen. In one part of the room you see a stove. There is also an "
             "oven. \nTo the North you see a closed wood door. To the East you see a closed "
             "frosted-glass door. To the West you see the corridor. ")
KITCHEN_B = ("You are in the kitchen. In one part of the room you see a stove. There is also an "
             "oven. \nTo the North you see a closed sliding patio door. To the South you see a "
             "closed wood door. To the East you see a closed frosted-glass door. To the West you "
             "see the corridor. ")
COIN = "Your task is to search the environment and find the coin. Once you find the coin, take it."


def coin_episode(scene: str, doors: tuple[tuple[str, str], ...]) -> Episode:
    steps = [Step("look around", scene)]
    steps += [Step(f"open door to {d}", f"You open the door, revealing the {room}. ")
              for d, room in doors]
    steps += [Step("move west", TWX_CORRIDOR), Step("take coin", "You take the coin.")]
    return Episode(task=COIN, env=scene, steps=tuple(steps), success=True, score=1.0)


MAP_A = coin_episode(KITCHEN_A, (("north", "laundry room"), ("east", "pantry")))
MAP_B = coin_episode(KITCHEN_B, (("north", "backyard"), ("south", "laundry room"),
                                 ("east", "pantry")))


@pytest.fixture
def loose(tmp_path):
    # Both kitchens (and both deploy tasks) clear these thresholds with the hashing double.
    with DeltaMem(SQLiteStore(tmp_path / "m.db"), HashingEmbedder(), TraceExtractor(),
                  settings=Settings(tau_task=0.3, tau_env=0.3, embedder="hashing")) as mem:
        yield mem


def test_other_maps_facts_are_not_recalled_and_nothing_contradicts(loose):
    """Bad case: one block held both "North ... the laundry room" and "North ... the backyard"."""
    loose.learn(MAP_A)
    loose.learn(MAP_B)
    assert loose.stats().env.roots == 2  # two layouts, two roots
    for episode in (MAP_A, MAP_B):
        recall = loose.recall(episode.task, episode.env)
        knowledge = recall.env.experience
        assert isinstance(knowledge, Knowledge)
        assert set(knowledge.facts) == set(TraceExtractor().knowledge(episode).facts)
        assert contradictions(knowledge.facts) == []
    assert "backyard" not in loose.recall(COIN, KITCHEN_A).context


def test_a_newer_fact_supersedes_and_history_keeps_the_old(loose):
    """Same map, the door now opens onto another room: the delta replaces the fact in place."""
    first = loose.learn(MAP_A)
    changed = coin_episode(KITCHEN_A, (("north", "bathroom"), ("east", "pantry")))
    second = loose.learn(changed)
    assert second.env.action == "delta" and second.env.parent == first.env.node
    shown = loose.show(second.env.node).wire()
    assert len(shown["patch"]) == 1 and shown["patch"][0][0] == "edit"
    facts = loose.experience(second.env.node).facts
    assert "North of the kitchen: the bathroom (through the door)" in facts
    assert "North of the kitchen: the laundry room (through the door)" not in facts
    assert contradictions(facts) == []
    # The older statement is still in the chain's history.
    assert "North of the kitchen: the laundry room (through the door)" in \
        loose.experience(first.env.node).facts
    # Rendered, the delta says it supersedes the older statement.
    text = render_patch(loose.get(second.env.node).patch, loose.experience(first.env.node))
    assert text.startswith("Supersede facts ") and "the laundry room" in text \
        and "-> North of the kitchen: the bathroom" in text


def test_identical_failures_dedup_like_successes(mem):
    """Bad case: learning the same failed episode 4 times wrote 4 identical failure nodes."""
    success = Episode(task=DEPLOY.task, env=DEPLOY.env, success=True, steps=(
        DEPLOY.steps[0], Step("kubectl apply -f k8s/prod", "deployment.apps/web configured")))
    mem.learn(success)
    results = [mem.learn(DEPLOY) for _ in range(4)]
    assert [r.task.action for r in results] == ["root", "dedup", "dedup", "dedup"]
    lessons = [n for n in mem.nodes() if n.outcome == "failure"]
    assert len(lessons) == 1 and lessons[0].failures == 3 and lessons[0].hits == 3
    assert mem.check() == []


def test_failure_lesson_quotes_the_error_and_keeps_what_worked(mem):
    """Bad case: "Tried and failed: build docker image" lost the error and blamed a good step."""
    mem.learn(DEPLOY)
    context = mem.recall(DEPLOY.task, "").context
    assert ('- Failed: kubectl apply -f k8s/prod (step 2) -> "error: forbidden, production '
            'requires an approved change ticket"') in context
    assert "- Worked (in that attempt): build docker image" in context
    assert "Failed: build docker image" not in context
    assert "WARNING" in context and "1. build docker image" not in context  # never instructions
    assert "Source: 1 past episode (0 succeeded, 1 failed)." in context


def test_look_around_loop_is_not_learned(mem):
    """Bad case: a trajectory with `look around` six times became a six-step skill."""
    look = Step("look around", "You are in the kitchen. You see a fridge.")
    episode = Episode(task="heat the apple", env="a kitchen", success=True,
                      steps=(look,) * 6 + (Step("take apple", "You take the apple."),))
    node = mem.learn(episode).task.node
    assert mem.experience(node).steps == ("look around", "take apple")
    assert "2. take apple" in mem.recall("heat the apple", "").context


def test_first_episode_of_another_task_is_a_root_when_a_patch_costs_more(loose):
    """Bad case (storage): a new task was written as a delta of another task at a root's cost."""
    loose.learn(make_episode(task="deploy the web service", actions=("build image", "apply")))
    other = make_episode(task="deploy the database service",
                         actions=("dump schema", "migrate tables", "restart replicas"))
    result = loose.learn(other)
    assert result.task.action == "root"
    # ... while a small variation of a known task is still a cheap delta.
    varied = loose.learn(make_episode(task="deploy the web service",
                                      actions=("build image", "test", "apply")))
    assert varied.task.action == "delta"
    stats = loose.stats().wire()
    assert stats["stored_chars"] < stats["flat_chars"]


def test_consolidated_roots_count_in_stored_chars(mem):
    """A consolidated root restates its chain's composition; stats count what the store keeps
    for it (its row, whose long steps refer to texts the chain already holds), not hide it."""
    mem.learn(make_episode())
    for _ in range(4):
        mem.learn(make_episode(actions=("go to kitchen", "open microwave", "take apple",
                                        "heat apple")))
    assert any(n.is_consolidated_root for n in mem.nodes())
    stats = mem.stats().wire()
    footprint = mem.store.footprint(mem.space)
    assert stats["stored_chars"] == footprint.total > 0
    assert stats["task"]["stored_chars"] + stats["env"]["stored_chars"] + \
        stats["texts"]["chars"] == stats["stored_chars"]


def test_consolidated_root_keeps_the_evidence_of_its_chain(mem):
    """Bad case: a skill compiled from five successful episodes was recalled with "Source: 0
    past episodes (0 succeeded, 0 failed)" (consolidation writes a new root, which no episode
    wrote or matched yet)."""
    mem.learn(make_episode())
    longer = ("go to kitchen", "open microwave", "take apple", "heat apple")
    done = [mem.learn(make_episode(actions=longer)) for _ in range(4)]
    compiled = [c for r in done for c in r.consolidated if c.tree == "task"]
    assert len(compiled) == 1
    assert mem.get(compiled[0].root).meta["evidence"] == {"episodes": 5, "successes": 5,
                                                          "failures": 0}
    recall = mem.recall(make_episode().task, "")
    assert recall.task.node is not None and recall.task.node == compiled[0].root
    assert "Source: 5 past episodes (5 succeeded, 0 failed), compiled from 2 earlier nodes." \
        in recall.context
    # Episodes that match the new root add to what it inherited.
    mem.learn(make_episode(actions=longer))
    assert "Source: 6 past episodes (6 succeeded, 0 failed)" in mem.recall(
        make_episode().task, "").context


@pytest.mark.parametrize("budget", [0, 20, 60, 90, 120, 160, 240, 400, 10_000])
def test_budget_is_never_exceeded_and_keeps_the_most_useful_parts(loose, budget):
    """The context fits the budget; the skill's head and first steps go in before any fact."""
    loose.learn(MAP_A)
    loose.learn(DEPLOY)
    full = loose.recall(COIN, KITCHEN_A)
    recall = loose.recall(COIN, KITCHEN_A, budget_tokens=budget)
    assert recall.context_tokens == estimate_tokens(recall.context) <= budget
    assert recall.to_dict()["context_tokens"] == recall.context_tokens
    if budget >= full.context_tokens:
        assert recall.context == full.context
    if recall.context:
        assert "Source:" in recall.context
    if "- In the kitchen" in recall.context:  # facts come after the whole procedure
        assert "take coin" in recall.context


def test_budget_cuts_a_procedure_in_order_and_says_so(loose):
    """A cut skill keeps its first steps and says how many it left out."""
    loose.learn(Episode(task="long job", env="", success=True,
                        steps=tuple(Step(f"step number {i}", f"ok {i}") for i in range(30))))
    full = loose.recall("long job", "")
    recall = loose.recall("long job", "", budget_tokens=full.context_tokens // 2)
    assert "1. step number 0" in recall.context and "30. step number 29" not in recall.context
    assert "more steps not shown)" in recall.context


def test_every_part_says_where_it_came_from(mem):
    """Skill and knowledge each carry their source line (episodes, successes, failures)."""
    mem.learn(make_episode())
    mem.learn(make_episode())
    mem.learn(make_episode(success=False, actions=("look",)))
    kitchen = "a kitchen with a fridge, a microwave and a table"
    context = mem.recall("heat the apple", kitchen).context
    # The skill root was written by one episode and matched by one more; the failure became a
    # root of its own (a lesson under a skill costs more than a root).
    assert context.count("Source: 2 past episodes (2 succeeded, 0 failed).") == 1
    assert context.count("Source:") == 2


def test_negative_budget_is_a_clear_error(mem):
    with pytest.raises(ConfigError, match="budget_tokens"):
        mem.recall("x", budget_tokens=-1)


def test_trace_lesson_type_round_trips(mem):
    """Lessons with worked steps survive storage exactly."""
    node = mem.learn(DEPLOY).task.node
    stored = mem.experience(node)
    assert isinstance(stored, Lesson) and stored.worked == ("build docker image",)


def test_a_task_learned_in_this_scene_wins_a_tie(mem):
    """Variations sharing one task text tie; the skill learned where the agent starts wins."""
    hallway = ("This room is called the hallway. You also see:\n"
               "\tA door to the kitchen (that is open)")
    studio = ("This room is called the art studio. You also see:\n"
              "\tA door to the hallway (that is open)")
    task = "Your task is to find the animal with the longest life span."
    from_hall = Episode(task=task, env=hallway, success=True, steps=(
        Step("go to outside", "You move to the outside."), Step("focus on tortoise", "ok")))
    from_studio = Episode(task=task, env=studio, success=True, steps=(
        Step("go to hallway", "You move to the hallway."),
        Step("go to outside", "You move to the outside."), Step("focus on tortoise", "ok")))
    mem.learn(from_hall)
    mem.learn(from_studio)
    for episode in (from_hall, from_studio):
        skill = mem.recall(task, episode.env).task.experience
        assert skill.steps == tuple(s.action for s in episode.steps)
