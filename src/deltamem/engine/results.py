"""Result objects returned by the facade, each with the JSON form the CLI and servers print.

Each JSON form is built as its wire model of :mod:`deltamem.formats.api` (``to_wire``) and
dumped from it (``to_dict``), so the model is the one definition of the shape on every face.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from deltamem._util.usage import Usage
from deltamem.core.delta import patch_to_json
from deltamem.core.model import (
    Experience,
    Knowledge,
    Lesson,
    Node,
    Outcome,
    Skill,
    Tree,
    experience_to_dict,
)
from deltamem.core.scoring import accepts
from deltamem.core.slots import adapt, roles
from deltamem.core.tree import Action, compose_chain, success_prefix
from deltamem.formats import api
from deltamem.store.base import Candidate, Vector


@dataclass(frozen=True, slots=True)
class ChainLink:
    """One node of a recalled chain with its similarity to the query and its penalised score."""

    id: str
    kind: str
    outcome: str
    similarity: float
    score: float

    def to_wire(self) -> api.LinkOut:
        return api.LinkOut.build(id=self.id, kind=self.kind, outcome=self.outcome,
                                 similarity=round(self.similarity, 6), score=round(self.score, 6))

    def to_dict(self) -> dict[str, Any]:
        return self.to_wire().wire()


@dataclass(slots=True)
class TreeRecall:
    """What one tree recalled for one key.

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
    def node_id(self) -> str | None:
        """The matched node's id (the wire's ``node``)."""
        return self.chain[-1].id if self.chain else None

    def _guide(self) -> Experience | None:
        usable = success_prefix(self.chain)
        return compose_chain(usable) if usable else None

    @property
    def skill(self) -> Skill | None:
        """The chain's successful prefix composed, in the task tree (the wire's ``skill``)."""
        guide = self._guide() if self.tree is Tree.TASK else None
        return guide if isinstance(guide, Skill) else None

    @property
    def adapted(self) -> Skill | None:
        """:attr:`skill` carried over to this recall's task by role: each slot of the matched
        key (``meta["slots"]``, ``core.slots``) that a word of the task takes the place of is
        replaced by that word in the steps and the termination (``core.slots.roles``: "take mug
        1 from countertop 1", learned on "heat some mug and put it in shelf", becomes "take egg
        1 from countertop 1" for "heat some egg and put it in countertop"; the instance
        numbers and the words the task does not name stay). The skill itself where no slot
        maps, or none was stored."""
        skill, node = self.skill, self.node
        if skill is None or node is None:
            return skill
        stored = node.meta.get("slots")
        mapping = roles(node.key, [str(w) for w in stored], self.key, self.slots) \
            if isinstance(stored, list) else {}
        if not mapping:
            return skill
        return Skill(skill.activation, tuple(adapt(step, mapping) for step in skill.steps),
                     adapt(skill.termination, mapping))

    @property
    def knowledge(self) -> Knowledge | None:
        """The chain's composed scene knowledge, in the env tree (the wire's ``knowledge``)."""
        guide = self._guide() if self.tree is Tree.ENV else None
        return guide if isinstance(guide, Knowledge) else None

    @property
    def lesson(self) -> Lesson | None:
        """The failure lesson, when the match is one (the wire's ``lesson``)."""
        failed = self.node is not None and self.node.outcome is Outcome.FAILURE
        return self.experience if failed and isinstance(self.experience, Lesson) else None

    def to_wire(self) -> api.TaskRecallOut | api.EnvRecallOut:
        name = "skill" if self.tree is Tree.TASK else "knowledge"
        guide = self._guide()
        out: dict[str, Any] = {
            "matched": self.matched,
            "node": self.node.id if self.node else None,
            "score": round(self.best.score, 6) if self.matched and self.best else None,
            "chain": [link.to_wire() for link in self.links],
            name: _fields(guide) if guide is not None and name == guide.TYPE else None,
        }
        lesson = self.lesson  # a retracted skill (a failure, but no lesson) shows nothing
        if lesson is not None:
            out["lesson"] = _fields(lesson)
        model = api.TaskRecallOut if self.tree is Tree.TASK else api.EnvRecallOut
        return model.build(**out)

    def to_dict(self) -> dict[str, Any]:
        return self.to_wire().wire()

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

    def explain(self) -> dict[str, Any]:
        """Every term of the decision: similarity, penalty, score, threshold, verdict."""
        return self.explain_wire().wire()


