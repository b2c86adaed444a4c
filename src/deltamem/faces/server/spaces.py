"""One :class:`DeltaMem` per space, opened lazily and sharing one store and one embedder.

Every space of a server shares the store (its read connections, write lock and bounded index
cache) and the (possibly large) embedding model. Only writers create a space: a read of a space
that does not exist is ``SpaceNotFound`` and leaves nothing behind. At most ``max_spaces``
memories are kept; the least recently used are dropped (they are cheap to reopen).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path

from deltamem.config import Settings
from deltamem.embed.base import Embedder
from deltamem.engine.memory import DeltaMem, check_space
from deltamem.errors import SpaceNotFound
from deltamem.extract import make_extractor
from deltamem.extract.base import Extractor
from deltamem.store import open_store
from deltamem.store.base import Store
from deltamem.store.sqlite import SQLiteStore


class SpacePool:
    """Lazily opened memories of one database, one per space.

    Args:
        db: the database path or URL.
        embedder: an Embedder, a spec (``"minilm"``), or None for ``settings.embedder``.
        extractor: ``"trace"``, ``"llm"`` or an Extractor.
        settings: memory settings shared by every space.
        max_spaces: most memories kept open at once.
    """

    def __init__(self, db: str | Path, *, embedder: Embedder | str | None = None,
                 extractor: Extractor | str = "trace", settings: Settings | None = None,
                 max_spaces: int = 64):
        self.db = str(db)
        self.settings = settings or Settings.from_env()
        self._embedder_spec = embedder
        self._extractor_spec = extractor
        self._embedder: Embedder | None = None
        self._extractor: Extractor | None = None
        self._store: Store | None = None
        self._spaces: OrderedDict[str, DeltaMem] = OrderedDict()
        self.max_spaces = max_spaces
        self._lock = threading.Lock()

    @property
    def store(self) -> Store:
        """The shared store (opened on first use)."""
        with self._lock:
            return self._open_store()

    def _open_store(self) -> Store:
        if self._store is None:
            self._store = open_store(self.db)
        return self._store

    def _resolve(self) -> tuple[Embedder, Extractor]:
        if self._embedder is None:
            spec = self._embedder_spec
            if isinstance(spec, Embedder):
                self._embedder = spec
            else:
                from deltamem.embed import make_embedder

                self._embedder = make_embedder(spec or self.settings.embedder)
        if self._extractor is None:
            self._extractor = make_extractor(self._extractor_spec)
        return self._embedder, self._extractor

    def get(self, space: str, *, create: bool = False) -> DeltaMem:
        """The memory of ``space`` (validated; opened and cached on first use).

        Raises:
            ConfigError: an invalid space name.
            SpaceNotFound: the space does not exist and ``create`` is False.
        """
        check_space(space)
        with self._lock:
            mem = self._spaces.get(space)
            if mem is None:
                embedder, extractor = self._resolve()
                mem = DeltaMem(self._open_store(), embedder, extractor, space=space,
                               settings=self.settings, create=create)
                self._spaces[space] = mem
                while len(self._spaces) > self.max_spaces:
                    self._spaces.popitem(last=False)
            elif not create and not mem.exists:  # opened by a writer that wrote nothing yet
                raise SpaceNotFound(f"no space {space!r}; learn or import into it first")
            self._spaces.move_to_end(space)
            return mem

    def reads_locally(self, space: str) -> bool:
        """Whether a read of ``space`` can run without waiting for a model load, a migration,
        a lock or the network: the space's memory is open and the store is a SQLite file (WAL:
        a reader waits for no writer; each thread reads on its own connection). PostgreSQL
        reads go over the network and may wait for a pooled connection."""
        store = self._store
        return (space in self._spaces and isinstance(store, SQLiteStore)
                and store.url != "sqlite::memory:")

    def close(self) -> None:
        """Close the shared store (the memories share it, so it is closed once)."""
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None
            self._spaces.clear()
