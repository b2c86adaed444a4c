"""Real text environments: ScienceWorld, generated ALFWorld games, TextWorldExpress, make_env."""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path

import pytest

from deltamem.errors import ConfigError
from deltamem_bench.envs import ENV_NAMES, Environment, EpisodeSpec, make_env
from deltamem_bench.envs.alfworld import split_task
from deltamem_bench.envs.base import EnvError, Transition
from support import FIXTURES  # noqa: E402

FIXTURE = FIXTURES / "scienceworld_gold.jsonl"
ALFWORLD_TYPES = ("pick_and_place", "pick_clean_then_place", "pick_heat_then_place",
                  "pick_cool_then_place", "look_at_obj", "pick_two_obj")


def play(env: Environment, actions: list[str]) -> Transition:
    """Play ``actions`` until the episode ends; return the last transition."""
    last = None
    for action in actions:
        last = env.step(action)
        if last.done:
            break
    assert last is not None
    return last


# -- make_env -------------------------------------------------------------------------------

def test_make_env_rejects_unknown_names() -> None:
    """Unknown names, the official ALFWorld and unknown TWX games raise ConfigError."""
    for name in ("nosuchenv", "alfworld", "twx-nosuchgame", "twx-"):
        with pytest.raises(ConfigError, match="unknown environment"):
            make_env(name)


def test_env_names_list_every_family() -> None:
    """The registry names ScienceWorld, generated ALFWorld and the TWX games."""
    assert {"scienceworld", "alfworld-generated", "twx-cookingworld", "twx-coin"} <= set(
        ENV_NAMES)


def test_split_task_follows_the_spec() -> None:
    """ALFWorld text is split on "Your task is to:"; without it env is empty (spec §2.1)."""
    scene, task = split_task("You are in a room.\n\nYour task is to: put a mug in sink.")
    assert (scene, task) == ("You are in a room.", "Your task is to: put a mug in sink.")
    assert split_task("no marker here") == ("", "no marker here")


# -- the recorded fixture -------------------------------------------------------------------

def test_scienceworld_fixture_is_well_formed() -> None:
    """The gold fixture has winning episodes, >= 3 variations per task, train and test."""
    episodes = [json.loads(line) for line in FIXTURE.read_text().splitlines() if line]
    by_task: dict[str, set[tuple[str, int]]] = defaultdict(set)
    for ep in episodes:
        assert ep["success"] is True and ep["score"] == 1.0
        assert ep["task"].startswith("Task Description:") and ep["env"]
        assert ep["steps"] and all(s["action"] and "observation" in s for s in ep["steps"])
        by_task[ep["meta"]["task_name"]].add((ep["meta"]["split"], ep["meta"]["variation"]))
    assert len(by_task) >= 4
    for variations in by_task.values():
        assert len(variations) >= 3
        assert {split for split, _ in variations} == {"train", "test"}


# -- ScienceWorld ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def sciworld():
    """One ScienceWorld adapter (and JVM) for the module."""
    env = make_env("scienceworld", gold_paths=True, max_steps=30)
    yield env
    env.close()


@pytest.mark.envs
def test_scienceworld_gold_path_reaches_score_one(sciworld) -> None:
    """find-living-thing's gold path ends the episode with score 1 and a win."""
    variation = sciworld.variations("find-living-thing", "train")[0]
    sciworld.load(EpisodeSpec("find-living-thing", variation, "train"))
    start = sciworld.reset()
    assert start.task.startswith("Task Description:")
    assert "living thing" in start.task
    assert start.scene == start.observation and start.scene.startswith("This ")
    last = play(sciworld, sciworld.gold_actions())
    assert (last.won, last.done, last.score) == (True, True, 1.0)


@pytest.mark.envs
def test_scienceworld_failure_and_step_budget(sciworld) -> None:
    """A wrong focus loses with score 0; the step budget ends an episode; then step raises."""
    sciworld.load(EpisodeSpec("find-living-thing", 1, "train"))
    sciworld.reset()
    lost = sciworld.step("focus on air")
    assert (lost.done, lost.won, lost.score) == (True, False, 0.0)
    with pytest.raises(EnvError):
        sciworld.step("look around")
    short = make_env("scienceworld", max_steps=2)
    try:
        short.load(EpisodeSpec("find-living-thing", 1, "train"))
        short.reset()
        first, second = short.step("look around"), short.step("look around")
        assert not first.done and second.done and not second.won
    finally:
        short.close()


@pytest.mark.envs
def test_scienceworld_adapters_share_one_jvm_safely(sciworld) -> None:
    """An adapter whose episode another adapter replaced refuses to step instead of misplaying."""
    from deltamem_bench.envs import scienceworld as sw

    sciworld.load(EpisodeSpec("find-plant", 0, "train"))
    sciworld.reset()
    other = make_env("scienceworld")
    try:
        other.load(EpisodeSpec("find-plant", 1, "train"))
        jvm = sw._shared_server()
        other.reset()
        assert sw._shared_server() is jvm  # one JVM in the process, the one of the newest load
        with pytest.raises(EnvError, match="another"):
            sciworld.step("look around")
    finally:
        other.close()


