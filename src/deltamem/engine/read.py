"""The read path: scan -> batch fetch -> ``core.ranking`` -> chain -> compose (no rendering).

:class:`Reader` answers what one tree holds for one key, for :meth:`DeltaMem.recall` (which
renders the answer) and for learning (which keeps the candidates and chains and renders
nothing). It makes a bounded number of store calls per tree: one scan per round, one or two
``get_nodes`` per round, one ``chain`` and one ``vectors`` for the match.

With metadata ``filters`` (``core.ranking.matches``) a read ranks only the matching nodes, and
exactly: each round scans ``k``, reads the stored meta of the candidates it has not seen
(``Store.metas``, one call), keeps the matching ones (whose nodes it fetches), and widens the
scan ×4 until it holds enough of them (as many as an unfiltered read of a tree
holding only those nodes would scan) or the tree is exhausted. The filter applies to the
matched node; its chain is composed as usual, whatever episodes wrote the ancestors.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from deltamem.config import Settings
from deltamem.core import ranking
from deltamem.core.model import Node, Tree
from deltamem.core.ranking import POOL, Candidate, FilterValue
from deltamem.core.scoring import accepts
from deltamem.core.tree import compose_chain
from deltamem.engine.results import ChainLink, TreeRecall, cosine
from deltamem.store.base import Store, Vector

_R = TypeVar("_R")


@dataclass(slots=True)
class TreeRead:
    """One tree's recall plus what learning reuses: the scan of the best :data:`POOL` nodes
    (``None`` when the recall scanned another number) and the nodes fetched for ranking."""

    recall: TreeRecall
    scanned: list[Candidate] | None = None
    nodes: dict[str, Node] = field(default_factory=dict)
    ranked: list[Candidate] | None = None  # the task tree's ranking, before the top k


class Reader:
    """Ranks one space's trees for a query (see the module docstring).

    ``signature`` maps a scene text to its layout (knowledge of one layout is never recalled
    for another; skills learned in the agent's layout win exact ties).
    """

    def __init__(self, store: Store, space: str, settings: Settings,
                 signature: Callable[[str], str]):
        self.store = store
        self.space = space
        self.settings = settings
        self.signature = signature

    def tree(self, tree: Tree, key: str, query: Vector, k: int, *, scene: str = "",
             filters: dict[str, FilterValue] | None = None) -> TreeRead:
        """What ``tree`` recalls for ``key`` (``scene``: the agent's scene, for task ties;
        ``filters``: only nodes whose episode meta matches, see the module docstring)."""
        threshold = self.settings.threshold(tree)
        result = TreeRecall(tree, key, threshold, self.settings.penalty, query=query)
        read = TreeRead(result)
        if not key.strip():
            return read
        if filters:
            ranked, read.nodes = self.filtered(tree, key, query, max(k, 1), filters, scene)
        elif tree is Tree.ENV:
            found = self.scan(tree, query, max(k, POOL))
            read.scanned = found if len(found) < POOL or max(k, POOL) == POOL else None
            ranked, read.nodes = self.same_scene(key, found, limit=max(k, 1))
        else:
            ranked, read.nodes, read.scanned = self.task_ranked(query, max(k, 1))
            read.ranked = ranked
            ties = ranking.best_ties(ranked)
            read.nodes = self.nodes_of(ties, read.nodes)
            ranked = ranking.started_here(ranked, read.nodes, self.signature(scene))
        result.candidates = ranked[: max(k, 1)]
        result.best = result.candidates[0] if result.candidates else None
        if result.best is None or not accepts(result.best.score, threshold):
            return read
        result.chain = self.store.chain(self.space, result.best.id)
        if not result.chain:  # deleted by another writer since the scan: nothing matched
            result.best = None
            return read
        result.experience = compose_chain(result.chain)
        vectors = self.store.vectors(self.space, [n.id for n in result.chain])
        result.links = [self.link(node, query, vectors.get(node.id)) for node in result.chain]
        return read

    def filtered(self, tree: Tree, key: str, query: Vector, need: int,
                 filters: dict[str, FilterValue], scene: str
                 ) -> tuple[list[Candidate], dict[str, Node]]:
        """The ranking of the nodes that match ``filters``, exactly as an unfiltered read of
        a tree holding only them would rank them, with the matching nodes fetched.

        Environment tree: the best ``max(need, POOL)`` matching candidates (what that read
        scans), then ``core.ranking.same_scene``. Task tree: ``core.ranking.task_ranked`` over
        the matching candidates, widening while it asks to, then the layout's ties first."""
        want = max(need, POOL) if tree is Tree.ENV else need
        k = max(need, POOL)
        metas: dict[str, dict[str, Any]] = {}
        nodes: dict[str, Node] = {}
        while True:
            found = self.scan(tree, query, k)
            unseen = [c.id for c in found if c.id not in metas]
            if unseen:
                metas.update(self.store.metas(self.space, unseen))
            kept = ranking.matching(found, metas, filters)
            exhausted = len(found) < k
            if len(kept) >= want or exhausted:
                if tree is Tree.ENV:
                    kept = kept[:want]
                    nodes = self.nodes_of(kept, nodes)
                    scene_kept = ranking.same_scene(kept, nodes, self.signature(key),
                                                    self.signature, limit=need)
                    assert scene_kept is not None  # every node was fetched
                    return scene_kept, nodes
                nodes = self.nodes_of(kept, nodes)
                ranked = ranking.task_ranked(kept, nodes, need, self.settings.penalty,
                                             exhausted=exhausted)
                if ranked.candidates is not None:
                    return ranking.started_here(ranked.candidates, nodes,
                                                self.signature(scene)), nodes
            k *= 4

    def scan(self, tree: Tree, query: Vector, k: int) -> list[Candidate]:
        return self.store.scan(self.space, tree, query, penalty=self.settings.penalty, k=k,
                               approximate_from=self.settings.ann_from)

    def task_ranked(self, query: Vector, need: int
                    ) -> tuple[list[Candidate], dict[str, Node], list[Candidate] | None]:
        """Task-tree candidates best first, discredited skills scored as failures
        (``core.ranking.task_ranked``), with the nodes fetched for them and the first scan when
        it was of :data:`POOL` nodes: per round one scan and at most two batch fetches, the
        scan widened ×4 until the answer is exact."""
        k = max(need, POOL)
        first: list[Candidate] | None = None
        while True:
            found = self.scan(Tree.TASK, query, k)
            if k == POOL:
                first = found
            rule = partial(ranking.task_ranked, found, need=need, penalty=self.settings.penalty,
                           exhausted=len(found) < k)
            ranked, nodes = self.fetching(found, ranking.first_round(found, need), rule)
            if ranked.candidates is not None:
                return ranked.candidates, nodes, first
            k *= 4

    def same_scene(self, key: str, found: list[Candidate], limit: int | None = None
                   ) -> tuple[list[Candidate], dict[str, Node]]:
        """Environment candidates of ``key``'s layout, newest first among ties
        (``core.ranking.same_scene``), with the nodes fetched in one or two batch calls."""
        layout = self.signature(key)
        first = len(found) if limit is None else ranking.first_round(found, limit)
        kept, nodes = self.fetching(found, first, partial(
            ranking.same_scene, found, layout=layout, signature=self.signature, limit=limit))
        assert kept is not None  # every node was fetched by the second call
        return kept, nodes

    def fetching(self, found: Sequence[Candidate], first: int,
                 rule: Callable[..., _R]) -> tuple[_R, dict[str, Node]]:
        """Run a ranking ``rule(nodes, fetched=n)`` over ``found`` with the nodes of its first
        ``first`` candidates fetched in one call, then (if it asks for more) the rest in one
        more call."""
        nodes = self.store.get_nodes(self.space, [c.id for c in found[:first]])
        answer = rule(nodes, fetched=first)
        if _asks_more(answer) and first < len(found):
            nodes.update(self.store.get_nodes(self.space, [c.id for c in found[first:]]))
            answer = rule(nodes, fetched=len(found))
        return answer, nodes

    def nodes_of(self, candidates: Sequence[Candidate], have: dict[str, Node]
                 ) -> dict[str, Node]:
        """``have`` completed with the nodes of ``candidates`` it lacks (one call, or none)."""
        missing = [c.id for c in candidates if c.id not in have]
        return {**have, **self.store.get_nodes(self.space, missing)} if missing else have

    def same_trace(self, recall: TreeRecall, signature: str,
                   read: TreeRead | None = None) -> Node | None:
        """A node written by an identical trajectory, among the exact ties of the best match
        (in the task tree's ranking; in the environment tree's scan). ``read``: the read that
        produced ``recall``, whose ranking or scan saves scanning again."""
        if recall.query is None or recall.best is None:
            return None
        if recall.tree is Tree.TASK:
            if read is not None and read.ranked is not None:
                found, nodes = read.ranked, read.nodes
            else:
                found, nodes, _ = self.task_ranked(recall.query, 1)
        elif read is not None and read.scanned is not None:
            found, nodes = read.scanned, read.nodes
        else:
            found, nodes = self.scan(recall.tree, recall.query, POOL), {}
        ties = [c for c in ranking.best_ties(found) if c.score == recall.best.score]
        nodes = self.nodes_of(ties, nodes)
        for candidate in ties:
            node = nodes.get(candidate.id)
            if node is not None and node.meta.get("trace") == signature:
                return node
        return None

    def link(self, node: Node, query: Vector, vector: Vector | None) -> ChainLink:
        link = ranking.link(node, cosine(query, vector) if vector is not None else None,
                            self.settings.penalty)
        return ChainLink(node.id, node.kind.value, node.outcome.value, link.similarity,
                         link.score)


def _asks_more(answer: object) -> bool:
    """Whether a ranking rule's answer asks for the nodes of more candidates."""
    return answer is None or (isinstance(answer, ranking.Ranked) and answer.fetch_more)
