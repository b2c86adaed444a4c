"""Every arm gets the same inputs: the same recall keys, the same gold episodes, one budget."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from deltamem.core.model import Episode
from deltamem.embed.hashing import HashingEmbedder
from deltamem.errors import ConfigError
from deltamem.testing.llm import FunctionLLM, ScriptedLLM
from deltamem_bench import runner
from deltamem_bench.factory import make_memory
from deltamem_bench.memories import DeltaMemMemory, Memory, Update
from test_agent import CoinRoomDouble
from test_runner import ENV, coin_player, options

ARMS = ["none", "deltamem", "synapse", "awm", "reasoningbank", "long-context", "placebo"]


class Recording:
    """Wraps a memory and records what the runner hands it."""

    def __init__(self, inner: Memory, seen: list[tuple[str, Any]]) -> None:
        self.inner, self.seen, self.name = inner, seen, inner.name

    def context(self, task: str, scene: str, *, family: str = "") -> tuple[str, dict[str, Any]]:
        self.seen.append(("context", (task, scene, family)))
        return self.inner.context(task, scene, family=family)

    def update(self, episode: Episode, info: dict[str, Any]) -> Update:
        self.seen.append(("update", (episode.task, episode.env, episode.success,
                                     tuple(s.action for s in episode.steps))))
        return self.inner.update(episode, info)

    def size(self) -> dict[str, int]:
        return self.inner.size()

    def close(self) -> None:
        self.inner.close()


def test_every_arm_gets_the_same_keys_gold_episodes_and_budget(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, list[tuple[str, Any]]] = {}
    budgets: dict[str, int] = {}

    def recorded(kind: str, directory: Path, **kwargs: Any) -> Memory:
        budgets[kind] = kwargs["budget_chars"]
        seen[kind] = []
        return Recording(make_memory(kind, directory, **kwargs), seen[kind])

    monkeypatch.setattr(runner, "make_memory", recorded)
    runner.run_bench(ENV, ARMS, FunctionLLM(coin_player), out=tmp_path,
                     embedder=HashingEmbedder(), env=CoinRoomDouble(),
                     options=options(episodes=3, protocol="warm", train_episodes=2,
                                     memory_chars=1800))
    assert set(budgets.values()) == {1800}
    gold = {kind: [args for call, args in calls if call == "update"] for kind, calls in
            seen.items() if kind != "none"}
    # NoMemory is wrapped too but learns nothing; each other arm learns the same gold episodes.
    assert len({tuple(v) for v in gold.values()}) == 1 and len(next(iter(gold.values()))) == 2
    keys = {kind: [args for call, args in calls if call == "context"] for kind, calls in
            seen.items()}
    assert len({tuple(v) for v in keys.values()}) == 1 and len(keys["none"]) == 3


def test_deltamem_llm_writes_with_the_model_that_writes_the_baselines(tmp_path: Path) -> None:
    llm = ScriptedLLM([])
    memory = make_memory("deltamem-llm", tmp_path, embedder=HashingEmbedder(), llm=llm,
                         extractor="trace")
    assert isinstance(memory, DeltaMemMemory) and memory.mem.extractor.uses_llm
    memory.close()
    with pytest.raises(ConfigError, match="needs an LLM"):
        make_memory("deltamem-llm", tmp_path / "b", embedder=HashingEmbedder(), llm=None)
