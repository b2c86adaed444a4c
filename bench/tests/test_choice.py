"""The choice agent: bounded candidates, memory-named actions, loop rules, the real scorer."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import pytest

from deltamem.errors import ConfigError
from deltamem_bench.choice import (
    ChoiceAgent,
    ChoiceConfig,
    Plan,
    adapt_step,
    candidate_set,
    guarded,
    mentioned_actions,
    plan_phrases,
)
from deltamem_bench.scorer import LlamaScorer, ScorerStats
from test_agent import SPEC, CoinRoomDouble


@dataclass
class ScorerDouble:
    """Test double of a Scorer: ``rank(prompt, candidate)`` decides; calls are recorded."""

    rank: Callable[[str, str], float]
    proposal: str = ""
    name: str = "scorer-double"
    stats: ScorerStats = field(default_factory=ScorerStats)
    prompts: list[str] = field(default_factory=list)
    offered: list[list[str]] = field(default_factory=list)

    def score(self, prompt: str, candidates: Sequence[str]) -> list[float]:
        self.prompts.append(prompt)
        self.offered.append([c.strip() for c in candidates])
        self.stats.calls += 1
        return [self.rank(prompt, c.strip()) for c in candidates]

    def propose(self, prompt: str, *, max_tokens: int = 12) -> str:
        return self.proposal

    def count(self, text: str) -> int:
        return len(text.split())


def coin_rank(prompt: str, candidate: str) -> float:
    """Prefers taking a coin that the latest observation shows, else moving east."""
    latest = prompt.rsplit("<|im_start|>user", 1)[-1]
    if "coin" in latest and "There is a coin" in latest:
        return 1.0 if candidate == "take coin" else 0.0
    return 1.0 if candidate == "move east" else 0.0


def test_choice_agent_plays_only_admissible_actions_and_wins() -> None:
    """Every played action was offered and admissible; the coin room is won in two steps."""
    env = CoinRoomDouble()
    scorer = ScorerDouble(coin_rank)
    result = ChoiceAgent(scorer, env).run(env, SPEC)
    assert result.episode.success and [s.action for s in result.episode.steps] == [
        "move east", "take coin"]
    assert all(s.action in offered for s, offered in zip(result.episode.steps, scorer.offered,
                                                         strict=True))
    assert result.usage.llm_calls == 2 and result.invalid == 0


def test_prompt_is_append_only_between_steps() -> None:
    """Each step's prompt extends the previous one up to its candidate list, the only part
    that changes (the KV cache keeps every earlier step); only the latest turn lists them."""
    env = CoinRoomDouble()
    scorer = ScorerDouble(coin_rank)
    ChoiceAgent(scorer, env).run(env, SPEC, "MEMORY: move east, then take coin")
    first, second = scorer.prompts
    assert second.startswith(first.rsplit("\nValid actions:", 1)[0])
    assert first.count("Valid actions:") == second.count("Valid actions:") == 1
    assert "MEMORY: move east" in first and first.index("MEMORY") < first.index("Task:")


def test_repeated_no_op_is_demoted() -> None:
    """A model that loves 'look around' still moves on once it changed nothing."""
    env = CoinRoomDouble()

    def lover(prompt: str, candidate: str) -> float:
        return {"look around": 1.0, "move east": 0.5, "take coin": 0.8}.get(candidate, 0.0)

    result = ChoiceAgent(ScorerDouble(lover), env,
                         ChoiceConfig(max_steps=6)).run(env, SPEC)
    actions = [s.action for s in result.episode.steps]
    assert actions[:2] == ["look around", "move east"]
    assert actions.count("look around") <= 3 and result.episode.success


def test_candidate_set_is_bounded_and_keeps_proposal_and_memory() -> None:
    """Large action sets are cut; the proposal's nearest and memory-named actions stay in."""
    admissible = [f"pick up object {i}" for i in range(500)] + [
        "teleport to kitchen", "open fridge", "focus on water", "look around"]
    memory = "1. teleport to kitchen\n2. open fridge\n3. pick up object 417"
    chosen = candidate_set(admissible, proposal="focus on the water", memory=memory,
                           context="Your task is to boil water.", bound=12)
    assert len(chosen) == 12 and len(set(chosen)) == 12
    assert chosen[0] == "focus on water"
    for step in ("teleport to kitchen", "open fridge", "pick up object 417"):
        assert step in chosen
    assert candidate_set(["a", "b", "a"], bound=5) == ["a", "b"]


