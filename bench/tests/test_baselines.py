"""Harness memories: NoMemory, DeltaMem modes and ablations, Synapse, AWM and ReasoningBank."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from deltamem.core.model import Episode, Step
from deltamem.embed.hashing import HashingEmbedder
from deltamem.errors import ConfigError
from deltamem.testing.llm import ScriptedLLM
from deltamem_bench.baselines import (
    AWM_MAX_CHARS,
    AWMMemory,
    ReasoningBankMemory,
    SynapseMemory,
    flatten_trajectory,
)
from deltamem_bench.factory import ALL_KINDS, make_memory, parse_kinds
from deltamem_bench.memories import DeltaMemMemory, Memory, NoMemory
from support import TEST_SETTINGS, make_episode

HEAT = "heat the apple in the kitchen"
WATER = "water the plant in the garden"


def items_json(*titles: str) -> str:
    return json.dumps({"items": [{"title": t, "description": f"about {t}",
                                  "content": f"do {t} carefully"} for t in titles]})


def test_no_memory_injects_nothing() -> None:
    """NoMemory returns no context and learns nothing."""
    memory = NoMemory()
    assert memory.context(HEAT, "kitchen") == ("", {})
    assert memory.update(make_episode(task=HEAT), {}).usage.llm_calls == 0
    assert memory.size() == {"entries": 0, "chars": 0}


def test_synapse_stores_successes_and_recalls_top1(tmp_path: Path) -> None:
    """Only successes are stored; the closest task's trajectory comes back, and persists."""
    path = tmp_path / "syn.json"
    memory = SynapseMemory(HashingEmbedder(), path)
    assert memory.context(HEAT, "")[0] == ""
    assert not memory.update(make_episode(task=WATER, success=False), {}).written["stored"]
    memory.update(make_episode(task=HEAT, actions=("go to kitchen", "heat apple"),
                               observations=["ok", "hot"]), {})
    memory.update(make_episode(task=WATER, actions=("go to garden", "water plant"),
                               observations=["ok", "wet"]), {})
    text, info = memory.context("heat the apple", "")
    assert info["matched"] and info["entry"] == 0
    assert "Action: heat apple" in text and "water plant" not in text
    assert memory.size()["entries"] == 2
    again = SynapseMemory(HashingEmbedder(), path)
    assert again.context("water the plant", "")[1]["entry"] == 1


def test_flatten_trajectory_is_capped() -> None:
    """A long trajectory is cut to the limit."""
    ep = make_episode(actions=tuple(f"step {i}" for i in range(200)))
    assert len(flatten_trajectory(ep, 500)) == 500


def test_awm_induces_then_merges_per_family(tmp_path: Path) -> None:
    """A success induces a workflow for its family; a later success merges (replaces) it."""
    llm = ScriptedLLM(["1. go to <room>\n2. heat <object>", "1. go to <room>\n2. take <object>"
                       "\n3. heat <object>"])
    memory = AWMMemory(llm, tmp_path / "awm.json")
    failed = memory.update(make_episode(task=HEAT, success=False, task_name="heat"), {})
    assert not failed.written["stored"] and not llm.calls
    first = memory.update(make_episode(task=HEAT, task_name="heat"), {})
    assert first.usage.llm_calls == 1 and first.written == {"stored": True, "family": "heat",
                                                            "merged": False}
    second = memory.update(make_episode(task=HEAT, task_name="heat"), {})
    assert second.written["merged"]
    assert "Current workflow" in llm.calls[1].prompt and "heat <object>" in llm.calls[1].prompt
    text, info = memory.context(HEAT, "", family="heat")
    assert info["matched"] and "3. heat <object>" in text
    assert memory.context(HEAT, "", family="other") == ("", {"matched": False,
                                                             "family": "other"})
    assert memory.size()["entries"] == 1


def test_awm_caps_and_keeps_old_workflow_on_empty_answer() -> None:
    """Workflows are cut to 2000 chars; an empty answer keeps the previous workflow."""
    memory = AWMMemory(ScriptedLLM(["x" * 5000, "   "]))
    memory.update(make_episode(task_name="heat"), {})
    assert len(memory.entries[0]["workflow"]) == AWM_MAX_CHARS
    kept = memory.update(make_episode(task_name="heat"), {})
    assert not kept.written["stored"] and len(memory.entries[0]["workflow"]) == AWM_MAX_CHARS


