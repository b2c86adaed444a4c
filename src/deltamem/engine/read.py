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
from functools import lru_cache, partial
from typing import Any, TypeVar

from deltamem.config import Settings
from deltamem.core import ranking
from deltamem.core.knowledge import SCENE_OVERLAP
from deltamem.core.model import Node, Tree
from deltamem.core.ranking import POOL, Candidate, FilterValue
from deltamem.core.scoring import accepts
from deltamem.core.tree import compose_chain
from deltamem.engine.results import ChainLink, TreeRecall, cosine
from deltamem.scenes.base import contents_of
from deltamem.store.base import Store, Vector

_R = TypeVar("_R")
SIGNATURES = 8192  # scene signatures remembered per reader


@dataclass(slots=True)
class TreeRead:
    """One tree's recall plus what learning reuses: the scan of the best :data:`POOL` nodes
    (``None`` when the recall scanned another number) and the nodes fetched for ranking."""

    recall: TreeRecall
    scanned: list[Candidate] | None = None
    nodes: dict[str, Node] = field(default_factory=dict)
    ranked: list[Candidate] | None = None  # the task tree's ranking, before the top k
    # A read for learning: the chains of the scan's placement candidates (``placing``), fetched
    # with the match's own chain in one call.
    chains: dict[str, list[Node]] | None = None


