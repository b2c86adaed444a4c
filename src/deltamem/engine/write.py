"""The write path: extract -> place -> write, with the slow parts outside the write lock.

:class:`Writer` turns one episode into at most one node per tree:

1. **extract** (may call a model) against the chain the episode matched -- outside any lock;
2. **plan** the placement (``core.tree.choose_placement``: the candidate chains fetched in one
   call, diffed with the bounded diff of ``core.delta`` only while their lower bound can still
   win) -- outside the lock, from the reader's scan when it has one;
3. **write**, inside the space's write block: keep the plan when no node was added or deleted
   since before its scan (``Store.changes``, one cheap state read for both trees); else scan
   again, and if the candidates are still the ones the plan saw (same ids and scores: nodes are
   immutable apart from their counters, and a deleted candidate leaves the scan) keep the plan,
   else place again against the memory as it is now; then bump the matched node and add the
   new one.

So a concurrent writer never makes a placement stale, and the lock is held for a scan, at
worst one bounded placement, and the row writes.

Scopes: an episode whose meta carries scoping keys (``core.ranking.SCOPE_KEYS``: user, agent,
run, project) is placed like any other, but it never vanishes into a duplicate of another
scope's node, which a filter for its own scope would not find: it dedups onto a duplicate of
its own scope when there is one, else it is written as a delta with an empty patch under the
node it duplicates (a root when that node sits at the maximum depth), carrying its meta.
Unscoped recall still prefers the shallower original among the exact ties.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from deltamem._util.lazymod import module
from deltamem._util.usage import Usage
from deltamem.config import Settings
from deltamem.core.model import Episode, Experience, Node, NodeKind, Outcome, Tree
from deltamem.core.ranking import POOL, Candidate, matches, scope_of, trace_signature
from deltamem.core.slots import slots_of
from deltamem.core.tree import (
    Action,
    Placement,
    Placer,
    choose_placement,
    compose_chain,
    growth_chain,
)
from deltamem.engine.consolidate import new_node_id
from deltamem.engine.read import Reader, TreeRead
from deltamem.engine.working import TreeMatch, TreeWriting
from deltamem.extract.base import Extraction, Extractor, ExtractRequest
from deltamem.scenes.base import Scene
from deltamem.store.base import Store, Vector

if TYPE_CHECKING:
    from deltamem.engine import results
else:
    results = module("deltamem.engine.results")


@dataclass(slots=True)
class Plan:
    """A placement decided outside the lock, and the scan it was decided on."""

    scanned: list[tuple[str, float]]
    chain: list[Node] = field(default_factory=list)
    placement: Placement = field(default_factory=lambda: Placement(Action.ROOT))


class Writer:
    """Extracts, places and writes episodes into one space (see the module docstring)."""

    def __init__(self, store: Store, space: str, settings: Settings, extractor: Extractor,
                 reader: Reader, dim: int, *, scene: Scene | None = None):
        self.store = store
        self.space = space
        self.settings = settings
        self.extractor = extractor
        self.reader = reader
        self.dim = dim
        self.scene = scene  # handed to the extractor (scene facts); None: the extractor's own
        self.placer: Placer = choose_placement  # the placement rule (an experiment may swap it)

    # -- outside the lock -------------------------------------------------------------------
    def extract(self, episode: Episode, recall: TreeMatch, usage: Usage,
                read: TreeRead | None = None) -> Extraction:
        """What ``episode`` teaches ``recall.tree``, shown the chain it matched (``read``: the
        read behind ``recall``, when learning made it).

        With a model, an episode whose trajectory already wrote one of the best ties reuses that
        node's experience (an exact dedup) instead of calling the model again."""
        if self.extractor.uses_llm and recall.matched:
            twin = self.reader.same_trace(recall, trace_signature(episode, recall.tree), read)
            chain = self.store.chain(self.space, twin.id) if twin is not None else []
            if chain:
                usage.llm_calls_saved += 1
                return Extraction(compose_chain(chain),
                                  note="trace already stored; model call skipped")
        base = growth_chain(recall.chain, max_depth=self.settings.max_depth)
        matched = compose_chain(base) if base else None
        extraction = self.extractor.extract(ExtractRequest(episode, recall.tree, matched,
                                                           scene=self.scene))
        usage.add(extraction.usage)
        return extraction

    def plan(self, tree: Tree, key: str, query: Vector | None, experience: Experience,
             read: TreeRead | None = None, *,
             scope: dict[str, Any] | None = None) -> Plan | None:
        """Decide the placement against the memory as it is now (``read``: the reader's read
        of the tree, whose scan of the best :data:`POOL` and fetched nodes it reuses, saving a
        scan and a fetch; ``scope``: the episode's scoping keys, see the module docstring);
        ``None`` when the tree takes a root without looking (no key)."""
        if not key.strip() or query is None:
            return None
        if read is not None and read.scanned is not None:
            found = read.scanned
            chain, placement = self._place(tree, key, found, experience, scope or {},
                                           read.nodes, read.chains)
        else:
            found = self.reader.scan(tree, query, POOL)
            chain, placement = self._place(tree, key, found, experience, scope or {})
        return Plan([(c.id, c.score) for c in found], chain, placement)

    def _place(self, tree: Tree, key: str, found: list[Candidate],
               experience: Experience, scope: dict[str, Any] | None = None,
               have: dict[str, Node] | None = None,
               chains_of: dict[str, list[Node]] | None = None
               ) -> tuple[list[Node], Placement]:
        """The candidates are ``Reader.placement_candidates`` of ``found`` (``have``: nodes
        fetched already); their chains come in one call (or from ``chains_of``, a read's
        chains of the same scan) and ``core.tree.choose_placement`` decides."""
        ids, _ = self.reader.placement_candidates(tree, key, found, have)
        fetched = chains_of if chains_of is not None else self.store.chains(self.space, ids)
        chains = [fetched[i] for i in ids if i in fetched]
        placement, index = self.placer(experience, chains, max_depth=self.settings.max_depth)
        chain = chains[index] if index is not None else []
        if scope and placement.action is Action.DEDUP:
            return self._in_scope(experience, chains, chain, placement, scope)
        return chain, placement

    def _in_scope(self, experience: Experience, chains: list[list[Node]], chain: list[Node],
                  placement: Placement, scope: dict[str, Any]) -> tuple[list[Node], Placement]:
        """A dedup kept in the episode's scope (see the module docstring)."""
        at = [n.id for n in chain].index(placement.anchor) if placement.anchor in \
            {n.id for n in chain} else None
        if at is None or matches(chain[at], scope):
            return chain, placement
        anchor = chain[at]
        mine = [c for c in chains if matches(c[-1], scope)]
        if mine:
            again, index = self.placer(experience, mine, max_depth=self.settings.max_depth)
            if again.action is Action.DEDUP and index is not None and any(
                    n.id == again.anchor and matches(n, scope) for n in mine[index]):
                return mine[index], again
        if anchor.depth >= self.settings.max_depth:
            return [], Placement(Action.ROOT)
        return chain[: at + 1], Placement(Action.DELTA, anchor=anchor.id,
                                          depth=anchor.depth + 1, patch=())

    # -- inside the lock --------------------------------------------------------------------
    def write_tree(self, tree: Tree, key: str, query: Vector | None, extraction: Extraction,
                   episode: Episode, episode_id: str, plan: Plan | None, *,
                   unchanged: bool = False) -> TreeWriting:
        """Place (keeping ``plan`` when the memory did not change under it: ``unchanged`` says
        no node was added or deleted since before the plan's scan) and write."""
        outcome = episode.outcome if tree is Tree.TASK else Outcome.SUCCESS
        if plan is not None and unchanged:
            chain, placement = plan.chain, plan.placement
        else:
            chain, placement = self._placement(tree, key, query, extraction.experience, plan,
                                               scope_of(episode.meta))
        hit = None
        if placement.action is not Action.ROOT:
            # The node the episode was placed on: the one it duplicates, or the end of the chain
            # it extends (the matched node, also when the delta went in as its sibling).
            hit = placement.anchor if placement.action is Action.DEDUP else chain[-1].id
            assert hit is not None
            self.store.bump(self.space, hit, hits=1, successes=int(episode.success),
                            failures=int(not episode.success))
        if placement.action is Action.DEDUP:
            return TreeWriting(Action.DEDUP, placement.anchor, None, note=extraction.note,
                             experience=extraction.experience, matched=hit)
        node = self._new_node(tree, key, outcome, placement, extraction.experience, episode,
                              episode_id)
        self.store.add_node(self.space, node, query if query is not None else self._zero())
        return TreeWriting(placement.action, node.id, node.parent_id, len(placement.patch),
                         extraction.note, extraction.experience, matched=hit)

    def _placement(self, tree: Tree, key: str, query: Vector | None, experience: Experience,
                   plan: Plan | None, scope: dict[str, Any]) -> tuple[list[Node], Placement]:
        if not key.strip() or query is None:
            return [], Placement(Action.ROOT)
        found = self.reader.scan(tree, query, POOL)
        if plan is not None and plan.scanned == [(c.id, c.score) for c in found]:
            return plan.chain, plan.placement
        return self._place(tree, key, found, experience, scope)

    def count_recalled(self, recall: results.Recall, writes: dict[Tree, TreeWriting],
                       success: bool) -> list[str]:
        """Count the episode's outcome on the nodes the agent was handed (the match of each
        tree) unless the episode was placed on that same node (``write_tree`` counted it
        there), so that a skill followed in failed episodes carries them in its record.
        Returns the ids."""
        handed = [(tree, node) for tree, node in ((Tree.TASK, recall.task.node),
                                                  (Tree.ENV, recall.env.node))
                  if node is not None and node != writes[tree].matched]
        present = self.store.get_nodes(self.space, [i for _, i in handed]) if handed else {}
        counted = []
        for _, node_id in handed:
            if node_id not in present:  # deleted since the recall
                continue
            self.store.bump(self.space, node_id, hits=1, successes=int(success),
                            failures=int(not success))
            counted.append(node_id)
        return counted

    def _new_node(self, tree: Tree, key: str, outcome: Outcome, placement: Placement,
                  experience: Experience, episode: Episode, episode_id: str) -> Node:
        is_root = placement.action is Action.ROOT
        return Node(
            id=new_node_id(tree), tree=tree,
            kind=NodeKind.ROOT if is_root else NodeKind.DELTA, outcome=outcome, key=key,
            parent_id=placement.anchor, depth=placement.depth,
            content=experience if is_root else None,
            patch=None if is_root else placement.patch,
            episode_id=episode_id, created_at=time.time(),
            meta={"trace": trace_signature(episode, tree),
                  **self._layout_meta(tree, episode.env), **_slot_meta(tree, key, episode),
                  **_user_meta(episode)},
        )

    def _layout_meta(self, tree: Tree, env: str) -> dict[str, Any]:
        """A skill remembers the layout of the scene it was learned in (ties in recall)."""
        layout = self.reader.signature(env) if tree is Tree.TASK else ""
        return {"layout": layout} if layout else {}

    def _zero(self) -> Vector:
        return np.zeros(self.dim, dtype=np.float32)


def _slot_meta(tree: Tree, key: str, episode: Episode) -> dict[str, Any]:
    """A skill or lesson remembers which words of its key name what its episode acted on
    (``core.slots.slots_of``): recall reads the query's template by them."""
    found = slots_of(key, [step.action for step in episode.steps]) if tree is Tree.TASK else ()
    return {"slots": list(found)} if found else {}


def _user_meta(episode: Episode) -> dict[str, Any]:
    return {"episode_meta": episode.meta} if episode.meta else {}

