"""One :class:`DeltaMem` per space, opened lazily and sharing one store and one embedder.

The SQLite store serialises its own connection with a lock, so every space of a server can share
it; sharing also shares the per-process vector indexes and the (possibly large) embedding model.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path

from deltamem.config import Settings
from deltamem.embed.base import Embedder
from deltamem.errors import ConfigError
from deltamem.extract import make_extractor
from deltamem.extract.base import Extractor
from deltamem.memory import DeltaMem
from deltamem.store import open_store
from deltamem.store.base import Store

# Space names appear in URLs, logs and file names: keep them to a safe alphabet.
SPACE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$")


def check_space(space: str) -> str:
    """Return ``space`` if it is a valid name, else raise ConfigError saying what is allowed."""
    if not SPACE_NAME.match(space):
        raise ConfigError(
            f"invalid space name {space!r}: use 1-64 letters, digits, '_', '.' or '-', "
            "starting with a letter or digit"
        )
    return space


class SpacePool:
    """Lazily opened memories of one database, one per space.

    Args:
        db: the database path or URL.
        embedder: an Embedder, a spec (``"minilm"``), or None for ``settings.embedder``.
        extractor: ``"trace"``, ``"llm"`` or an Extractor.
        settings: memory settings shared by every space.
    """

    def __init__(self, db: str | Path, *, embedder: Embedder | str | None = None,
                 extractor: Extractor | str = "trace", settings: Settings | None = None):
        self.db = str(db)
        self.settings = settings or Settings.from_env()
        self._embedder_spec = embedder
        self._extractor_spec = extractor
        self._embedder: Embedder | None = None
        self._extractor: Extractor | None = None
        self._store: Store | None = None
        self._spaces: dict[str, DeltaMem] = {}
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
            spec_x = self._extractor_spec
            self._extractor = make_extractor(spec_x) if isinstance(spec_x, str) else spec_x
        return self._embedder, self._extractor

    def get(self, space: str) -> DeltaMem:
        """The memory of ``space`` (validated; opened and cached on first use)."""
        check_space(space)
        with self._lock:
            mem = self._spaces.get(space)
            if mem is None:
                embedder, extractor = self._resolve()
                mem = DeltaMem(self._open_store(), embedder, extractor, space=space,
                               settings=self.settings)
                self._spaces[space] = mem
            return mem

    def close(self) -> None:
        """Close the shared store (the memories share it, so it is closed once)."""
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None
            self._spaces.clear()