class Reader:
    """Ranks one space's trees for a query (see the module docstring).

    ``signature`` maps a scene text to its layout (knowledge of one layout is never recalled
    for another; skills learned in the agent's layout win exact ties). ``contents`` maps it to
    the entity types it shows (``scenes.base.contents_of``): knowledge of scenes whose contents
    overlap by ``scene_overlap`` is shared across layouts (``core.ranking.same_scene``).
    """

    def __init__(self, store: Store, space: str, settings: Settings,
                 signature: Callable[[str], str],
                 contents: Callable[[str], frozenset[str]] | None = None):
        self.store = store
        self.space = space
        self.settings = settings
        # A scene's signature is a function of its text: each node key's is computed once per
        # process, not once per candidate per read (a learn reads both trees twice).
        self.signature = lru_cache(maxsize=SIGNATURES)(signature)
        self.contents = lru_cache(maxsize=SIGNATURES)(contents or contents_of(None))
        self.scene_overlap = SCENE_OVERLAP
        self.kind_weight = ranking.KIND_WEIGHT

    def tree(self, tree: Tree, key: str, query: Vector, k: int, *, scene: str = "",
             filters: dict[str, FilterValue] | None = None, placing: bool = False) -> TreeRead:
        """What ``tree`` recalls for ``key`` (``scene``: the agent's scene, for task ties;
        ``filters``: only nodes whose episode meta matches, see the module docstring).

        ``placing``: a read for learning, which places the episode against the same scan: the
        placement candidates' chains (:meth:`placement_candidates`) come with the match's in one
        call (``TreeRead.chains``), and no link similarities are computed."""
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
            ranked, read.nodes = self.kind_first(key, ranked, read.nodes, threshold)
            ties = ranking.best_ties(ranked)
            read.nodes = self.nodes_of(ties, read.nodes)
            ranked = ranking.started_here(ranked, read.nodes, self.signature(scene))
        result.candidates = ranked[: max(k, 1)]
        result.best = result.candidates[0] if result.candidates else None
        accepted = result.best is not None and accepts(result.best.score, threshold)
        if placing and read.scanned is not None:
            ids, read.nodes = self.placement_candidates(tree, key, read.scanned, read.nodes)
            read.chains = self.store.chains(self.space, ids + (
                [result.best.id] if result.best is not None and accepted else []))
        if result.best is None or not accepted:
            return read
        result.chain = read.chains.get(result.best.id, []) if read.chains is not None else \
            self.store.chain(self.space, result.best.id)
        if not result.chain:  # deleted by another writer since the scan: nothing matched
            result.best = None
            return read
        result.experience = compose_chain(result.chain)
        if placing:
            return read
        vectors = self.store.vectors(self.space, [n.id for n in result.chain])
        result.links = [self.link(node, query, vectors.get(node.id)) for node in result.chain]
        return read

    def placement_candidates(self, tree: Tree, key: str, found: list[Candidate],
                             have: dict[str, Node] | None = None
                             ) -> tuple[list[str], dict[str, Node]]:
        """The ids of the scanned nodes an episode keyed ``key`` is placed against, best first:
        those that clear the tree's threshold (in the environment tree, only scenes of the same
        layout), with the nodes fetched for the layout (``have``: fetched already).

        The threshold comes first: the layout filter keeps the order of what it keeps (it
        reorders only exact ties, which the threshold keeps or drops together), so only the
        nodes of candidates that clear it are fetched."""
        threshold = self.settings.threshold(tree)
        found = [c for c in found if accepts(c.score, threshold)]
        nodes = dict(have or {})
        if tree is Tree.ENV:
            found, nodes = self.same_scene(key, found, have=nodes)
        return [c.id for c in found], nodes

    def kind_first(self, key: str, ranked: list[Candidate], nodes: dict[str, Node],
                   threshold: float) -> tuple[list[Candidate], dict[str, Node]]:
        """``core.ranking.kind_first`` over the first :data:`POOL` ranked task candidates (the
        scan, discredited skills re-scored; a filtered read: of the matching ones), with the
        nodes of those that clear the threshold fetched in one call at most."""
        pool = ranked[:POOL]
        accepted = [c for c in pool if accepts(c.score, threshold)]
        if self.kind_weight <= 0 or len(accepted) < 2:
            return ranked, nodes
        nodes = self.nodes_of(accepted, nodes)
        order = ranking.kind_first(pool, nodes, key, threshold, self.kind_weight)
        return [*order, *ranked[POOL:]], nodes

    def filtered(self, tree: Tree, key: str, query: Vector, need: int,
                 filters: dict[str, FilterValue], scene: str
                 ) -> tuple[list[Candidate], dict[str, Node]]:
        """The ranking of the nodes that match ``filters``, exactly as an unfiltered read of
        a tree holding only them would rank them, with the matching nodes fetched.

        Both trees gather the best ``max(need, POOL)`` matching candidates (what that read
        scans). Environment tree: then ``core.ranking.same_scene``. Task tree:
        ``core.ranking.task_ranked`` over the matching candidates, widening while it asks to,
        then the salient-word rule (``kind_first``) and the layout's ties first."""
        # Both trees rank the best POOL matching candidates, as an unfiltered read of those
        # nodes scans POOL: the environment tree keeps its layout's, the task tree learns its
        # word salience from them (``kind_first``).
        want = k = max(need, POOL)
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
                                                    self.signature, limit=need,
                                                    **self._by_contents(key))
                    assert scene_kept is not None  # every node was fetched
                    return scene_kept, nodes
                nodes = self.nodes_of(kept, nodes)
                ranked = ranking.task_ranked(kept, nodes, need, self.settings.penalty,
                                             exhausted=exhausted)
                if ranked.candidates is not None:
                    order, nodes = self.kind_first(key, ranked.candidates, nodes,
                                                   self.settings.threshold(tree))
                    return ranking.started_here(order, nodes, self.signature(scene)), nodes
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

    def same_scene(self, key: str, found: list[Candidate], limit: int | None = None, *,
                   have: dict[str, Node] | None = None
                   ) -> tuple[list[Candidate], dict[str, Node]]:
        """Environment candidates of ``key``'s layout, newest first among ties
        (``core.ranking.same_scene``), with the nodes fetched in one or two batch calls
        (``have``: nodes fetched already, not fetched again)."""
        layout = self.signature(key)
        first = len(found) if limit is None else ranking.first_round(found, limit)
        kept, nodes = self.fetching(found, first, partial(
            ranking.same_scene, found, layout=layout, signature=self.signature, limit=limit,
            **self._by_contents(key)), have)
        assert kept is not None  # every node was fetched by the second call
        return kept, nodes

    def _by_contents(self, key: str) -> dict[str, Any]:
        """``core.ranking.same_scene``'s arguments for matching ``key``'s scene by contents."""
        return {"contents": self.contents, "mine": self.contents(key),
                "overlap": self.scene_overlap, "threshold": self.settings.threshold(Tree.ENV)}

    def fetching(self, found: Sequence[Candidate], first: int,
                 rule: Callable[..., _R], have: dict[str, Node] | None = None
                 ) -> tuple[_R, dict[str, Node]]:
        """Run a ranking ``rule(nodes, fetched=n)`` over ``found`` with the nodes of its first
        ``first`` candidates fetched in one call, then (if it asks for more) the rest in one
        more call; nodes in ``have`` are not fetched again."""
        nodes = self.nodes_of(found[:first], dict(have or {}))
        answer = rule(nodes, fetched=first)
        if _asks_more(answer) and first < len(found):
            nodes = self.nodes_of(found[first:], nodes)
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