def test_mentioned_actions_match_whole_phrases_in_order() -> None:
    """'open door' is not found inside 'reopen doorway'; order follows the memory text."""
    found = mentioned_actions("First move west. Then take coin. reopen doorway",
                              ["take coin", "move west", "open door", "look"])
    assert found == ["move west", "take coin"]


@pytest.mark.llm
def test_real_scorer_reuses_the_cache_exactly() -> None:
    """Scores with a warm KV cache equal a cold model's; only new tokens are evaluated."""
    prompt = ("<|im_start|>user\nRepeat the fruit name: apple<|im_end|>\n"
              "<|im_start|>assistant\nAnswer:")
    candidates = [" apple", " zebra crossing", " banana"]
    warm = LlamaScorer(n_ctx=512)
    first = warm.score(prompt, candidates)
    evaluated = warm.stats.prompt_tokens
    again = warm.score(prompt + " apple<|im_end|>\n<|im_start|>user\nAgain<|im_end|>\n"
                       "<|im_start|>assistant\nAnswer:", candidates)
    assert warm.stats.cached_tokens >= evaluated  # the whole first prompt was reused
    cold = LlamaScorer(n_ctx=512)
    cold_again = cold.score(prompt + " apple<|im_end|>\n<|im_start|>user\nAgain<|im_end|>\n"
                            "<|im_start|>assistant\nAnswer:", candidates)
    assert again == pytest.approx(cold_again, abs=1e-3)
    assert max(range(3), key=first.__getitem__) == 0  # the copy wins
    proposal = warm.propose(prompt)  # greedy: one line, the same every time
    assert proposal and "\n" not in proposal and proposal == warm.propose(prompt)
    warm.close()
    cold.close()


def test_plan_follows_the_memory_and_skips_warnings() -> None:
    """The plan's next step gets the bonus in order; actions on warning lines are not planned."""
    from deltamem_bench.choice import Plan, plan_phrases

    memory = ("Skill:\n1. move east\n2. move east\n3. take coin\n\n"
              "WARNING - a past attempt FAILED.\n- Tried and failed: move west\n")
    phrases = plan_phrases(memory)
    assert ("move", "west") not in phrases
    assert phrases == [("move", "east"), ("move", "east"), ("take", "coin")]
    plan = Plan(phrases)
    valid = ["move west", "take coin", "move east"]
    assert plan.next_step(valid) == "move east"
    plan.played("move east", valid)
    assert plan.next_step(valid) == "move east"  # an exact step may repeat an action
    plan.played("move east", valid)
    plan.played("look around", valid + ["look around"])  # off the plan: nothing changes
    assert plan.next_step(valid) == "take coin"
    plan.played("take coin", valid)
    assert plan.next_step(valid) is None
    # A model that prefers 'look around' follows the plan when the bonus outweighs the gap.
    env = CoinRoomDouble()

    def indifferent(prompt: str, candidate: str) -> float:
        return 0.5 if candidate == "look around" else 0.0

    followed = ChoiceAgent(ScorerDouble(indifferent), env, ChoiceConfig(plan_bonus=1.0))
    assert [s.action for s in followed.run(env, SPEC, memory).episode.steps] == [
        "move east", "take coin"]
    alone = ChoiceAgent(ScorerDouble(indifferent), env, ChoiceConfig(plan_bonus=0.0))
    assert alone.run(env, SPEC, memory).episode.steps[0].action == "look around"