def test_reasoningbank_learns_from_success_and_failure(tmp_path: Path) -> None:
    """Both outcomes become entries; the closest one is rendered with its outcome tag."""
    llm = ScriptedLLM([items_json("preheat", "check door"), items_json("wrong room")])
    memory = ReasoningBankMemory(llm, HashingEmbedder(), tmp_path / "rb.json")
    ok = memory.update(make_episode(task=HEAT), {})
    bad = memory.update(make_episode(task=WATER, success=False), {})
    assert ok.written["items"] == 2 and bad.written["stored"]
    assert "failed attempt" in llm.calls[1].prompt
    assert llm.calls[0].schema is not None
    text, info = memory.context(HEAT, "")
    assert info["entry"] == 0 and "[SUCCESS] preheat: about preheat" in text
    text, info = memory.context(WATER, "")
    assert info["entry"] == 1 and "[FAILURE] wrong room" in text
    assert ReasoningBankMemory(llm, HashingEmbedder(), tmp_path / "rb.json").size() == \
        memory.size()


def test_reasoningbank_reports_failed_extraction() -> None:
    """Unparseable answers store nothing and say why (no guessed items)."""
    memory = ReasoningBankMemory(ScriptedLLM(["no json here", "still none"]), HashingEmbedder())
    update = memory.update(make_episode(), {})
    assert not update.written["stored"] and "extraction failed" in update.written["reason"]
    assert memory.entries == [] and update.usage.llm_calls == 2


def test_deltamem_modes_inject_one_or_both_trees(tmp_path: Path) -> None:
    """All modes learn both trees; task/env modes inject only their tree."""
    texts = {}
    for mode in ("both", "task", "env"):
        memory = DeltaMemMemory(tmp_path / f"{mode}.db", HashingEmbedder(), extractor="trace",
                                settings=TEST_SETTINGS, mode=mode)
        ep = make_episode()
        text, info = memory.context(ep.task, ep.env)
        assert text == "" and not info["task"]["matched"]
        update = memory.update(ep, info)
        assert update.written["task"]["action"] == "root"
        assert update.written["env"]["action"] == "root"
        texts[mode], info = memory.context(ep.task, ep.env)
        assert info["task"]["matched"] and info["env"]["matched"]
        assert memory.size()["entries"] == 2
        memory.close()
    assert "Skill memory" in texts["both"] and "Scene knowledge" in texts["both"]
    assert "Skill memory" in texts["task"] and "Scene knowledge" not in texts["task"]
    assert "Scene knowledge" in texts["env"] and "Skill memory" not in texts["env"]


def test_factory_builds_every_kind_with_its_ablation(tmp_path: Path) -> None:
    """Each kind name builds the right memory; ablations change the settings."""
    llm = ScriptedLLM([])
    for kind in ALL_KINDS:
        memory = make_memory(kind, tmp_path / kind, embedder=HashingEmbedder(), llm=llm,
                             extractor="trace", settings=TEST_SETTINGS)
        assert isinstance(memory, Memory) and memory.name == kind
        memory.close()
    nopen = make_memory("deltamem-nopenalty", tmp_path / "p", embedder=HashingEmbedder(),
                        llm=llm, extractor="trace", settings=TEST_SETTINGS)
    nocons = make_memory("deltamem-nocons", tmp_path / "c", embedder=HashingEmbedder(),
                         llm=llm, extractor="trace", settings=TEST_SETTINGS)
    assert isinstance(nopen, DeltaMemMemory) and nopen.mem.settings.penalty == 0.0
    assert isinstance(nocons, DeltaMemMemory) and not nocons.mem.settings.auto_consolidate
    nopen.close()
    nocons.close()


