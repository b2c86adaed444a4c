"""The memories the harness compares, behind one small protocol.

* :class:`NoMemory` - the same prompt without a memory block.
* :class:`DeltaMemMemory` - the DeltaMem facade. Modes ``both``/``task``/``env`` change only what
  is injected; both trees are recalled and written in every mode (spec §3.4). Ablations go
  through :class:`~deltamem.config.Settings` (``penalty=0``, ``auto_consolidate=False``), and
  the flat one through the memory's placement rule (:func:`every_episode_a_root`). The harness
  plays text games, so the memory reads scenes with the text-game scene plug-in, named
  explicitly (:data:`SCENE`).
* :class:`PlaceboMemory` - the placebo arm: DeltaMem learning exactly what ``deltamem`` learns,
  but showing, in the same render and the same slot, the recall of *another* task family cut
  to the length of this episode's own recall. It keeps the format and the length of the
  memory and changes its content, so DeltaMem − placebo is the effect of the content.
* The paper's baselines, re-implemented from their descriptions (spec §6.6), in
  :mod:`deltamem_bench.baselines`: Synapse, AWM and ReasoningBank.

``context`` returns the text to inject and an ``info`` dict describing the recall; keys that start
with ``_`` hold live objects for ``update`` (the runner does not log them).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from deltamem import Usage
from deltamem.config import Settings
from deltamem.core.model import Episode, Experience, Node
from deltamem.core.render import ENV_HEADER, TASK_HEADER, render_chain
from deltamem.core.tree import Action, Placement
from deltamem.embed.base import Embedder
from deltamem.errors import ConfigError, ExtractionError
from deltamem.llm.base import LLM
from deltamem.scenes.base import Scene

DELTAMEM_HEADER = (
    "The memory below was retrieved from a hierarchical experience memory:\n"
    "- Skill memory: how similar tasks were solved (or failed) before.\n"
    "- Scene knowledge: where things were and how things worked in similar places.\n"
    "Labels such as 'When' or 'Applies to' describe past episodes; your real task is at the end."
)
MODES = ("both", "task", "env")
# The scene plug-in of every DeltaMem arm: the harness's environments are text games.
SCENE = "text-games"


def every_episode_a_root(new: Experience, chains: Sequence[Sequence[Node]], *,
                         max_depth: int = 0) -> tuple[Placement, int | None]:
    """The flat ablation's placement rule: a new root for every episode (no delta, no dedup),
    to show what the residual trees add."""
    return Placement(Action.ROOT), None


@dataclass
class Update:
    """What writing one episode into a memory did and cost."""

    usage: Usage = field(default_factory=Usage)
    written: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Memory(Protocol):
    """An experience memory as the harness drives it."""

    name: str

    def context(self, task: str, scene: str, *, family: str = "") -> tuple[str, dict[str, Any]]:
        """Text to inject for this episode (empty: none) and a description of the recall.

        ``family`` is the task family (ScienceWorld task, TWX game, ALFWorld type) for memories
        that bucket by it (AWM).
        """
        ...

    def update(self, episode: Episode, info: dict[str, Any]) -> Update:
        """Learn a finished episode; ``info`` is what :meth:`context` returned for it."""
        ...

    def size(self) -> dict[str, int]:
        """``{"entries": stored items, "chars": stored characters}``."""
        ...

    def close(self) -> None:
        """Release files and connections."""
        ...


class NoMemory:
    """The no-memory baseline: nothing injected, nothing learned."""

    name = "none"

    def context(self, task: str, scene: str, *, family: str = "") -> tuple[str, dict[str, Any]]:
        """Always empty."""
        return "", {}

    def update(self, episode: Episode, info: dict[str, Any]) -> Update:
        """Nothing to learn."""
        return Update()

    def size(self) -> dict[str, int]:
        """Always empty."""
        return {"entries": 0, "chars": 0}

    def close(self) -> None:
        """Nothing to release."""


class DeltaMemMemory:
    """DeltaMem through its facade.

    Args:
        db: Store location (SQLite path or ``:memory:``).
        embedder: The shared embedder object.
        extractor: ``"trace"`` (no model) or ``"llm"`` (uses ``llm``, as in the paper).
        llm: The model for the ``llm`` extractor.
        settings: Thresholds and ablation switches.
        mode: ``both``, ``task`` (inject only the skill chain) or ``env`` (only the scene chain).
        name: Label in reports.
        budget_chars: The harness's context budget (``both`` mode renders within it).
        flat: The flat ablation: every episode is stored as a root (:func:`every_episode_a_root`).
        scene: The scene plug-in (the text-game scene by default; the memory-quality probe's
            "before" of tendencies passes ``TextGames(tendencies=False)``).
    """

    def __init__(self, db: str | Path, embedder: Embedder, *, extractor: str = "llm",
                 llm: LLM | None = None, settings: Settings | None = None, mode: str = "both",
                 name: str = "deltamem", budget_chars: int | None = None,
                 flat: bool = False, scene: str | Scene = SCENE) -> None:
        from deltamem import DeltaMem

        if mode not in MODES:
            raise ConfigError(f"DeltaMem mode must be one of {MODES}, got {mode!r}")
        if extractor == "llm" and llm is None:
            raise ConfigError("the llm extractor needs an LLM")
        self.mode = mode
        self.name = name
        # The harness budgets every memory in characters; DeltaMem renders to a token budget
        # (about 4 characters a token), keeping its most useful parts first.
        self.budget_tokens = None if budget_chars is None else budget_chars // 4
        self.mem = DeltaMem.open(db, embedder=embedder, extractor=extractor, llm=llm,
                                 settings=settings or Settings(), scene=scene)
        self.flat = flat
        if flat:
            self.mem.placer = every_episode_a_root

    def _text(self, recall: Any) -> str:
        # Single-tree modes carry only their tree's own header (spec §3.4: a simpler header).
        style = self.mem.settings.style
        if self.mode == "task":
            chain = render_chain(recall.task.nodes, style)
            return f"{TASK_HEADER}\n\n{chain}" if chain else ""
        if self.mode == "env":
            chain = render_chain(recall.env.nodes, style)
            return f"{ENV_HEADER}\n\n{chain}" if chain else ""
        body = str(recall.context)
        return f"{DELTAMEM_HEADER}\n\n{body}" if body else ""

    def context(self, task: str, scene: str, *, family: str = "") -> tuple[str, dict[str, Any]]:
        """Recall both trees; inject per ``mode``."""
        recall = self.mem.recall(task, scene, budget_tokens=self.budget_tokens)
        info: dict[str, Any] = {"_recall": recall}
        for label, tree in (("task", recall.task), ("env", recall.env)):
            best = tree.best
            info[label] = {
                "matched": tree.matched,
                "node": tree.node,
                "depth": len(tree.chain),
                "best_score": round(best.score, 4) if best else None,
            }
        return self._text(recall), info

    def update(self, episode: Episode, info: dict[str, Any]) -> Update:
        """Learn the episode (passing the recall made before it). When the model's answer never
        validates (the ``llm`` extractor), the library stores nothing and the arm plays on,
        the rule every model-written memory follows (ReasoningBank's too)."""
        try:
            result = self.mem.learn(episode, recall=info.get("_recall"))
        except ExtractionError as exc:
            usage = exc.usage if isinstance(exc.usage, Usage) else Usage()
            return Update(usage, {"stored": False, "reason": f"extraction failed: {exc}"[:300]})
        return Update(Usage.of(result.usage), result.wire())

    def size(self) -> dict[str, int]:
        """Nodes in both trees and characters stored."""
        stats = self.mem.stats().wire()
        return {"entries": int(stats["task"]["nodes"]) + int(stats["env"]["nodes"]),
                "chars": int(stats["stored_chars"])}

    def close(self) -> None:
        """Close the store."""
        self.mem.close()


PLACEBO_SEPARATOR = "\n\n---\n\n"  # the render's own separator between its sections


class PlaceboMemory(DeltaMemMemory):
    """The placebo arm: another family's DeltaMem recall, as long as this episode's own.

    It learns every episode as :class:`DeltaMemMemory` does (same extractor, same settings,
    same recall passed to ``learn``), and remembers, per task family, the task and first
    observation of the newest episode it learned. For an episode of family ``f`` it recalls
    as DeltaMem would; when that recall is empty it shows nothing (as DeltaMem). Otherwise it
    recalls for the newest episode of another family (the families other than ``f`` in name
    order, starting at a position fixed by a hash of the task and scene, so different episodes
    draw different families), renders it with DeltaMem's own header and sections, appends the
    next families' recalls (without the header) while the text is shorter than the real one,
    and cuts it to the real one's length. With no other family learned yet it shows nothing
    and says so (``placebo.reason``): one-family environments (TextWorld Commonsense, Coin
    Collector) have no placebo.

    Args:
        families_path: Where the per-family (task, scene) anchors persist (a resumed run
            continues from them); ``None`` keeps them in memory.
        Other arguments as :class:`DeltaMemMemory`.
    """

    def __init__(self, db: str | Path, embedder: Embedder, *,
                 families_path: Path | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("name", "placebo")
        super().__init__(db, embedder, **kwargs)
        self.families_path = families_path
        self.anchors: dict[str, list[str]] = {}
        if families_path is not None and families_path.exists():
            self.anchors = dict(json.loads(families_path.read_text(encoding="utf-8")))

    def _order(self, family: str, task: str, scene: str) -> list[str]:
        others = sorted(f for f in self.anchors if f != family)
        if not others:
            return []
        start = int(hashlib.sha256(f"{task}\n{scene}".encode()).hexdigest(), 16) % len(others)
        return others[start:] + others[:start]

    def context(self, task: str, scene: str, *, family: str = "") -> tuple[str, dict[str, Any]]:
        """DeltaMem's recall for the episode decides the length; another family's fills it."""
        real, info = super().context(task, scene, family=family)
        if not real:
            info["placebo"] = {"shown": False, "reason": "no recall for the episode"}
            return "", info
        parts: list[str] = []
        used: list[str] = []
        for other in self._order(family, task, scene):
            other_task, other_scene = self.anchors[other]
            recall = self.mem.recall(other_task, other_scene, budget_tokens=self.budget_tokens)
            text = self._text(recall)
            if not text:
                continue
            # The header once, as DeltaMem shows it; later families add only their sections.
            parts.append(text if not parts else text.split("\n\n", 1)[-1])
            used.append(other)
            if len(PLACEBO_SEPARATOR.join(parts)) >= len(real):
                break
        if not parts:
            info["placebo"] = {"shown": False, "reason": "no other family recalled"}
            return "", info
        shown = PLACEBO_SEPARATOR.join(parts)
        if len(shown) > len(real):
            shown = shown[: max(0, len(real) - 3)].rstrip() + "..."
        info["placebo"] = {"shown": True, "families": used, "chars": len(shown),
                           "real_chars": len(real)}
        return shown, info

    def update(self, episode: Episode, info: dict[str, Any]) -> Update:
        """Learn as DeltaMem, and keep the episode's family anchor."""
        update = super().update(episode, info)
        family = str(episode.meta.get("task_name", ""))
        if family:
            self.anchors[family] = [episode.task, episode.env]
            if self.families_path is not None:
                tmp = self.families_path.with_suffix(".tmp")
                tmp.write_text(json.dumps(self.anchors, ensure_ascii=False), encoding="utf-8")
                tmp.replace(self.families_path)
        return update