def test_a_step_the_agent_passes_over_goes_behind_the_others() -> None:
    """A plan step the model refuses whatever the bonus is not offered again before the open
    steps passed over fewer times; without the rule it hid every later step to the end."""
    valid = ["look around", "move east", "take coin"]
    plan = Plan([("look", "around"), ("move", "east"), ("take", "coin")])
    assert plan.next_step(valid) == "look around"
    plan.played("inventory", valid)  # passed over: the next open step comes first
    assert plan.passed == {0: 1} and plan.next_step(valid) == "move east"
    plan.played("inventory", valid)
    assert plan.next_step(valid) == "take coin"
    plan.played("inventory", valid)  # every step passed over once: the earliest again
    assert plan.next_step(valid) == "look around"
    plan.played("take coin", valid)  # playing a step that was not asked for does it
    assert 2 in plan.done and plan.passed == {0: 2, 1: 1, 2: 1}
    stuck = Plan([("look", "around"), ("move", "east")], defer_passed=False)
    stuck.played("inventory", valid)
    assert stuck.passed == {} and stuck.next_step(valid) == "look around"

    def shuns_look(prompt: str, candidate: str) -> float:
        return {"look around": -5.0, "inventory": 0.5, "move west": 0.6}.get(candidate, 0.0)

    memory = "1. look around\n2. move east\n3. take coin"
    env = CoinRoomDouble()
    deferred = ChoiceAgent(ScorerDouble(shuns_look), env).run(env, SPEC, memory).episode
    assert [s.action for s in deferred.steps] == ["inventory", "move east", "take coin"]
    assert deferred.success
    old = ChoiceAgent(ScorerDouble(shuns_look), env, ChoiceConfig(defer_passed=False))
    assert not old.run(env, SPEC, memory).episode.success  # "look around" blocked the plan


def test_recalled_steps_are_carried_out_by_the_scene_s_own_objects() -> None:
    """A step naming a past episode's object maps onto the valid action of the same verb that
    shares the most content words; below ``cutoff`` (1.0: exact only) it is not planned."""
    from deltamem_bench.choice import Plan, adapt_step, plan_phrases

    valid = ["take salt", "take red hot pepper", "put salt in folding chair",
             "put red hot pepper in shelf", "put red hot pepper in folding chair", "look around"]
    assert adapt_step(("put", "black", "pepper", "in", "shelf"), valid) == (
        0.4, "put red hot pepper in shelf")
    assert adapt_step(("take", "black", "pepper"), valid) == (0.25, "take red hot pepper")
    assert adapt_step(("take", "yellow", "onion"), valid) is None  # no shared content word
    assert adapt_step(("first", "look", "around"), valid) is None  # not an instruction
    assert adapt_step(("first", "look", "around"), valid, verb_first=False) == (1.0, "look around")
    phrases = plan_phrases("1. take yellow onion\n2. take black pepper\n"
                           "3. put black pepper in shelf\n4. put salt in folding chair")
    assert Plan(phrases).next_step(valid) == "put salt in folding chair"  # the exact one
    plan = Plan(phrases[:3], cutoff=0.25)
    assert Plan(phrases[:3]).next_step(valid) is None
    # The best-carried-out phrase comes first: the put (0.4) before the take (0.25).
    assert plan.next_step(valid) == "put red hot pepper in shelf"
    plan.played("put red hot pepper in shelf", valid)
    assert plan.next_step(valid) == "take red hot pepper"
    plan.played("take red hot pepper", valid)
    assert plan.next_step(valid) is None


def test_an_adapted_step_shares_a_word_beyond_the_verb_and_the_number() -> None:
    """ "go to countertop 1" is not carried out by "go to shelf 1" (the number is all they
    share: the dev-2 replay's 35 of 44 adapted navigation steps); it still is by "go to
    countertop 2", and an abstract step's variable still stands for the receptacle."""
    from deltamem_bench.choice import adapt_step

    valid = ["go to shelf 1", "go to drawer 2"]
    assert adapt_step(("go", "to", "countertop", "1"), valid) is None
    assert adapt_step(("go", "to", "countertop", "1"), valid, word_match=False) == (
        1 / 3, "go to shelf 1")  # the agent of the runs before 2026-12-06
    assert adapt_step(("go", "to", "countertop", "1"), ["go to countertop 2"]) == (
        1 / 3, "go to countertop 2")
    assert adapt_step(("go", "to", "xslotx"), valid) is not None


