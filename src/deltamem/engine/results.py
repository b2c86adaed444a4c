"""The facade's answers: each operation of the table answers its answer model of
:mod:`deltamem.formats.api` (a subclass of it here, where the library keeps the engine's detail
beside the wire fields: :class:`Recall`, :class:`LearnResult`), so the model is the one
definition of the shape on every face, and the library and the clients answer the same one.
``wire()`` is the JSON every face prints or sends.

Behind them, the engine's working records (:mod:`deltamem.engine.working`: :class:`TreeMatch`,
:class:`TreeWriting`, :class:`Learning`), which the facade turns into answers with
``of()`` (``TreeRecall.of``, ``TreeWrite.of``, ``LearnResult.of``); they are re-exported here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import PrivateAttr

from deltamem._util.usage import Usage
from deltamem.core.delta import patch_to_json
from deltamem.core.model import Experience, Node, Skill, Tree, experience_to_dict
from deltamem.engine.working import ChainLink, Learning, TreeMatch, TreeWriting, cosine
from deltamem.formats import api
from deltamem.store.base import Candidate, Vector

__all__ = [
    "BatchItem", "BatchResult", "ChainLink", "Consolidation", "Consolidations", "EnvRecall",
    "LearnResult", "Learning", "NodeListing", "OutcomeRecord", "Recall", "TaskRecall",
    "TreeMatch", "TreeRecall", "TreeWrite", "TreeWriting", "cosine", "node_row",
    "node_summary", "patch_json", "usage_sum", "usage_wire",
]


class TreeRecall(api.TreeRecallOut):
    """What one tree recalled: the answer model every face returns (the client parses the same
    fields), plus, in the library, the engine's detail behind it (``best``, ``candidates``,
    ``nodes``, ``experience``, ...; the client has none of it).

    ``node`` is the matched node's id, as on the wire; the :class:`Node` itself is
    ``matched_node``, the chain of nodes ``nodes`` (``chain`` is the wire's list of links).
    """

    _match: TreeMatch | None = PrivateAttr(None)

    @staticmethod
    def of(match: TreeMatch) -> TaskRecall | EnvRecall:
        """The answer model of one tree's recall, carrying the engine's match. Built from the
        engine's own values without validating them again (recall is the hot path)."""
        guide = match.guide
        name, guide_model = (("skill", api.SkillOut) if match.tree is Tree.TASK
                             else ("knowledge", api.KnowledgeOut))
        out: dict[str, Any] = {
            "matched": match.matched,
            "node": match.chain[-1].id if match.chain else None,
            "score": round(match.best.score, 6) if match.matched and match.best else None,
            "chain": [link.to_wire() for link in match.links],
            name: (guide_model.model_construct(**_fields(guide))
                   if guide is not None and name == guide.TYPE else None),
        }
        lesson = match.lesson  # a retracted skill (a failure, but no lesson) shows nothing
        if lesson is not None:
            out["lesson"] = api.LessonOut.model_construct(**_fields(lesson))
        model: type[TaskRecall | EnvRecall] = TaskRecall if match.tree is Tree.TASK else EnvRecall
        answer = model.model_construct(**out)
        answer._match = match
        return answer

    @property
    def match(self) -> TreeMatch:
        """The engine's detail of this recall (library answers only)."""
        if self._match is None:
            raise AttributeError("this recall carries no engine detail (a client's answer)")
        return self._match

    @property
    def tree(self) -> Tree:
        return self.match.tree

    @property
    def key(self) -> str:
        return self.match.key

    @property
    def threshold(self) -> float:
        return self.match.threshold

    @property
    def penalty(self) -> float:
        return self.match.penalty

    @property
    def best(self) -> Candidate | None:
        return self.match.best

    @property
    def candidates(self) -> list[Candidate]:
        return self.match.candidates

    @property
    def nodes(self) -> list[Node]:
        """The matched chain's nodes, root first (empty unless ``matched``)."""
        return self.match.chain

    @property
    def matched_node(self) -> Node | None:
        return self.match.node

    @property
    def experience(self) -> Experience | None:
        """The chain's composed experience (a skill, scene knowledge or a lesson)."""
        return self.match.experience

    @property
    def query(self) -> Vector | None:
        return self.match.query

    @property
    def adapted(self) -> Skill | None:
        """The recalled skill carried over to this task by role (:attr:`TreeMatch.adapted`)."""
        return self.match.adapted

    def to_wire(self) -> api.TaskRecallOut | api.EnvRecallOut:
        """The plain wire model (no engine detail)."""
        plain = api.TaskRecallOut if isinstance(self, api.TaskRecallOut) else api.EnvRecallOut
        return plain.model_construct(self.model_fields_set, **dict(self))

    def to_dict(self) -> dict[str, Any]:
        return self.wire()

    def explain(self) -> dict[str, Any]:
        """Every term of the decision: similarity, penalty, score, threshold, verdict."""
        return self.match.explain_wire().wire()


class TaskRecall(TreeRecall, api.TaskRecallOut):
    """The task tree's recall: the skill (or the failure lesson) matched."""


class EnvRecall(TreeRecall, api.EnvRecallOut):
    """The environment tree's recall: the scene knowledge matched."""


class Recall(api.RecallOut):
    """Both trees' recalls and the fused prompt context (``context_tokens`` long, counted with
    ``core.render.estimate_tokens``): the answer model every face returns
    (:class:`deltamem.formats.api.RecallOut`; :class:`deltamem.Client` parses the same), built
    by the library with the engine's detail of each tree (see :class:`TreeRecall`)."""

    task: TaskRecall
    env: EnvRecall

    @classmethod
    def of(cls, task: TreeMatch, env: TreeMatch, context: str, usage: Usage,
           context_tokens: int, *, explain: bool = False) -> Recall:
        """The answer of the engine's two matches (``explain``: with every scoring term)."""
        out: dict[str, Any] = {"task": TreeRecall.of(task), "env": TreeRecall.of(env),
                               "context": context,
                               "context_tokens": context_tokens, "usage": usage_wire(usage)}
        if explain:
            out["explain"] = api.ExplainOut.build(task=task.explain_wire(),
                                                  env=env.explain_wire())
        return cls.model_construct(**out)

    @property
    def explained(self) -> bool:
        """Recalled with ``explain=True``: the answer carries every scoring term."""
        return self.explain is not None

    def to_wire(self, *, explain: bool | None = None) -> api.RecallOut:
        """The plain wire model; ``explain`` (default: as recalled) adds or drops every scoring
        term."""
        fields: dict[str, Any] = {
            "task": self.task.to_wire(), "env": self.env.to_wire(), "context": self.context,
            "context_tokens": self.context_tokens, "usage": self.usage}
        if self.explained if explain is None else explain:
            fields["explain"] = self.explain or self.explain_wire()
        return api.RecallOut.model_construct(**fields)

    def to_dict(self, *, explain: bool | None = None) -> dict[str, Any]:
        """The JSON form; with ``explain``, also every scoring term."""
        return self.to_wire(explain=explain).wire()

    def explain_wire(self) -> api.ExplainOut:
        return api.ExplainOut.build(task=self.task.match.explain_wire(),
                                    env=self.env.match.explain_wire())


class TreeWrite(api.WriteOut):
    """What learning did in one tree: the answer model every face returns (``action``,
    ``node``, ``parent``, ``note``), plus, in the library, the engine's detail (``patch_ops``,
    ``experience``, ``matched``; a client's answer has none of it). ``action`` is the
    :class:`~deltamem.core.tree.Action`'s value, so ``write.action == Action.DELTA`` holds."""

    _writing: TreeWriting | None = PrivateAttr(None)

    @classmethod
    def of(cls, writing: TreeWriting) -> TreeWrite:
        """The answer model of one tree's write, carrying the engine's record of it."""
        answer = cls.build(**writing.wire_fields())
        answer._writing = writing
        return answer

    @property
    def writing(self) -> TreeWriting:
        """The engine's detail of this write (library answers only)."""
        if self._writing is None:
            raise AttributeError("this write carries no engine detail (a client's answer)")
        return self._writing

    @property
    def patch_ops(self) -> int:
        return self.writing.patch_ops

    @property
    def experience(self) -> Experience | None:
        """What the extractor wrote (the node's composed experience)."""
        return self.writing.experience

    @property
    def matched(self) -> str | None:
        """The node whose counters this episode bumped (None: nothing matched)."""
        return self.writing.matched


class Consolidation(api.ConsolidationOut):
    """A chain compiled into a new root (``root`` is None for a dry run: the chain is only due):
    the answer model every face returns."""

    @classmethod
    def of(cls, source: str, root: str | None, tree: Tree, chain: Iterable[str],
           note: str = "") -> Consolidation:
        return cls.build(source=source, root=root, tree=tree.value, chain=list(chain),
                         note=note)


class Consolidations(api.ConsolidateOut):
    """What :meth:`DeltaMem.consolidate` did: the chains compiled (or, in a dry run, due) in
    ``consolidated``, and whether it was a dry run."""

    consolidated: list[Consolidation]  # type: ignore[assignment]  # the library's own items

    @classmethod
    def of(cls, done: Iterable[Consolidation] = (), *, dry_run: bool = False) -> Consolidations:
        return cls.model_construct(dry_run=dry_run, consolidated=list(done))


class NodeListing(api.NodeListOut):
    """What :meth:`DeltaMem.list_nodes` found: the rows (at most ``limit``) in ``nodes``, the
    ``total`` that matched before the limit, and whether the rows were cut (``truncated``)."""

    @classmethod
    def of(cls, rows: Sequence[api.NodeRowOut], limit: int | None = None) -> NodeListing:
        kept = list(rows if limit is None else rows[:limit])
        return cls.model_construct(nodes=kept, total=len(rows), truncated=len(kept) < len(rows))


class LearnResult(api.LearnOut):
    """Outcome of learning one episode: the answer model every face returns
    (:class:`deltamem.formats.api.LearnOut`; :class:`deltamem.Client` parses the same).

    ``episode`` is the logged episode's id (``episode_id`` too). ``task`` and ``env`` say what
    each tree did (:class:`TreeWrite`, with the engine's detail in the library).
    ``recalled``: the nodes the agent was handed (the ``recall`` passed to ``learn``) that
    counted the episode's outcome besides the nodes it was placed on.
    ``deferred``: nodes whose chains became due for consolidation but could not be compiled
    now (the model or the store failed); the episode itself is stored, and the chains stay due
    for the next success or ``consolidate()``. Do not learn the episode again.
    """

    task: TreeWrite
    env: TreeWrite
    consolidated: list[Consolidation]  # type: ignore[assignment]  # the library's own items

    @classmethod
    def of(cls, learning: Learning) -> LearnResult:
        """The answer model of one episode's learning (the engine's record of it)."""
        return cls.model_construct(**learn_fields(learning))

    @property
    def episode_id(self) -> str:
        """The logged episode's id (the answer's ``episode``)."""
        return self.episode


class BatchItem(LearnResult, api.BatchResultOut):
    """One episode of a batch: its :class:`LearnResult` and its place in the batch."""


class BatchResult(api.BatchOut):
    """Outcome of :meth:`DeltaMem.learn_many`: one result per episode, in order, and the total
    usage (the answer model every face returns; ``errors`` is always empty in the library)."""

    results: list[BatchItem]  # type: ignore[assignment]  # the library's own items

    @classmethod
    def of(cls, results: Sequence[LearnResult], usage: api.UsageOut | None = None
           ) -> BatchResult:
        """The batch of these results, in order; ``usage`` is the batch's total (the sum of
        the results' when None)."""
        total = usage if usage is not None else usage_sum(r.usage for r in results)
        return cls.model_construct(
            episodes=len(results), errors=[], usage=total,
            results=[BatchItem.model_construct(index=i, **dict(r))
                     for i, r in enumerate(results)])

    def placed(self, places: Sequence[tuple[int, int]],
               errors: Sequence[api.BatchErrorOut] = ()) -> api.BatchOut:
        """This batch as the CLI's ``learn FILE`` reports it: each result's place (its index
        among the file's episodes, and its line) and the bad lines it skipped."""
        results = [api.BatchResultOut.build(
            **{**dict(r), "index": places[i][0], "line": places[i][1]})
            for i, r in enumerate(self.results)]
        return api.BatchOut.build(episodes=self.episodes, results=results,
                                  errors=list(errors), usage=self.usage)


class OutcomeRecord(api.OutcomeOut):
    """What :meth:`DeltaMem.record_outcome` counted: the nodes bumped and any consolidation
    (``deferred``: due chains that could not be compiled now, as in :class:`LearnResult`); the
    answer model every face returns."""

    consolidated: list[Consolidation]  # type: ignore[assignment]  # the library's own items


def usage_wire(usage: Usage) -> api.UsageOut:
    return api.UsageOut.model_construct(**usage.to_dict())


def usage_sum(usages: Iterable[api.UsageOut]) -> api.UsageOut:
    """The total of several operations' usage."""
    total = Usage()
    for u in usages:
        total.add(Usage.of(u))
    return usage_wire(total)


def node_summary(node: Node) -> api.NodeStatsOut:
    """Counters and flags of a node, as ``show`` reports them."""
    return api.NodeStatsOut.build(
        hits=node.hits, successes=node.successes, failures=node.failures, depth=node.depth,
        consolidated=node.consolidated, consolidated_root=node.is_consolidated_root,
        lineage=list(node.lineage), episode=node.episode_id, created_at=node.created_at,
        key=node.key)


def node_row(node: Node) -> api.NodeRowOut:
    """One line of a node listing: identity, place in its tree, and counters
    (:class:`api.NodeRowOut`)."""
    return api.NodeRowOut.build(
        id=node.id, tree=node.tree.value, kind=node.kind.value, outcome=node.outcome.value,
        key=node.key, parent=node.parent_id, depth=node.depth, hits=node.hits,
        successes=node.successes, failures=node.failures,
        consolidated_root=node.is_consolidated_root)


def _fields(exp: Experience) -> dict[str, Any]:
    out = experience_to_dict(exp)
    out.pop("type")
    return out


def learn_fields(learning: Learning) -> dict[str, Any]:
    """The fields of a learning's answer (:class:`deltamem.formats.api.LearnOut`, also those of
    a batch's result)."""
    return {"episode": learning.episode_id, "task": TreeWrite.of(learning.task),
            "env": TreeWrite.of(learning.env), "recalled": list(learning.recalled),
            "consolidated": list(learning.consolidated), "deferred": list(learning.deferred),
            "usage": usage_wire(learning.usage)}


def patch_json(node: Node) -> list[list[Any]] | None:
    return None if node.patch is None else patch_to_json(node.patch)
