"""Build a harness memory by its kind name.

Kinds: ``none``, ``deltamem``, ``synapse``, ``awm``, ``reasoningbank``, ``long-context``, and
the DeltaMem ablations ``deltamem-task`` (inject only the task tree), ``deltamem-env`` (only the
environment tree), ``deltamem-nopenalty`` (failure penalty 0), ``deltamem-nocons`` (no
consolidation) and ``deltamem-flat`` (every episode a root: no deltas, no consolidation); and,
outside the ablation set, ``deltamem-successes``: the memory hands the agent only what succeeded
(failure penalty 1, so no lesson, failed scene and discredited skill clears a threshold);
``deltamem-llm``: DeltaMem written by the LLM extractor (the paper's write path) with the model
that writes AWM and ReasoningBank, next to the trace extractor of ``deltamem``;
``placebo``: DeltaMem learning what ``deltamem`` learns but showing another task family's recall
cut to the length of its own (:class:`~deltamem_bench.memories.PlaceboMemory`).
A warm start learns only gold successes, where it is the full memory: it is an arm of the
online entry, where SmolLM2-135M copies the actions a lesson says failed (docs/results.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deltamem.config import Settings
from deltamem.embed.base import Embedder
from deltamem.errors import ConfigError
from deltamem.llm.base import LLM
from deltamem_bench.baselines import (
    AWMMemory,
    LongContextMemory,
    ReasoningBankMemory,
    SynapseMemory,
)
from deltamem_bench.memories import DeltaMemMemory, Memory, NoMemory, PlaceboMemory

MEMORY_KINDS = ("none", "deltamem", "synapse", "awm", "reasoningbank", "long-context")
ABLATION_KINDS = ("deltamem-task", "deltamem-env", "deltamem-nopenalty", "deltamem-nocons",
                  "deltamem-flat")
# ``deltamem-llm``: DeltaMem with the paper's write path (the LLM extractor) whatever the run's
# extractor, written by the same model that writes AWM's workflows and ReasoningBank's notes.
ALL_KINDS = (*MEMORY_KINDS, *ABLATION_KINDS, "deltamem-successes", "deltamem-llm", "placebo")
# What each DeltaMem variant changes in the settings it is given.
_SETTING_CHANGES: dict[str, dict[str, Any]] = {
    "deltamem-nopenalty": {"penalty": 0.0},
    "deltamem-successes": {"penalty": 1.0},  # cos - 1 <= 0: no failure clears a threshold
    "deltamem-nocons": {"auto_consolidate": False},
    "deltamem-flat": {"auto_consolidate": False},
}
# The ablations that change the placement rule (every episode a root), not a setting.
_FLAT = ("deltamem-flat",)


def parse_kinds(text: str, *, ablations: bool = False) -> list[str]:
    """Split a comma list of kinds, check each, and append the ablations if asked."""
    kinds = [k.strip().lower() for k in text.split(",") if k.strip()]
    if ablations:
        kinds += [k for k in ABLATION_KINDS if k not in kinds]
    unknown = [k for k in kinds if k not in ALL_KINDS]
    if unknown or not kinds:
        raise ConfigError(f"unknown memory kind(s) {unknown or text!r}; choose from "
                          f"{', '.join(ALL_KINDS)}")
    return list(dict.fromkeys(kinds))


def make_memory(kind: str, directory: Path, *, embedder: Embedder, llm: LLM | None,
                extractor: str = "llm", settings: Settings | None = None,
                budget_chars: int = 2400) -> Memory:
    """The memory ``kind``, persisting under ``directory`` (created if needed).

    Args:
        kind: One of :data:`ALL_KINDS`.
        directory: Where the memory keeps its file (``memory.db`` or ``memory.json``).
        embedder: Shared by DeltaMem and the embedding baselines.
        llm: The backbone (acting model), also used by the LLM-based memories.
        extractor: DeltaMem's extractor, ``llm`` (as in the paper) or ``trace``.
        settings: DeltaMem settings before the ablation's change.
        budget_chars: The context budget (the long-context baseline fills it).
    """
    directory.mkdir(parents=True, exist_ok=True)
    base = settings or Settings()
    if kind == "none":
        return NoMemory()
    if kind.startswith("deltamem"):
        if kind not in ALL_KINDS:
            raise ConfigError(f"unknown memory kind {kind!r}")
        mode = {"deltamem-task": "task", "deltamem-env": "env"}.get(kind, "both")
        base = base.with_(**_SETTING_CHANGES.get(kind, {}))
        if kind == "deltamem-llm":
            extractor = "llm"
            if llm is None:
                raise ConfigError("the deltamem-llm memory needs an LLM (its writer)")
        return DeltaMemMemory(directory / "memory.db", embedder, extractor=extractor,
                              llm=llm if extractor == "llm" else None, settings=base,
                              mode=mode, name=kind, budget_chars=budget_chars,
                              flat=kind in _FLAT)
    if kind == "placebo":
        return PlaceboMemory(directory / "memory.db", embedder, extractor=extractor,
                             llm=llm if extractor == "llm" else None, settings=base,
                             budget_chars=budget_chars,
                             families_path=directory / "families.json")
    if kind == "synapse":
        return SynapseMemory(embedder, directory / "memory.json")
    if kind == "long-context":
        return LongContextMemory(directory / "memory.json", budget_chars=budget_chars)
    if llm is None:
        raise ConfigError(f"the {kind} memory needs an LLM")
    if kind == "awm":
        return AWMMemory(llm, directory / "memory.json")
    if kind == "reasoningbank":
        return ReasoningBankMemory(llm, embedder, directory / "memory.json")
    raise ConfigError(f"unknown memory kind {kind!r}; choose from {', '.join(ALL_KINDS)}")
