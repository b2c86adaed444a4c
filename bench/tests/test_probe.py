"""The memory-quality probe (``deltamem_bench.probe``) on a tiny sample of generated ALFWorld
games: its table has a row per memory and its columns, and a memory that learned the gold plan
of the very game it is probed on recalls the right kind, names the right appliance,
destination and order, and the executor wins with it; the scripted explorer cannot do the
transformation a heat task needs."""

from __future__ import annotations

from pathlib import Path

import pytest

from deltamem.embed.hashing import HashingEmbedder
from deltamem_bench.envs import EpisodeSpec, make_env
from deltamem_bench.probe import (
    COLUMNS,
    PROBE_KINDS,
    Manipulation,
    manipulations,
    role_map,
    run_probe,
    scene_hints,
    table,
    train_episodes,
)
from support import TEST_SETTINGS


def test_role_map_aligns_slots_of_one_template() -> None:
    assert role_map("Your task is to: heat some mug and put it in countertop.",
                    "Your task is to: heat some egg and put it in shelf.") == {
        "mug": "egg", "countertop": "shelf"}


def test_manipulations_read_types_and_search_hints() -> None:
    steps, found = manipulations(["go to cabinet 2", "open cabinet 2", "take mug 1 from cabinet 2",
                                  "heat mug 1 with microwave 1", "move mug 1 to countertop 1"])
    assert steps == [Manipulation("take", "mug"), Manipulation("heat", "mug", "microwave"),
                     Manipulation("put", "mug", "countertop")]
    assert found == [("mug", "cabinet")]


def test_scene_hints_follow_the_text_so_the_best_supported_place_comes_first() -> None:
    """A tendency lists its claims best supported first; the hints keep that order, not the
    game's listing order of its receptacles (which put countertop first here)."""
    facts = ["bowl: found in shelf (1 of 1 episodes)",
             "mug: found in cabinet (3 of 4 episodes); found in countertop (1 of 4 episodes)"]
    receptacles = ["countertop 1", "cabinet 2", "cabinet 1", "shelf 1"]
    assert scene_hints("mug", facts, receptacles) == ["cabinet", "countertop"]
    assert scene_hints("apple", facts, receptacles) == []


@pytest.mark.envs
@pytest.mark.slow
def test_probe_table_and_gold_memory_of_the_same_game(tmp_path: Path) -> None:
    env = make_env("alfworld-generated", cache_dir=tmp_path / "games", plan_progress=False)
    try:
        games = [EpisodeSpec(t, 3, "dev") for t in ("pick_and_place", "pick_heat_then_place",
                                                    "look_at_obj")]
        train = train_episodes(env, games)
        assert len(train) == 3
        result = run_probe(env, "alfworld-generated", train, games, PROBE_KINDS,
                           tmp_path / "mem", HashingEmbedder(), settings=TEST_SETTINGS)
    finally:
        env.close()
    assert list(result["memories"]) == list(PROBE_KINDS)
    lines = table(result).splitlines()
    assert len(lines) == 2 + len(PROBE_KINDS)
    assert all(line.count("|") == len(COLUMNS) + 3 for line in lines)
    for summary in result["memories"].values():
        assert summary["games"] == 3
        for column in ("appliance", "destination", "order", "success", "scene_right"):
            assert 0.0 <= summary[column] <= 1.0
    gold = result["memories"]["deltamem"]
    assert gold["kind"] == {"right": 1.0, "wrong": 0.0, "none": 0.0}
    assert gold["appliance"] == gold["destination"] == gold["order"] == 1.0
    assert gold["success"] == 1.0
    assert gold["scene_right"] == 1.0  # its own gold plan says where the object is
    explorer = result["memories"]["none"]
    assert explorer["kind"] is None
    assert explorer["appliance"] < 1.0  # no memory: no heat step, no lamp
    assert explorer["success"] < 1.0