def test_an_adapted_step_keeps_the_objects_the_task_names() -> None:
    """A past object may give way to the scene's, a task's object may not: with the task's
    words as ``keep``, "move keychain 1 to sidetable 1" is not carried out by "move box 1 to
    sidetable 1", while "take keychain 1 from drawer 2" still adapts to another receptacle."""
    valid = ["go to drawer 1", "take box 1 from sidetable 1", "move box 1 to sidetable 1",
             "take keychain 1 from ottoman 1"]
    task = frozenset({"your", "task", "put", "keychain", "sidetable"})
    move = ("move", "keychain", "1", "to", "sidetable", "1")
    assert adapt_step(move, valid) == (0.5, "move box 1 to sidetable 1")
    assert adapt_step(move, valid, keep=task) is None
    take = ("take", "keychain", "1", "from", "drawer", "2")
    assert adapt_step(take, valid, keep=task) == (0.4, "take keychain 1 from ottoman 1")
    assert adapt_step(("go", "to", "drawer", "1"), valid, keep=task) == (1.0, "go to drawer 1")
    assert Plan([move], cutoff=0.25).next_step(valid) == "move box 1 to sidetable 1"
    assert Plan([move], cutoff=0.25, keep=task).next_step(valid) is None


@dataclass
class CoinAndBoxRoomDouble(CoinRoomDouble):
    """The coin room whose pantry also holds a box ("take box" is listed before "take coin")."""

    def admissible(self) -> list[str] | None:
        moves = ["move east"] if self.room == "kitchen" else ["move west", "take box", "take coin"]
        return ["look around", "inventory", *moves]


def test_agent_plan_does_not_swap_the_task_s_object() -> None:
    """The recalled "take gold coin from box" ties between "take box" and "take coin"; the task
    names the coin, so the agent's plan takes the coin (and the old rule took the box)."""
    def indifferent(prompt: str, candidate: str) -> float:
        return 0.5 if candidate == "look around" else 0.0

    memory = "1. move east\n2. take gold coin from box"
    env = CoinAndBoxRoomDouble()
    kept = ChoiceAgent(ScorerDouble(indifferent), env).run(env, SPEC, memory)
    assert [s.action for s in kept.episode.steps] == ["move east", "take coin"]
    env = CoinAndBoxRoomDouble()
    swapped = ChoiceAgent(ScorerDouble(indifferent), env,
                          ChoiceConfig(keep_task_objects=False, max_steps=2)).run(env, SPEC,
                                                                                 memory)
    assert [s.action for s in swapped.episode.steps] == ["move east", "take box"]


def test_long_episodes_drop_old_steps_in_one_go() -> None:
    """Past the budget, old steps are dropped until the prompt takes 60% of it, and the drop
    point then stays put for the next steps (the cache is not rebuilt every step)."""
    env = CoinRoomDouble(max_steps=40)

    def looker(prompt: str, candidate: str) -> float:
        return 1.0 if candidate in ("look around", "inventory") else 0.0

    scorer = ScorerDouble(looker)
    agent = ChoiceAgent(scorer, env, ChoiceConfig(context_tokens=300, repeat_penalty=0.0,
                                                  revisit_penalty=0.0))
    result = agent.run(env, SPEC)
    assert len(result.episode.steps) == 40
    sizes = [scorer.count(p) for p in scorer.prompts]
    assert max(sizes) <= 300
    rebuilds = sum(1 for a, b in zip(scorer.prompts, scorer.prompts[1:], strict=False)
                   if not b.startswith(a.rsplit("\nValid actions:", 1)[0]))
    assert 1 <= rebuilds <= 10  # far fewer than the 39 steps
    assert "(Earlier actions: " in scorer.prompts[-1] and "Task:" in scorer.prompts[-1]


def test_agent_carries_out_a_recalled_step_that_names_another_object() -> None:
    """'take gold coin' from a past episode is carried out as this room's 'take coin' when
    ``plan_match`` allows it; with exact mentions only, the model's preference wins."""
    env = CoinRoomDouble()

    def indifferent(prompt: str, candidate: str) -> float:
        return 0.5 if candidate == "look around" else 0.0

    memory = "1. move east\n2. take gold coin"
    adapted = ChoiceAgent(ScorerDouble(indifferent), env,
                          ChoiceConfig(plan_match=0.5)).run(env, SPEC, memory)
    assert [s.action for s in adapted.episode.steps] == ["move east", "take coin"]
    assert adapted.episode.success
    exact = ChoiceAgent(ScorerDouble(indifferent), env,
                        ChoiceConfig(plan_match=1.0, max_steps=3)).run(env, SPEC, memory)
    assert [s.action for s in exact.episode.steps][:2] == ["move east", "look around"]
    assert not exact.episode.success


SW_TASK = ("Your task is to determine if sodium chloride is electrically conductive. The sodium "
           "chloride is located around the workshop. First, focus on the sodium chloride. If it "
           "is electrically conductive, place it in the red box.")