@dataclass(slots=True)
class Recall:
    """Both trees' recalls and the fused prompt context (``context_tokens`` long, counted with
    ``core.render.estimate_tokens``)."""

    task: TreeRecall
    env: TreeRecall
    context: str
    usage: Usage = field(default_factory=Usage)
    context_tokens: int = 0
    explained: bool = False  # recalled with explain=True: the answer carries every term

    def to_wire(self, *, explain: bool | None = None) -> api.RecallOut:
        """The wire model; with ``explain`` (default: as recalled), also every scoring term
        (see :meth:`explain`)."""
        out: dict[str, Any] = {
            "task": self.task.to_wire(), "env": self.env.to_wire(), "context": self.context,
            "context_tokens": self.context_tokens, "usage": usage_wire(self.usage)}
        if self.explained if explain is None else explain:
            out["explain"] = self.explain_wire()
        return api.RecallOut.build(**out)

    def to_dict(self, *, explain: bool | None = None) -> dict[str, Any]:
        """The JSON form; with ``explain``, also every scoring term (see :meth:`explain`)."""
        return self.to_wire(explain=explain).wire()

    def explain_wire(self) -> api.ExplainOut:
        return api.ExplainOut.build(task=self.task.explain_wire(), env=self.env.explain_wire())

    def explain(self) -> dict[str, Any]:
        return self.explain_wire().wire()


@dataclass(frozen=True, slots=True)
class TreeWrite:
    """What learning did in one tree: a new root, a delta under ``parent``, or a dedup hit."""

    action: Action
    node: str | None
    parent: str | None
    patch_ops: int = 0
    note: str = ""
    experience: Experience | None = None  # what the extractor wrote (== the node's composition)
    matched: str | None = None  # the node whose counters this episode bumped (None: no match)

    def to_wire(self) -> api.WriteOut:
        out: dict[str, Any] = {"action": self.action.value, "node": self.node,
                               "parent": self.parent}
        if self.note:
            out["note"] = self.note
        return api.WriteOut.build(**out)

    def to_dict(self) -> dict[str, Any]:
        return self.to_wire().wire()


@dataclass(frozen=True, slots=True)
class Consolidation:
    """A chain compiled into a new root (``root`` is None for a dry run: the chain is only due)."""

    source: str
    root: str | None
    tree: Tree
    chain: tuple[str, ...]
    note: str = ""

    def to_wire(self) -> api.ConsolidationOut:
        return api.ConsolidationOut.build(source=self.source, root=self.root,
                                          tree=self.tree.value, chain=list(self.chain),
                                          note=self.note)

    def to_dict(self) -> dict[str, Any]:
        return self.to_wire().wire()


class Consolidations(list[Consolidation]):
    """What :meth:`DeltaMem.consolidate` did: the chains compiled (or, in a dry run, due), a
    list, and whether it was a dry run."""

    def __init__(self, done: Iterable[Consolidation] = (), *, dry_run: bool = False) -> None:
        super().__init__(done)
        self.dry_run = dry_run

    def to_wire(self) -> api.ConsolidateOut:
        return api.ConsolidateOut.build(dry_run=self.dry_run,
                                        consolidated=[c.to_wire() for c in self])

    def to_dict(self) -> dict[str, Any]:
        return self.to_wire().wire()


def consolidation_report(done: Sequence[Consolidation], *, dry_run: bool = False
                         ) -> dict[str, Any]:
    """What ``consolidate`` prints and serves: whether it was a dry run, and each chain."""
    return Consolidations(done, dry_run=dry_run).to_dict()


class NodeListing(list[dict[str, Any]]):
    """What :meth:`DeltaMem.list_nodes` found: the rows (at most ``limit``), a list, with the
    number that matched before the limit."""

    def __init__(self, rows: Iterable[dict[str, Any]] = (), *, total: int | None = None
                 ) -> None:
        super().__init__(rows)
        self.total = len(self) if total is None else total

    @property
    def truncated(self) -> bool:
        return len(self) < self.total

    def to_wire(self) -> api.NodeListOut:
        return api.NodeListOut.build(nodes=list(self), total=self.total,
                                     truncated=self.truncated)

    def to_dict(self) -> dict[str, Any]:
        return self.to_wire().wire()


