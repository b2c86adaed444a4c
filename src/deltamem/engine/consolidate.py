"""Consolidation: compiling a chain that earned it into a new root (``core.tree`` decides when).

The compile step may call a model, so it runs outside any write block; the write is one short
block that re-checks the chain first, adds the new root and retires what it replaces
(``core.tree.retirement``, ``Store.retire``): the compiled node and the ancestors left without
another child leave the live tree for the audit log's history, and the compiled node's
children move under the new root.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from deltamem._util.lazymod import module
from deltamem._util.usage import Usage
from deltamem.config import Settings
from deltamem.core.model import Experience, Node, NodeKind, Outcome, Tree
from deltamem.core.ranking import carried_meta
from deltamem.core.tree import (
    compose_chain,
    consolidation_meta,
    due_for_consolidation,
    retirement,
)
from deltamem.errors import DeltaMemError
from deltamem.extract.base import Extractor
from deltamem.store.base import Store

if TYPE_CHECKING:
    from deltamem.engine import results
else:
    results = module("deltamem.engine.results")


class Consolidator:
    """Compiles due chains of one space; ``writing()`` is the owner's write block."""

    def __init__(self, store: Store, space: str, settings: Settings, extractor: Extractor,
                 writing: Callable[[], AbstractContextManager[None]]):
        self.store = store
        self.space = space
        self.settings = settings
        self.extractor = extractor
        self.writing = writing

    def due(self) -> Iterator[Node]:
        """The nodes whose chains are due for consolidation, oldest first."""
        return (node for node in self.store.nodes(self.space)
                if due_for_consolidation(node, self.settings.k_cons))

    def if_due(self, node_id: str, usage: Usage) -> list[results.Consolidation]:
        """Compile ``node_id``'s chain if it is due (nothing otherwise)."""
        node = self.store.get_node(self.space, node_id)
        if node is None or not due_for_consolidation(node, self.settings.k_cons):
            return []
        chain = self.store.chain(self.space, node.id)
        vector = self.store.vector(self.space, node.id)
        if not chain or vector is None:  # another writer retired (or deleted) it meanwhile
            return []
        compiled = self.extractor.compile(node.tree, compose_chain(chain))
        usage.add(compiled.usage)
        root = new_root(node.tree, node.key, compiled.experience,
                        {**consolidation_meta(chain), "note": compiled.note,
                         **carried_meta(node)},
                        lineage=tuple(n.id for n in chain))
        with self.writing():
            fresh = self.store.chain(self.space, node.id)
            if [n.id for n in fresh] != [n.id for n in chain] or fresh[-1].consolidated:
                return []  # another writer got there first, or changed the chain
            scope = carried_meta(node)
            plan = retirement(fresh, self._around(fresh), root,
                              replaces=lambda n: carried_meta(n) == scope)
            self.store.add_node(self.space, root, vector)
            self.store.retire(self.space, root.id, plan.retired, plan.moved)
        return [results.Consolidation.of(node.id, root.id, node.tree, root.lineage, compiled.note)]

    def _around(self, chain: list[Node]) -> list[Node]:
        """What :func:`~deltamem.core.tree.retirement` reads of the tree: the chain, the
        children of its ancestors (a branch keeps an ancestor live) and the compiled node's
        subtree (it moves up), not the whole tree."""
        near = {n.id: n for n in chain}
        for ancestor in chain[:-1]:
            near.update((c.id, c) for c in self.store.children(self.space, ancestor.id))
        todo = [chain[-1]]
        while todo:
            parent = todo.pop()
            below = [c for c in self.store.children(self.space, parent.id)
                     if c.depth > parent.depth and c.id not in near]  # a damaged cycle ends
            near.update((c.id, c) for c in below)
            todo += below
        return list(near.values())

    def after_write(self, node_ids: list[str], usage: Usage
                    ) -> tuple[list[results.Consolidation], list[str]]:
        """Consolidate what became due after an acknowledged write: ``(done, deferred)``.

        A failure here (the model fails, the store is busy) never undoes nor fails the write
        that made the chain due: the chain stays due, is listed in ``deferred``, and the next
        success on it or ``consolidate()`` compiles it.
        """
        done: list[results.Consolidation] = []
        deferred: list[str] = []
        for node_id in dict.fromkeys(node_ids):
            try:
                done += self.if_due(node_id, usage)
            except DeltaMemError:
                deferred.append(node_id)
        return done, deferred


def new_node_id(tree: Tree) -> str:
    import secrets

    return ("t-" if tree is Tree.TASK else "e-") + secrets.token_hex(8)


def new_root(tree: Tree, key: str, content: Experience, meta: dict[str, Any], *,
             lineage: tuple[str, ...] = ()) -> Node:
    return Node(id=new_node_id(tree), tree=tree, kind=NodeKind.ROOT, outcome=Outcome.SUCCESS,
                key=key, content=content, lineage=lineage, created_at=time.time(), meta=meta)