def test_irreversible_actions_need_the_task_s_focus_sentence_or_the_plan() -> None:
    """Bad case (ScienceWorld): "focus on door to hallway" as the first action ended the
    episode. Only the object the focus sentence names stays ("red box" is a destination, named
    in another sentence); the plan's step stays too; other actions are untouched."""
    admissible = ["focus on door to hallway", "focus on sodium chloride", "focus on red box",
                  "focus on anode in blue light bulb", "look around", "move red box to hallway"]
    assert guarded(admissible, ("focus on",), SW_TASK) == [
        "focus on sodium chloride", "look around", "move red box to hallway"]
    assert "focus on red box" in guarded(admissible, ("focus on",), SW_TASK, "focus on red box")
    assert guarded(admissible, (), SW_TASK) == admissible
    assert guarded(["focus on egg"], ("focus on",), "Find a living thing.") == []


def test_agent_plays_an_irreversible_action_only_when_named() -> None:
    """The old guard (task-or-plan): with "move" irreversible and unnamed by the task, the agent
    that wants to move east stays put; a recalled plan that names the move lets it win."""
    env = CoinRoomDouble(irreversible=("move",))
    old = ChoiceConfig(focus_guard="task-or-plan")
    unnamed = ChoiceAgent(ScorerDouble(coin_rank), env,
                          replace(old, max_steps=3)).run(env, SPEC)
    assert "move east" not in [s.action for s in unnamed.episode.steps]
    planned = ChoiceAgent(ScorerDouble(coin_rank), env, old).run(env, SPEC, "1. move east")
    assert [s.action for s in planned.episode.steps] == ["move east", "take coin"]


def test_the_focus_guard_does_not_depend_on_the_memory() -> None:
    """Bad case (ScienceWorld): the guard opened "focus on X" only where the task or the memory
    named X, so the no-memory control could never focus in six of ten tasks. ``open`` and
    ``task`` give every arm the same actions whatever its memory holds."""
    env = CoinRoomDouble(irreversible=("move",))
    for guard, moves in (("open", True), ("task", False)):
        config = ChoiceConfig(focus_guard=guard, max_steps=3)
        plays = {memory: [s.action for s in ChoiceAgent(ScorerDouble(coin_rank), env, config)
                          .run(env, SPEC, memory).episode.steps]
                 for memory in ("", "1. move east")}
        assert ("move east" in plays[""]) is moves
        assert ("move east" in plays["1. move east"]) is moves
    with pytest.raises(ConfigError, match="focus_guard"):
        ChoiceConfig(focus_guard="plan")


def test_the_memory_block_s_prose_is_no_plan_step() -> None:
    """Bad case (ScienceWorld): the block's "When: Task Description: Your task is to ..." made
    the one-word action "task" the plan's first step; the model never played it, and the plan
    stayed stuck there for the whole episode. Only phrases that start with a verb are steps,
    and a one-word action carries out only the phrase that is that word."""
    block = ("Recalled from past episodes of similar tasks. Follow the procedure where it fits "
             "the current task.\nWhen: Task Description: Your task is to find a non-living "
             "thing.\n1. go to hallway\n2. look around\n3. inventory\n")
    admissible = ["task", "inventory", "look around", "go to hallway", "go to kitchen"]
    plan = Plan(plan_phrases(block), 0.25)
    assert plan.next_step(admissible) == "go to hallway"
    assert adapt_step(("task", "description"), admissible) is None
    assert adapt_step(("inventory",), admissible) == (1.0, "inventory")
    assert adapt_step(("then", "go", "to", "hallway"), admissible) is None
    legacy = Plan(plan_phrases(block), 0.25, verb_first=False)
    assert legacy.next_step(admissible) == "task"


