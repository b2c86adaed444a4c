"""The engine's working records: what the reader and the writer fill in
(:class:`TreeMatch`, :class:`TreeWriting`, :class:`Learning`, :class:`ChainLink`), which the
facade turns into its answers (the answer models of :mod:`deltamem.engine.results`, built
``of`` a record: ``TreeRecall.of(match)``, ``TreeWrite.of(writing)``,
``LearnResult.of(learning)``).

No pydantic here: a read builds these records only, and the answer models are imported when an
answer is first built (``_util.lazymod``). The hook daemon's recall, which the first prompt of a
session waits for, never builds one, so its start does not import them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from deltamem._util.lazymod import module
from deltamem._util.usage import Usage
from deltamem.core.model import Experience, Lesson, Node, Outcome, Skill, Tree
from deltamem.core.scoring import accepts
from deltamem.core.slots import adapt, roles
from deltamem.core.tree import Action, compose_chain, success_prefix
from deltamem.store.base import Candidate, Vector

if TYPE_CHECKING:
    from deltamem.formats import api
else:
    api = module("deltamem.formats.api")


@dataclass(frozen=True, slots=True)
class ChainLink:
    """One node of a recalled chain with its similarity to the query and its penalised score."""

    id: str
    kind: str
    outcome: str
    similarity: float
    score: float

    def to_wire(self) -> api.LinkOut:
        return api.LinkOut.model_construct(id=self.id, kind=self.kind, outcome=self.outcome,
                                           similarity=round(self.similarity, 6),
                                           score=round(self.score, 6))

    def to_dict(self) -> dict[str, Any]:
        return self.to_wire().wire()


@dataclass(slots=True)
class TreeMatch:
    """What one tree recalled for one key, as the engine works with it (the reader fills it in;
    learning reads it again). The caller gets it as the answer model
    :class:`~deltamem.engine.results.TreeRecall`.

    ``best`` is the top candidate whether or not it cleared the threshold, so ``explain`` can say
    why nothing matched. ``chain`` and ``experience`` are empty unless ``matched``.
    """

    tree: Tree
    key: str
    threshold: float
    penalty: float
    best: Candidate | None = None
    candidates: list[Candidate] = field(default_factory=list)
    chain: list[Node] = field(default_factory=list)
    links: list[ChainLink] = field(default_factory=list)
    experience: Experience | None = None
    query: Vector | None = field(default=None, repr=False)
    # The key's slots (``core.slots.query_slots``), where the task tree's template rule ran.
    slots: frozenset[str] = frozenset()

    @property
    def matched(self) -> bool:
        return bool(self.chain)

    @property
    def node(self) -> Node | None:
        return self.chain[-1] if self.chain else None

    @property
    def guide(self) -> Experience | None:
        """The chain's successful prefix composed (what ``skill`` / ``knowledge`` show)."""
        usable = success_prefix(self.chain)
        return compose_chain(usable) if usable else None

    @property
    def adapted(self) -> Skill | None:
        """The recalled skill carried over to this recall's task by role: each slot of the
        matched key (``meta["slots"]``, ``core.slots``) that a word of the task takes the place
        of is replaced by that word in the steps and the termination (``core.slots.roles``:
        "take mug 1 from countertop 1", learned on "heat some mug and put it in shelf", becomes
        "take egg 1 from countertop 1" for "heat some egg and put it in countertop"; the
        instance numbers and the words the task does not name stay). The skill itself where no
        slot maps, or none was stored; None outside the task tree or without a skill."""
        skill, node = self.guide, self.node
        if self.tree is not Tree.TASK or not isinstance(skill, Skill) or node is None:
            return None
        stored = node.meta.get("slots")
        mapping = roles(node.key, [str(w) for w in stored], self.key, self.slots) \
            if isinstance(stored, list) else {}
        if not mapping:
            return skill
        return Skill(skill.activation, tuple(adapt(step, mapping) for step in skill.steps),
                     adapt(skill.termination, mapping))

    @property
    def lesson(self) -> Lesson | None:
        """The failure lesson, when the match is one."""
        failed = self.node is not None and self.node.outcome is Outcome.FAILURE
        return self.experience if failed and isinstance(self.experience, Lesson) else None

    def explain_wire(self) -> api.TreeExplainOut:
        """Every term of the decision: similarity, penalty, score, threshold, verdict."""
        rows = [
            api.CandidateOut.build(
                id=c.id, similarity=round(c.similarity, 6), failure=c.failure,
                discredited=c.discredited, penalty=round(self.penalty if c.failure else 0.0, 6),
                score=round(c.score, 6), depth=c.depth,
                clears_threshold=accepts(c.score, self.threshold))
            for c in self.candidates
        ]
        return api.TreeExplainOut.build(tree=self.tree.value, key=self.key,
                                        threshold=self.threshold, penalty=self.penalty,
                                        matched=self.matched, candidates=rows)


@dataclass(frozen=True, slots=True)
class TreeWriting:
    """What learning did in one tree, as the engine works with it: a new root, a delta under
    ``parent``, or a dedup hit. The caller gets it as the answer model
    :class:`~deltamem.engine.results.TreeWrite`."""

    action: Action
    node: str | None
    parent: str | None
    patch_ops: int = 0
    note: str = ""
    experience: Experience | None = None  # what the extractor wrote (== the node's composition)
    matched: str | None = None  # the node whose counters this episode bumped (None: no match)

    def wire_fields(self) -> dict[str, Any]:
        """The answer's fields (:class:`deltamem.formats.api.WriteOut`)."""
        out: dict[str, Any] = {"action": self.action.value, "node": self.node,
                               "parent": self.parent}
        if self.note:
            out["note"] = self.note
        return out

    def to_dict(self) -> dict[str, Any]:
        """The JSON kept in the episode log (``EpisodeRecord.result``)."""
        return api.WriteOut.build(**self.wire_fields()).wire()


@dataclass(slots=True)
class Learning:
    """Learning one episode, as the engine works with it (mutable while the write and the
    consolidation after it run). The caller gets it as the answer model
    :class:`~deltamem.engine.results.LearnResult`.
    """

    episode_id: str
    task: TreeWriting
    env: TreeWriting
    consolidated: Sequence[api.ConsolidationOut] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    recalled: list[str] = field(default_factory=list)
    deferred: list[str] = field(default_factory=list)


def cosine(a: Vector, b: Vector) -> float:
    return float(np.dot(a, b))
