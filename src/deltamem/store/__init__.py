"""Storage backends behind one :class:`~deltamem.store.base.Store` protocol.

``open_store`` picks the backend from a URL: a plain path or ``sqlite:PATH`` (the embedded
default), ``:memory:``, or ``postgresql://...`` (needs the ``postgres`` extra).
"""

from __future__ import annotations

import os
import re

from deltamem.errors import ConfigError
from deltamem.store.base import Candidate, EpisodeRecord, SpaceInfo, Store
from deltamem.store.memory import InMemoryStore
from deltamem.store.sqlite import SQLiteStore

__all__ = ["Candidate", "EpisodeRecord", "InMemoryStore", "SQLiteStore", "SpaceInfo", "Store",
           "open_store", "sqlite_path"]


def open_store(url: str, *, create: bool = True) -> Store:
    """Open the store a URL or path names.

    Args:
        url: a path, ``sqlite:PATH``, ``:memory:`` or ``postgresql://...``.
        create: create a missing SQLite file; with False it must exist (``SpaceNotFound``).

    Raises:
        ConfigError: an unknown URL scheme (``mysql://...``) or an empty path.
    """
    if url.startswith(("postgresql://", "postgres://")):
        register_url_password(url)
        try:
            from deltamem.store.postgres import PostgresStore
        except ImportError as exc:
            raise ConfigError(
                "PostgreSQL support needs the postgres extra: pip install 'deltamem[postgres]'"
            ) from exc
        return PostgresStore(url)
    scheme = re.match(r"([A-Za-z][A-Za-z0-9+.-]*)://", url)
    if scheme and scheme.group(1) != "sqlite":
        raise ConfigError(f"unknown database URL scheme {scheme.group(1)!r}; pass a file path, "
                          "sqlite:PATH or postgresql://...")
    path = sqlite_path(url)
    if not path:
        raise ConfigError("empty database path; pass a file path, sqlite:PATH or postgresql://...")
    if path.startswith("~"):  # from a config that no shell expanded (a plugin option)
        path = os.path.expanduser(path)
    return SQLiteStore(path, create=create)


def register_url_password(url: str) -> None:
    """Keep a database URL's password out of every message (``deltamem.privacy.redact``)."""
    from urllib.parse import unquote, urlsplit

    from deltamem.privacy.redact import register_secret

    try:
        password = urlsplit(url).password
    except ValueError:
        return
    if password:
        register_secret(password)
        register_secret(unquote(password))


def sqlite_path(url: str) -> str:
    """The file path of a SQLite URL (``sqlite:PATH``, ``sqlite://PATH``) or plain path."""
    return url.removeprefix("sqlite:").removeprefix("//") if url.startswith("sqlite:") else url