def test_an_abstract_workflow_is_instantiated_with_the_scene_s_objects() -> None:
    """Bad case (AWM): a workflow written with variables ("take <object> from <receptacle>")
    almost never became a plan step, since "object" and "receptacle" name nothing in the scene.
    Each variable now stands for one word of the action, the task's objects first."""
    workflow = ("1. go to <receptacle>\n2. take <object> from <receptacle>\n"
                "3. put <object> in fridge")
    admissible = ["take knife 1 from countertop 1", "take apple 1 from countertop 1",
                  "go to fridge 1", "look"]
    keep = frozenset({"put", "apple", "fridge"})
    plan = Plan(plan_phrases(workflow), cutoff=0.25, keep=keep)
    assert plan.next_step(admissible) == "take apple 1 from countertop 1"
    score = adapt_step(plan_phrases(workflow)[1], admissible, keep=keep)
    assert score is not None and 0.25 <= score[0] < 1.0
    # Without variables nothing changes: a concrete step is adapted as before.
    assert adapt_step(("take", "pan", "from", "stove"), admissible) is None


def test_the_plan_reads_only_the_block_the_model_is_shown() -> None:
    """Bad case: the plan and the candidates read the whole memory block while the prompt
    showed it cut to the budget, so an arm over the budget planned from text the model never
    saw. A step past the cut is no plan step."""
    def indifferent(prompt: str, candidate: str) -> float:
        return 0.0

    env = CoinRoomDouble()
    memory = "Notes: " + "nothing useful here. " * 10 + "\n1. move east\n2. take coin"
    within = ChoiceAgent(ScorerDouble(indifferent), env,
                         ChoiceConfig(max_steps=2)).run(env, SPEC, memory)
    assert [s.action for s in within.episode.steps] == ["move east", "take coin"]
    cut = ChoiceAgent(ScorerDouble(indifferent), env,
                      ChoiceConfig(max_steps=2, memory_chars=100)).run(env, SPEC, memory)
    assert "move east" not in [s.action for s in cut.episode.steps][:1]


# Recorded: the no-memory arm's first 20 actions in dev-2 ALFWorld episode 38 ("put a hot plate
# in sinkbasin", results/dev-2/alfworld-warm.tar.gz, dev split).
DEV2_EPISODE_38 = [
    "go to cabinet 1", "examine cabinet 1", "open cabinet 1", "take plate 1 from cabinet 1",
    "move plate 1 to cabinet 1", "take plate 1 from cabinet 1", "go to cabinet 2",
    "examine cabinet 2", "examine cabinet 2", "go to cabinet 1", "examine cabinet 1",
    "examine cabinet 1", "go to cabinet 2", "go to cabinet 1", "go to cabinet 2",
    "open cabinet 2", "examine cabinet 2", "examine cabinet 2", "go to cabinet 1",
    "move plate 1 to cabinet 1"]


def test_put_back_rule_on_a_recorded_dev_episode() -> None:
    """Both put-backs of the recorded episode (step 5 at once, step 20 after walking away and
    back) are caught; putting the plate elsewhere, or back after heating it, is not; an agent
    with ``no_put_back`` never offers the put-back, one without it does."""
    from deltamem_bench.choice import puts_back

    assert puts_back(DEV2_EPISODE_38[4], DEV2_EPISODE_38[:4])
    assert puts_back(DEV2_EPISODE_38[19], DEV2_EPISODE_38[:19])
    assert not puts_back("move plate 1 to sinkbasin 1", DEV2_EPISODE_38[:19])
    assert not puts_back("move plate 1 to cabinet 1",
                         [*DEV2_EPISODE_38[:4], "go to microwave 1", "heat plate 1 with "
                          "microwave 1", "go to cabinet 1"])
    assert not puts_back("move plate 1 to cabinet 1", ["go to cabinet 1"])  # nothing taken
    assert not puts_back("move plate 10 to cabinet 1", DEV2_EPISODE_38[:4])
    env = CoinRoomDouble()
    agent = ChoiceAgent(ScorerDouble(coin_rank), env, ChoiceConfig(no_put_back=True))
    options = ["move plate 1 to cabinet 1", "go to sinkbasin 1"]
    assert agent._allowed(options, "t", None, DEV2_EPISODE_38[:4]) == ["go to sinkbasin 1"]
    assert ChoiceAgent(ScorerDouble(coin_rank), env)._allowed(
        options, "t", None, DEV2_EPISODE_38[:4]) == options


