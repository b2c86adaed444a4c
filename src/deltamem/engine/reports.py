"""Read-only views of a memory: ``stats`` and ``show``, as their answer models."""

from __future__ import annotations

from typing import TYPE_CHECKING

from deltamem._util.lazymod import module
from deltamem.core.delta import patch_chars
from deltamem.core.model import Node, Outcome, Tree, experience_chars, experience_to_dict
from deltamem.core.tree import compose_chain
from deltamem.store.base import Store

if TYPE_CHECKING:
    from deltamem.engine import results
    from deltamem.formats import api
else:
    results = module("deltamem.engine.results")
    api = module("deltamem.formats.api")


def node_chars(node: Node) -> int:
    """What a node stores, in serialised JSON characters: its content or its patch."""
    if node.content is not None:
        return experience_chars(node.content)
    return patch_chars(node.patch or ())


def stats(store: Store, space: str) -> api.StatsOut:
    """Tree shapes, episode count, and stored vs flat size.

    ``stored_chars`` is what the store keeps live for recall (``Store.footprint``): the stored
    JSON of roots' contents and deltas' patches, where steps and facts kept once per space
    appear as their numbers, plus those texts once (``texts``); ``flat_chars`` is what a
    one-record-per-episode memory would hold for the same episodes (each episode's own
    extracted experiences, without knowledge merged in from the matched chain). Consolidated
    roots count as stored.
    """
    per_tree: dict[str, api.TreeStatsOut] = {}
    footprint = store.footprint(space)
    for tree in Tree:
        nodes = list(store.nodes(space, tree))
        depths = [n.depth for n in nodes]
        per_tree[tree.value] = api.TreeStatsOut.build(
            nodes=len(nodes),
            roots=sum(n.is_root for n in nodes),
            deltas=sum(not n.is_root for n in nodes),
            failures=sum(n.outcome is Outcome.FAILURE for n in nodes),
            consolidated_roots=sum(n.is_consolidated_root for n in nodes),
            max_depth=max(depths, default=0),
            by_depth={str(d): depths.count(d) for d in sorted(set(depths))},
            stored_chars=footprint.task if tree is Tree.TASK else footprint.env,
        )
    flat = sum(e.flat_chars for e in store.episodes(space))
    stored = footprint.total
    return api.StatsOut.build(
        **per_tree,
        episodes=store.count_episodes(space),
        texts=api.TextsStatsOut.build(count=footprint.text_count, chars=footprint.texts),
        stored_chars=stored,
        flat_chars=flat,
        compression=round(stored / flat, 4) if flat else None,
    )


def show(store: Store, space: str, node_id: str) -> api.ShowOut | None:
    """A node with its chain, composed experience, own patch and counters (None if absent)."""
    chain = store.chain(space, node_id)
    if not chain:
        return None
    node = chain[-1]
    return api.ShowOut.build(
        id=node.id,
        tree=node.tree.value,
        kind=node.kind.value,
        outcome=node.outcome.value,
        parent=node.parent_id,
        chain=[n.id for n in chain],
        experience=experience_to_dict(compose_chain(chain)),
        patch=results.patch_json(node),
        children=[c.id for c in store.children(space, node.id)],
        stats=results.node_summary(node),
        meta=node.meta,
    )