@pytest.mark.envs
def test_the_scienceworld_engine_runs_with_constant_identity_hashes_and_leaves_the_env_as_it_was(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine's object order follows the JVM's identity hashes (the next test failed on the
    CI machine with a fresh JVM per episode), so its JVM is started with a constant one, and the
    caller's own JAVA_TOOL_OPTIONS are kept."""
    from deltamem_bench.envs import scienceworld

    monkeypatch.setenv("JAVA_TOOL_OPTIONS", "-Xss2m")
    env = make_env("scienceworld", max_steps=3)
    try:
        env.load(EpisodeSpec("chemistry-mix", 27, "test"))
        jvm = scienceworld._shared_server()._gateway.jvm
        arguments = [str(a) for a in
                     jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
                     .getInputArguments()]
        assert "-XX:hashCode=2" in arguments and "-Xss2m" in arguments
    finally:
        env.close()
    assert os.environ["JAVA_TOOL_OPTIONS"] == "-Xss2m"


@pytest.mark.envs
def test_scienceworld_episode_is_a_function_of_its_spec() -> None:
    """The same variation loaded again after other episodes shows the same world.

    In one long-lived JVM it did not: chemistry-mix 27 listed its cups in another order and
    named its valid actions differently after three other loads, so two memory arms played
    different worlds under the same spec.
    """
    env = make_env("scienceworld", max_steps=12)
    try:
        def world(spec: EpisodeSpec) -> tuple[str, list[str]]:
            env.load(spec)
            start = env.reset()
            return start.observation, env.admissible() or []

        spec = EpisodeSpec("chemistry-mix", 27, "test")
        first = world(spec)
        for other in (EpisodeSpec("find-living-thing", 297, "test"),
                      EpisodeSpec("lifespan-shortest-lived", 94, "test"),
                      EpisodeSpec("find-animal", 299, "test")):
            world(other)
        assert world(spec) == first
    finally:
        env.close()


@pytest.mark.envs
def test_scienceworld_splits_are_disjoint_and_checked(sciworld) -> None:
    """Train/dev/test variations do not overlap; loading a test variation as train fails."""
    splits = {s: set(sciworld.variations("find-plant", s)) for s in ("train", "dev", "test")}
    assert all(splits.values())
    assert not (splits["train"] & splits["test"]) and not (splits["train"] & splits["dev"])
    with pytest.raises(ConfigError):
        sciworld.load(EpisodeSpec("find-plant", min(splits["test"]), "train"))
    with pytest.raises(ConfigError):
        sciworld.variations("no-such-task", "train")


@pytest.mark.envs
def test_scienceworld_episode_stream(sciworld) -> None:
    """episode_specs yields the first variations of each requested task from one split."""
    from deltamem_bench.envs.scienceworld import episode_specs

    specs = list(episode_specs(sciworld, "test", tasks=["find-plant", "melt"], per_task=2))
    assert [s.task_name for s in specs] == ["find-plant", "find-plant", "melt", "melt"]
    assert all(s.split == "test" for s in specs)
    assert [s.variation for s in specs[:2]] == sciworld.variations("find-plant", "test")[:2]


# -- generated ALFWorld games ---------------------------------------------------------------

@pytest.fixture(scope="module")
def alfworld_env(tmp_path_factory):
    """A generated-ALFWorld adapter writing games into a temporary cache."""
    env = make_env("alfworld-generated", cache_dir=tmp_path_factory.mktemp("alfgen"))
    yield env
    env.close()


@pytest.mark.envs
@pytest.mark.parametrize("task_type", ALFWORLD_TYPES)
def test_alfworld_generated_plan_wins(alfworld_env, task_type: str) -> None:
    """For every task type the planner's plan wins the generated game."""
    alfworld_env.load(EpisodeSpec(task_type, 7, "seen"))
    start = alfworld_env.reset()
    assert start.task.startswith("Your task is to:")
    assert start.scene.startswith("You are in the middle of a room.")
    assert "Welcome to TextWorld" not in start.observation
    assert start.admissible and "look" in start.admissible
    gold = alfworld_env.gold_actions()
    assert gold and len(gold) <= alfworld_env.max_steps
    last = play(alfworld_env, gold)
    assert (last.won, last.done, last.score) == (True, True, 1.0)


@pytest.mark.envs
def test_alfworld_progress_is_the_share_of_the_plan_closed(alfworld_env) -> None:
    """Each step of the shortest plan closes 1/len(plan) of it; a detour closes nothing."""
    alfworld_env.load(EpisodeSpec("pick_clean_then_place", 7, "seen"))
    start = alfworld_env.reset()
    gold = alfworld_env.gold_actions()
    assert gold
    detour = next(a for a in start.admissible or () if a.startswith("go to") and a != gold[0])
    assert alfworld_env.step(detour).score == 0.0
    alfworld_env.load(EpisodeSpec("pick_clean_then_place", 7, "seen"))
    alfworld_env.reset()
    scores = [alfworld_env.step(action).score for action in gold]
    assert scores == pytest.approx([(i + 1) / len(gold) for i in range(len(gold))])


@pytest.mark.envs
def test_alfworld_same_seed_same_game(tmp_path: Path) -> None:
    """A seed always produces the same game file; another seed or split produces another."""
    from deltamem_bench.envs.alfworld_gen import floor_plans, generate_game

    first = generate_game(3, "pick_heat_then_place", "unseen", tmp_path / "a")
    again = generate_game(3, "pick_heat_then_place", "unseen", tmp_path / "b")
    other = generate_game(4, "pick_heat_then_place", "unseen", tmp_path / "a")
    seen = generate_game(3, "pick_heat_then_place", "seen", tmp_path / "a")
    assert first.read_bytes() == again.read_bytes()
    assert len({first.read_bytes(), other.read_bytes(), seen.read_bytes()}) == 3
    plans = json.loads(seen.read_text())["deltamem"]["floor_plan"]
    assert plans in floor_plans("seen", "pick_heat_then_place")
    for kind in ALFWORLD_TYPES:
        assert not set(floor_plans("seen", kind)) & set(floor_plans("unseen", kind))


@pytest.mark.envs
def test_alfworld_invalid_action_and_budget(tmp_path: Path) -> None:
    """Unknown commands answer "Nothing happens."; max_steps ends the episode unwon."""
    env = make_env("alfworld-generated", cache_dir=tmp_path, max_steps=2)
    try:
        env.load(EpisodeSpec("pick_and_place", 1, "unseen"))
        env.reset()
        first = env.step("fly to the moon")
        assert first.observation == "Nothing happens." and not first.done
        second = env.step("look")
        assert second.done and not second.won
        with pytest.raises(EnvError):
            env.step("look")
    finally:
        env.close()


def test_alfworld_rejects_unknown_task_type(tmp_path: Path) -> None:
    """Unknown task types and splits are configuration errors."""
    from deltamem_bench.envs.alfworld_gen import generate_game

    with pytest.raises(ConfigError):
        generate_game(0, "pick_and_juggle", "seen", tmp_path)
    with pytest.raises(ConfigError):
        generate_game(0, "pick_and_place", "valid", tmp_path)


def test_alfworld_episode_stream_cycles_task_types() -> None:
    """The ALFWorld stream cycles task types with consecutive seeds; bad names are refused."""
    from deltamem_bench.envs.alfworld import episode_specs

    specs = list(episode_specs("unseen", 4, task_types=["look_at_obj", "pick_two_obj"], start=10))
    kinds = ["look_at_obj", "pick_two_obj"] * 2
    assert specs == [EpisodeSpec(k, 10 + i, "unseen") for i, k in enumerate(kinds)]
    with pytest.raises(ConfigError):
        list(episode_specs("seen", 1, task_types=["pick_and_juggle"]))


# -- TextWorldExpress -----------------------------------------------------------------------

@pytest.mark.envs
@pytest.mark.parametrize("game", ["cookingworld", "coin"])
def test_twx_gold_path_wins(game: str) -> None:
    """The TWX gold path wins cookingworld and coin on a test-fold seed."""
    env = make_env(f"twx-{game}", max_steps=60)
    try:
        seed = env.seeds("test")[0]
        assert seed not in set(env.seeds("train"))
        env.load(EpisodeSpec(game, seed, "test"))
        start = env.reset()
        assert start.task and start.scene == start.observation and start.admissible
        last = play(env, env.gold_actions())
        assert (last.won, last.done, last.score) == (True, True, 1.0)
    finally:
        env.close()


def test_alfworld_dev_split_uses_train_floor_plans_and_its_own_games(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ALFWorld had no dev split: its rules could only be checked on test games. The dev split
    draws from the training floor plans (never a test room) under its own generator stream."""
    import types

    from deltamem_bench.envs import alfworld_gen
    from deltamem_bench.envs.alfworld import episode_specs

    layouts = tmp_path / "gen" / "layouts"
    layouts.mkdir(parents=True)
    for n in (1, 2, 7, 8):
        (layouts / f"FloorPlan{n}-openable.json").write_text("{}")
    rooms = {"kitchen": [1, 2, 7, 8]}
    constants = types.SimpleNamespace(
        TRAIN_SCENE_NUMBERS=[7, 8], TEST_SCENE_NUMBERS=[1, 2],
        SCENE_TYPE={"Kitchen": rooms["kitchen"]},
        GOALS_VALID={goal: ["Kitchen"] for goal in alfworld_gen.TASK_TYPES.values()})
    monkeypatch.setattr(alfworld_gen, "_alfworld", lambda: (constants, None, tmp_path))
    for kind in alfworld_gen.TASK_TYPES:
        assert alfworld_gen.floor_plans("dev", kind) == alfworld_gen.floor_plans("seen", kind)
        assert not set(alfworld_gen.floor_plans("dev", kind)) & set(
            alfworld_gen.floor_plans("unseen", kind))
    dev = list(episode_specs("dev", 6))
    assert {s.split for s in dev} == {"dev"}
    with pytest.raises(ConfigError, match="unknown ALFWorld split"):
        list(episode_specs("valid", 1))