def test_examine_and_unvisited_rules_on_a_recorded_dev_episode() -> None:
    """After step 8 of the recorded episode, "examine cabinet 2" again loses
    ``examine_penalty``, a first "examine sinkbasin 1" loses nothing; "go to" a place not gone
    to gains ``unvisited_bonus``, "go to cabinet 1" again does not. Off (the default): 0."""
    from deltamem_bench.choice import rule_adjustment

    played = DEV2_EPISODE_38[:8]
    config = ChoiceConfig(examine_penalty=1.0, unvisited_bonus=0.5)
    assert rule_adjustment("examine cabinet 2", played, config) == -1.0
    assert rule_adjustment("examine sinkbasin 1", played, config) == 0.0
    assert rule_adjustment("go to sinkbasin 1", played, config) == 0.5
    assert rule_adjustment("go to cabinet 1", played, config) == 0.0
    assert all(rule_adjustment(a, played, ChoiceConfig()) == 0.0
               for a in ("examine cabinet 2", "go to sinkbasin 1"))


def test_the_examine_penalty_changes_the_choice_in_the_agent() -> None:
    """Through ``choose``: a scorer that prefers "examine coin" by 0.4 picks it first; once it
    was played in the episode (in another state, where the repeat penalty does not reach) the
    penalty of 1.0 makes "move east" win."""
    env = CoinRoomDouble()
    rank = {"examine coin": 1.0, "move east": 0.6}
    agent = ChoiceAgent(ScorerDouble(lambda p, c: rank.get(c, 0.0)), env,
                        ChoiceConfig(examine_penalty=1.0))
    options = ["examine coin", "move east"]
    first, *_ = agent.choose([], "Observation: x", options, "", "", {}, "s1")
    again, *_ = agent.choose([], "Observation: y", options, "", "", {}, "s2",
                             played=["examine coin"])
    assert (first, again) == ("examine coin", "move east")


def test_look_before_focus_on_the_recorded_scienceworld_gold_path() -> None:
    """Recorded gold trajectories (tests/fixtures/scienceworld_gold.jsonl): at their start no
    ``focus on`` may be played with the rule on; once a gold path has opened a door and gone
    somewhere (or looked), its own focus action is allowed again; off, nothing changes."""
    import json
    from pathlib import Path

    from deltamem_bench.choice import has_looked_or_moved

    fixture = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / \
        "scienceworld_gold.jsonl"
    episodes = [json.loads(line) for line in fixture.read_text().splitlines() if line.strip()]
    env = CoinRoomDouble(irreversible=("focus on",))
    on = ChoiceAgent(ScorerDouble(coin_rank), env, ChoiceConfig(look_before_focus=True))
    off = ChoiceAgent(ScorerDouble(coin_rank), env)
    checked = 0
    for episode in episodes:
        actions = [s["action"] for s in episode["steps"]]
        focus = next((i for i, a in enumerate(actions) if a.startswith("focus on ")), None)
        if focus is None:
            continue
        options = [actions[focus], "look around"]
        assert on._allowed(options, episode["task"], None, []) == ["look around"]
        assert off._allowed(options, episode["task"], None, []) == options
        before = actions[:focus]
        assert on._allowed(options, episode["task"], None, before) == (
            options if has_looked_or_moved(before) else ["look around"])
        checked += 1
    assert checked >= 10
    # The rule also holds back the memory plan's step: the guard cannot depend on the memory.
    assert on._allowed(["focus on egg"], "t", "focus on egg", []) == [env.fallback_action]


def test_agent_rules_are_off_until_chosen_and_named_options() -> None:
    """Every agent rule of issue 47 is off in the default config, and ``plan_bench``'s
    ``agent_rules`` turns on exactly the named ones (an unknown name is refused)."""
    from deltamem_bench.choice import AGENT_RULES
    from deltamem_bench.cli import plan_bench

    default = ChoiceConfig()
    assert not default.no_put_back and not default.look_before_focus
    assert default.examine_penalty == 0.0 and default.unvisited_bonus == 0.0
    plan = plan_bench(env="twx-coin", memory="none", llm="openai", model="m",
                      agent_rules="no_put_back,look_before_focus")
    assert plan.options.choice.no_put_back and plan.options.choice.look_before_focus
    assert plan.options.choice.examine_penalty == 0.0
    assert set(AGENT_RULES) == {"no_put_back", "examine_penalty", "unvisited_bonus",
                                "look_before_focus"}
    with pytest.raises(ConfigError, match="agent rule"):
        plan_bench(env="twx-coin", memory="none", llm="openai", model="m",
                   agent_rules="bonus_for_memory")
