"""Storage backends behind one :class:`~deltamem.store.base.Store` protocol.

``open_store`` picks the backend from a URL: a plain path or ``sqlite:PATH`` (the embedded
default), ``:memory:``, or ``postgresql://...`` (needs the ``postgres`` extra).
"""

from __future__ import annotations

from deltamem.errors import ConfigError
from deltamem.store.base import Candidate, EpisodeRecord, SpaceInfo, Store
from deltamem.store.sqlite import SQLiteStore

__all__ = ["Candidate", "EpisodeRecord", "SQLiteStore", "SpaceInfo", "Store", "open_store"]


def open_store(url: str) -> Store:
    """Open the store a URL or path names."""
    if url.startswith(("postgresql://", "postgres://")):
        try:
            from deltamem.store.postgres import PostgresStore
        except ImportError as exc:
            raise ConfigError(
                "PostgreSQL support needs the postgres extra: pip install 'deltamem[postgres]'"
            ) from exc
        return PostgresStore(url)
    if url.startswith("sqlite:"):
        url = url.removeprefix("sqlite:").removeprefix("//")
    if not url:
        raise ConfigError("empty database path; pass a file path, sqlite:PATH or postgresql://...")
    return SQLiteStore(url)
