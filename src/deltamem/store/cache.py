"""What both SQL backends share around their exact per-process indexes.

Each process keeps one :class:`TreeIndex` per (space, tree), caught up with committed rows
before every scan. :class:`IndexCache` bounds how many it keeps (least recently scanned go
first; they are rebuilt from the database when scanned again), so a server that touches many
spaces does not grow without bound.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

from deltamem.core.model import Node
from deltamem.store.base import Candidate
from deltamem.store.index import VectorIndex

MAX_INDEXES = 256  # (space, tree) indexes kept per store


class TreeIndex(VectorIndex):
    """Committed rows of one (space, tree) as of ``generation`` (bumped by every deletion), read
    up to ``position`` (the store's commit order: SQLite ``seq``, PostgreSQL ``revision``)."""

    def __init__(self, dim: int, generation: int = 0):
        super().__init__(dim)
        self.generation = generation
        self.position = 0
        self.saved = 0  # rows held by the last snapshot written or loaded (store/snapshot.py)


class IndexCache:
    """At most ``size`` indexes, least recently used evicted first (not thread-safe)."""

    def __init__(self, size: int = MAX_INDEXES):
        self.size = size
        self._items: OrderedDict[tuple[str, str], TreeIndex] = OrderedDict()

    def get(self, key: tuple[str, str]) -> TreeIndex | None:
        index = self._items.get(key)
        if index is not None:
            self._items.move_to_end(key)
        return index

    def put(self, key: tuple[str, str], index: TreeIndex) -> TreeIndex:
        self._items[key] = index
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)
        return index

    def values(self) -> list[TreeIndex]:
        return list(self._items.values())

    def __len__(self) -> int:
        return len(self._items)


def merge(own: list[Candidate], committed: list[Candidate], k: int) -> list[Candidate]:
    """Best ``k`` of both lists under the scan order (score, then shallower, then newer).

    Each list is already in that order, and every node of ``own`` (a write block's uncommitted
    nodes) is newer than every committed node, so a stable sort that puts ``own`` first among
    exact (score, depth) ties is exact.
    """
    both = [(c, 0) for c in own] + [(c, 1) for c in committed]
    both.sort(key=lambda item: (-item[0].score, item[0].depth, item[1]))
    return [c for c, _ in both[:k]]


MAX_NODES = 4096  # decoded nodes kept per store (NodeCache)


class NodeCache:
    """Decoded nodes by (space, id), each with the row it was decoded from (but for its
    counters), at most ``size``, least recently used evicted first (thread-safe; ``size`` 0
    turns it off). A cached node is only reused for a row equal to its own, with that row's
    counters (``SQLStore._nodes``), so no change made anywhere can make it stale. ``epoch``
    counts the clears; :meth:`put` refuses nodes read before the latest one.
    """

    def __init__(self, size: int = MAX_NODES):
        self.size = size
        self.epoch = 0
        self._items: OrderedDict[tuple[str, str], tuple[Any, Node]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, space: str, node_id: str) -> tuple[Any, Node] | None:
        with self._lock:
            item = self._items.get((space, node_id))
            if item is not None:
                self._items.move_to_end((space, node_id))
            return item

    def put(self, space: str, nodes: Iterable[tuple[Any, Node]], epoch: int) -> None:
        if self.size <= 0:
            return
        with self._lock:
            if epoch != self.epoch:
                return
            for row, node in nodes:
                self._items[(space, node.id)] = (row, node)
                self._items.move_to_end((space, node.id))
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def discard(self, space: str, node_id: str) -> None:
        with self._lock:
            self._items.pop((space, node_id), None)
            self.epoch += 1

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.epoch += 1

    def __len__(self) -> int:
        return len(self._items)
