"""Copy whole spaces from one store to another (SQLite <-> PostgreSQL, or any two stores).

This is what ``deltamem migrate`` does; schema migrations are :mod:`deltamem.store.migrations`.

The copy goes through the export format (:mod:`deltamem.store.transfer`), so it is exact to the
bit: node ids, patches, counters, timestamps, vectors and episodes arrive unchanged, in insertion
order, and exporting the destination gives the same records as exporting the source. Each space
is copied in one destination transaction (all of it or none of it). The audit log of deletions
is not copied: it describes the source's history, not the memory.
"""

from __future__ import annotations

from deltamem.errors import ConfigError, StoreError
from deltamem.store import open_store
from deltamem.store.base import Store
from deltamem.store.transfer import export_records, import_records


def copy_spaces(src_url: str, dst_url: str, *,
                space: str | None = None) -> dict[str, dict[str, int]]:
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
            return copy_between(src, dst, space=space)
        finally:
            dst.close()
    finally:
        src.close()


def copy_between(src: Store, dst: Store, *,
                   space: str | None = None) -> dict[str, dict[str, int]]:
    """:func:`copy_spaces` between two stores that are already open (neither is closed)."""
    names = [s.space for s in src.spaces()]
    if space is not None:
        if space not in names:
            raise ConfigError(f"no space {space!r} in {src.url} (it has: {', '.join(names)})")
        names = [space]
    for name in names:  # check them all first, so a refusal copies nothing
        if _holds_data(dst, name):
            raise StoreError(f"space {name!r} is not empty in {dst.url}; forget it there first "
                             "or copy into another store")
    return {name: import_records(dst, name, export_records(src, name)) for name in names}


def _holds_data(store: Store, space: str) -> bool:
    if all(s.space != space for s in store.spaces()):
        return False
    return store.count_episodes(space) > 0 or next(iter(store.nodes(space)), None) is not None
