"""Copy whole spaces from one store to another (SQLite <-> PostgreSQL, or any two stores).

The copy goes through the export format (:mod:`deltamem.transfer`), so it is exact to the bit:
node ids, patches, counters, timestamps, vectors and episodes arrive unchanged, in insertion
order, and exporting the destination gives the same records as exporting the source. Each space
is copied in one destination transaction (all of it or none of it). The audit log of deletions
is not copied: it describes the source's history, not the memory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import cast

from deltamem.core.model import Node, Tree
from deltamem.errors import ConfigError, StoreError
from deltamem.store import open_store
from deltamem.store.base import EpisodeRecord, SpaceInfo, Store, Vector
from deltamem.transfer import export_records, import_records


def migrate(src_url: str, dst_url: str, *, space: str | None = None) -> dict[str, dict[str, int]]:
    """Copy ``space`` (default: every space) from the store at ``src_url`` to ``dst_url``.

    Args:
        src_url: where to read, e.g. ``sqlite:mem.db`` or ``postgresql://...``.
        dst_url: where to write; each copied space must be empty there.
        space: copy only this space.

    Returns:
        ``{space: {"nodes": n, "episodes": m}}`` for every space copied.

    Raises:
        ConfigError: ``space`` does not exist in the source, or both URLs are the same.
        StoreError: a destination space already holds nodes or episodes.
        EmbedderMismatch: a destination space exists with another embedder.
    """
    if src_url == dst_url:
        raise ConfigError("source and destination are the same store")
    src = open_store(src_url)
    try:
        dst = open_store(dst_url)
        try:
            return migrate_stores(src, dst, space=space)
        finally:
            dst.close()
    finally:
        src.close()


def migrate_stores(src: Store, dst: Store, *,
                   space: str | None = None) -> dict[str, dict[str, int]]:
    """:func:`migrate` between two stores that are already open (neither is closed)."""
    names = [s.space for s in src.spaces()]
    if space is not None:
        if space not in names:
            raise ConfigError(f"no space {space!r} in {src.url} (it has: {', '.join(names)})")
        names = [space]
    for name in names:  # check them all first, so a refusal copies nothing
        if _holds_data(dst, name):
            raise StoreError(f"space {name!r} is not empty in {dst.url}; forget it there first "
                             "or copy into another store")
    reader = cast(Store, _BulkReader(src))
    return {name: import_records(dst, name, export_records(reader, name)) for name in names}


class _BulkReader:
    """A read-only view of a store whose ``vector`` is served from bulk prefetches.

    ``export_records`` asks for one vector per node; on a server store that is one round trip
    each. When the store has a ``vectors(space, ids)`` bulk read, this view fetches the vectors of
    the next ``chunk`` nodes (in the order ``nodes`` listed them) at once.
    """

    def __init__(self, store: Store, chunk: int = 2000):
        self._store = store
        self._bulk: Callable[[str, list[str]], dict[str, Vector]] | None = getattr(
            store, "vectors", None)
        self._chunk = chunk
        self._order: list[str] = []
        self._position: dict[str, int] = {}
        self._cache: dict[str, Vector] = {}
        self.url = store.url

    def spaces(self) -> list[SpaceInfo]:
        return self._store.spaces()

    def nodes(self, space: str, tree: Tree | None = None) -> Iterator[Node]:
        listed = list(self._store.nodes(space, tree))
        self._order = [n.id for n in listed]
        self._position = {node_id: i for i, node_id in enumerate(self._order)}
        self._cache = {}
        return iter(listed)

    def vector(self, space: str, node_id: str) -> Vector | None:
        if self._bulk is None or node_id not in self._position:
            return self._store.vector(space, node_id)
        if node_id not in self._cache:
            start = self._position[node_id]
            self._cache = self._bulk(space, self._order[start:start + self._chunk])
        return self._cache.get(node_id)

    def episodes(self, space: str) -> Iterator[EpisodeRecord]:
        return self._store.episodes(space)


def _holds_data(store: Store, space: str) -> bool:
    if all(s.space != space for s in store.spaces()):
        return False
    return store.count_episodes(space) > 0 or next(iter(store.nodes(space)), None) is not None