def test_parse_kinds_checks_names_and_adds_ablations() -> None:
    """Kinds are validated, deduplicated, and --ablations appends the five ablations."""
    assert parse_kinds("none, deltamem,none") == ["none", "deltamem"]
    assert parse_kinds("deltamem", ablations=True)[1:] == ["deltamem-task", "deltamem-env",
                                                           "deltamem-nopenalty",
                                                           "deltamem-nocons", "deltamem-flat"]
    with pytest.raises(ConfigError, match="unknown memory kind"):
        parse_kinds("none,memgpt")


def test_successes_only_memory_hands_out_no_lesson(tmp_path: Path) -> None:
    """``deltamem-successes`` keeps learning failures (their counts discredit skills) but never
    hands one to the agent; the full memory warns with the lesson."""
    failed = Episode(task="tidy the hall", env="You are in the hall.", success=False, steps=(
        Step("put boots in umbrella stand", "You put the boots in the umbrella stand.",
             reward=-0.25),))
    won = Episode(task="tidy the hall", env="You are in the hall.", success=True, steps=(
        Step("put boots in shoe cabinet", "You put the boots in the shoe cabinet.",
             reward=0.25),))
    texts = {}
    for kind in ("deltamem", "deltamem-successes"):
        memory = make_memory(kind, tmp_path / kind, embedder=HashingEmbedder(), llm=None,
                             extractor="trace", settings=TEST_SETTINGS)
        memory.update(failed, {})
        texts[kind] = memory.context(failed.task, failed.env)[0]
        memory.update(won, {})
        texts[kind + " after a win"] = memory.context(won.task, won.env)[0]
        memory.close()
    assert "FAILED" in texts["deltamem"] and "umbrella stand" in texts["deltamem"]
    assert texts["deltamem-successes"] == ""
    assert "put boots in shoe cabinet" in texts["deltamem-successes after a win"]
    assert "umbrella stand" not in texts["deltamem-successes after a win"]


def test_synapse_keys_on_the_task_and_the_start_of_the_observation(tmp_path: Path) -> None:
    """Bad case (Commonsense, Coin Collector): one task sentence for every episode, so a
    task-only key always returned the first stored exemplar. The specifier adds the start of
    the first observation: the exemplar from the same kind of room comes back."""
    memory = SynapseMemory(HashingEmbedder(), tmp_path / "syn.json")
    task = "Pick up the coin."
    for room, action in (("You are in the kitchen. There is a fridge and an oven.", "take pan"),
                         ("You are in the garden. There is a hose and a shovel.", "take hose")):
        memory.update(Episode(task=task, env=room, success=True, score=1.0,
                              steps=(Step(action, "Taken."),)), {})
    text, info = memory.context(task, "You are in the garden. There is a rake and a hose.")
    assert info["entry"] == 1 and "take hose" in text
    assert memory.context(task, "You are in the kitchen. There is a fridge.")[1]["entry"] == 0


def test_deltamem_llm_arm_plays_on_when_the_model_never_validates(tmp_path: Path) -> None:
    """The paper's write path with a model whose answers never validate: the episode is not
    learned, the update says why, and the arm keeps playing (it used to abort the whole run)."""
    memory = DeltaMemMemory(tmp_path / "llm.db", HashingEmbedder(), extractor="llm",
                            llm=ScriptedLLM(['{"steps": ["+", "+"]}'] * 8),
                            settings=TEST_SETTINGS, name="deltamem-llm")
    ep = make_episode()
    text, info = memory.context(ep.task, ep.env)
    update = memory.update(ep, info)
    assert not update.written["stored"] and "extraction failed" in update.written["reason"]
    assert update.usage.llm_calls >= 1
    assert memory.size()["entries"] == 0
    assert memory.context(ep.task, ep.env)[0] == text == ""
    memory.close()


def family_episode(task: str, room: str, actions: Sequence[str], family: str) -> Episode:
    return Episode(task=task, env=room, success=True, score=1.0,
                   steps=tuple(Step(a, "Done.") for a in actions), meta={"task_name": family})