@dataclass(slots=True)
class LearnResult:
    """Outcome of learning one episode.

    ``recalled``: the nodes the agent was handed (the ``recall`` passed to ``learn``) that
    counted the episode's outcome besides the nodes it was placed on.
    ``deferred``: nodes whose chains became due for consolidation but could not be compiled
    now (the model or the store failed); the episode itself is stored, and the chains stay due
    for the next success or ``consolidate()``. Do not learn the episode again.
    """

    episode_id: str
    task: TreeWrite
    env: TreeWrite
    consolidated: list[Consolidation] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    recalled: list[str] = field(default_factory=list)
    deferred: list[str] = field(default_factory=list)

    def fields(self) -> dict[str, Any]:
        """The wire fields of :class:`deltamem.formats.api.LearnOut` (also those of a batch's
        result)."""
        return {"episode": self.episode_id, "task": self.task.to_wire(),
                "env": self.env.to_wire(), "recalled": list(self.recalled),
                "consolidated": [c.to_wire() for c in self.consolidated],
                "deferred": list(self.deferred), "usage": usage_wire(self.usage)}

    def to_wire(self) -> api.LearnOut:
        return api.LearnOut.build(**self.fields())

    def to_dict(self) -> dict[str, Any]:
        return self.to_wire().wire()


@dataclass(slots=True)
class BatchResult:
    """Outcome of :meth:`DeltaMem.learn_many`: one result per episode, in order, and the total."""

    results: list[LearnResult]
    usage: Usage = field(default_factory=Usage)

    def to_wire(self, places: Sequence[tuple[int, int]] | None = None,
                errors: Sequence[api.BatchErrorOut] = ()) -> api.BatchOut:
        """The wire model. The CLI's ``learn FILE`` gives each result's place (its index among
        the file's episodes, and its line) and the bad lines it skipped."""
        results = [api.BatchResultOut.build(
            **({"index": i} if places is None else {"index": places[i][0], "line": places[i][1]}),
            **r.fields()) for i, r in enumerate(self.results)]
        return api.BatchOut.build(episodes=len(self.results), results=results,
                                  errors=list(errors), usage=usage_wire(self.usage))

    def to_dict(self) -> dict[str, Any]:
        return self.to_wire().wire()


@dataclass(slots=True)
class OutcomeRecord:
    """What :meth:`DeltaMem.record_outcome` counted: the nodes bumped and any consolidation
    (``deferred``: due chains that could not be compiled now, as in :class:`LearnResult`)."""

    nodes: list[str]
    success: bool
    consolidated: list[Consolidation] = field(default_factory=list)
    deferred: list[str] = field(default_factory=list)

    def to_wire(self) -> api.OutcomeOut:
        return api.OutcomeOut.build(nodes=self.nodes, success=self.success,
                                    consolidated=[c.to_wire() for c in self.consolidated],
                                    deferred=list(self.deferred))

    def to_dict(self) -> dict[str, Any]:
        return self.to_wire().wire()


def usage_wire(usage: Usage) -> api.UsageOut:
    return api.UsageOut.build(**usage.to_dict())


def _fields(exp: Experience) -> dict[str, Any]:
    out = experience_to_dict(exp)
    out.pop("type")
    return out


def node_summary(node: Node) -> dict[str, Any]:
    """Counters and flags of a node, as ``show`` reports them (:class:`api.NodeStatsOut`)."""
    return api.NodeStatsOut.build(
        hits=node.hits, successes=node.successes, failures=node.failures, depth=node.depth,
        consolidated=node.consolidated, consolidated_root=node.is_consolidated_root,
        lineage=list(node.lineage), episode=node.episode_id, created_at=node.created_at,
        key=node.key).wire()


def node_row(node: Node) -> dict[str, Any]:
    """One line of a node listing: identity, place in its tree, and counters
    (:class:`api.NodeRowOut`)."""
    return api.NodeRowOut.build(
        id=node.id, tree=node.tree.value, kind=node.kind.value, outcome=node.outcome.value,
        key=node.key, parent=node.parent_id, depth=node.depth, hits=node.hits,
        successes=node.successes, failures=node.failures,
        consolidated_root=node.is_consolidated_root).wire()


def node_listing(rows: list[dict[str, Any]], limit: int | None) -> dict[str, Any]:
    """``list`` output: the first ``limit`` rows (all when None), the total, and if it was cut."""
    return NodeListing(rows if limit is None else rows[:limit], total=len(rows)).to_dict()


def patch_json(node: Node) -> list[list[Any]] | None:
    return None if node.patch is None else patch_to_json(node.patch)


def cosine(a: Vector, b: Vector) -> float:
    return float(np.dot(a, b))
