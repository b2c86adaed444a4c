"""The long-context baseline: newest first, within the budget, never empty when it holds any."""

from __future__ import annotations

from deltamem.core.model import Episode, Step
from deltamem_bench.baselines import LongContextMemory


def _episode(task: str, n: int, success: bool = True) -> Episode:
    steps = tuple(Step(f"action {task} {i}", f"observation {i} " + "x" * 40) for i in range(n))
    return Episode(task=task, env="room", steps=steps, success=success)


def test_newest_first_within_the_budget() -> None:
    memory = LongContextMemory(budget_chars=600)
    for task in ("old", "mid", "new"):
        memory.update(_episode(task, 2), {})
    text, info = memory.context("any", "room")
    assert len(text) <= 600 and info["matched"]
    assert text.index("action new 0") < text.index("action mid 0")
    assert "action old 0" not in text and info["shown"] == 2


def test_a_trajectory_longer_than_the_budget_is_shown_cut() -> None:
    memory = LongContextMemory(budget_chars=400)
    memory.update(_episode("short", 1, success=False), {})
    memory.update(_episode("long", 40), {})
    text, info = memory.context("any", "room")
    assert info == {"matched": True, "shown": 1}
    assert len(text) <= 400 and "action long 0" in text and text.endswith("...")
    assert "action short" not in text
    assert LongContextMemory(budget_chars=400).context("any", "room") == (
        "", {"matched": False, "shown": 0})