def test_reasoningbank_no_longer_collapses_on_a_constant_task(tmp_path: Path) -> None:
    """Bad case (heldout-1, Commonsense warm): one task sentence, so the task-only key returned
    one entry for all 40 episodes. Keyed by the task plus the first observation, the entry of
    the same room comes back; a different task still outweighs a similar room."""
    llm = ScriptedLLM([items_json("kitchen"), items_json("garden"), items_json("heat")])
    memory = ReasoningBankMemory(llm, HashingEmbedder(), tmp_path / "rb.json")
    task = "Pick up objects and put them away."
    for room, action in (("You are in the kitchen. There is a fridge and an oven.", "take pan"),
                         ("You are in the garden. There is a hose and a shovel.", "take hose")):
        memory.update(Episode(task=task, env=room, success=True, score=1.0,
                              steps=(Step(action, "Taken."),)), {})
    garden = memory.context(task, "You are in the garden. There is a rake and a hose.")
    kitchen = memory.context(task, "You are in the kitchen. There is a fridge.")
    assert (garden[1]["entry"], kitchen[1]["entry"]) == (1, 0)
    assert "garden" in garden[0] and "kitchen" in kitchen[0]
    memory.update(Episode(task=HEAT, env="You are in the garden. There is a hose.",
                          success=True, score=1.0, steps=(Step("heat apple", "Hot."),)), {})
    assert memory.context(HEAT, "You are in the kitchen. There is a fridge.")[1]["entry"] == 2


def test_a_memory_file_without_the_scene_key_is_refused(tmp_path: Path) -> None:
    """An exemplar file written before the two-part key cannot be silently half-used."""
    path = tmp_path / "syn.json"
    path.write_text(json.dumps({"kind": "synapse", "entries": [
        {"task": "t", "key": "k", "trajectory": "Task: t", "vector": [0.0] * 8}]}))
    with pytest.raises(ConfigError, match="scene key"):
        SynapseMemory(HashingEmbedder(), path).context("t", "room")


def test_placebo_shows_another_family_s_recall_at_the_same_length(tmp_path: Path) -> None:
    """The placebo learns what DeltaMem learns; for a heat task it shows the water family's
    skill, in DeltaMem's render, cut to exactly the length of the heat recall; the real
    DeltaMem shows the heat skill. A one-family memory has no placebo and says why."""
    from deltamem_bench.memories import PlaceboMemory

    kitchen = "You are in the kitchen. There is a microwave and an apple."
    garden = "You are in the garden. There is a watering can and a plant."
    episodes = [family_episode(HEAT, kitchen, ["heat apple with microwave"], "heat"),
                family_episode(WATER, garden, ["take watering can", "fill watering can with "
                                               "water from the tap", "go to the plant",
                                               "water plant with watering can"], "water")]
    real = DeltaMemMemory(tmp_path / "real.db", HashingEmbedder(), extractor="trace",
                          settings=TEST_SETTINGS)
    placebo = PlaceboMemory(tmp_path / "placebo.db", HashingEmbedder(), extractor="trace",
                            settings=TEST_SETTINGS, families_path=tmp_path / "families.json")
    alone = PlaceboMemory(tmp_path / "alone.db", HashingEmbedder(), extractor="trace",
                          settings=TEST_SETTINGS)
    alone.update(episodes[0], {})
    for episode in episodes:
        real.update(episode, {})
        placebo.update(episode, {})
    shown_real, _ = real.context(HEAT, kitchen, family="heat")
    shown, info = placebo.context(HEAT, kitchen, family="heat")
    assert "heat apple" in shown_real and "heat apple" not in shown
    assert "water plant" in shown and shown.startswith(shown_real.split("\n", 1)[0])
    assert len(shown) == len(shown_real) and info["placebo"]["families"] == ["water"]
    assert info["placebo"]["real_chars"] == len(shown_real)
    assert placebo.size() == real.size()
    # Persisted anchors: a resumed placebo still knows the other family.
    placebo.close()
    again = PlaceboMemory(tmp_path / "placebo.db", HashingEmbedder(), extractor="trace",
                          settings=TEST_SETTINGS, families_path=tmp_path / "families.json")
    assert "water plant" in again.context(HEAT, kitchen, family="heat")[0]
    text, info = alone.context(HEAT, kitchen, family="heat")
    assert text == "" and info["placebo"]["reason"] == "no other family recalled"
    for memory in (real, again, alone):
        memory.close()
