"""Every error deltamem raises, rooted at :class:`DeltaMemError`.

::

    DeltaMemError
    ├── ConfigError (ValueError)        bad settings, unknown provider, missing optional extra
    ├── EpisodeError (ValueError)       a malformed episode; names the source, line and field
    ├── NodeNotFound (KeyError)         no node with that id in this space
    ├── SpaceNotFound (KeyError)        no such space (or database) to read; writers create it
    ├── PatchError (ValueError)         a patch does not fit the experience it is applied to
    ├── StoreError                      the database refused or is inconsistent
    │   ├── SchemaError                 the database was written by an unknown (newer) version
    │   ├── InvalidExport               an import file is malformed or would damage the trees
    │   └── EmbedderMismatch            the space was built with another embedder
    ├── ProviderError                   an LLM or embedding backend failed
    │   └── BudgetExceeded              a token budget would be overspent; nothing was sent
    ├── ExtractionError                 the model's answer never validated; memory unchanged
    └── RemoteError                     a deltamem server refused (auth, scope, limits, request
                                        validation) or could not be reached (deltamem.Client)

Messages say what to do about the problem, not only what it is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class DeltaMemError(Exception):
    """Root of every deltamem error.

    Its text is redacted (``deltamem.privacy.redact``): a configured secret, a key or a password
    quoted in a message (a provider's echo, a model's answer, a URL) never reaches a user or a log.
    """

    def __str__(self) -> str:
        return redacted(super().__str__())


class ConfigError(DeltaMemError, ValueError):
    """Invalid configuration, unknown provider name, or a missing optional dependency."""


class EpisodeError(DeltaMemError, ValueError):
    """A malformed episode. ``where`` names the source (file:line) and ``field`` the bad field."""

    def __init__(self, message: str, *, where: str | None = None, field: str | None = None):
        self.where = where
        self.field = field
        prefix = f"{where}: " if where else ""
        super().__init__(f"{prefix}{message}")


class NodeNotFound(DeltaMemError, KeyError):
    """No node with this id exists in the space."""

    def __init__(self, node_id: str, space: str):
        self.node_id = node_id
        self.space = space
        super().__init__(f"no node {node_id!r} in space {space!r}")

    def __str__(self) -> str:  # KeyError would repr() the message
        return redacted(str(self.args[0]))


class SpaceNotFound(DeltaMemError, KeyError):
    """A read of a space (or a whole database) that does not exist; only writers create one."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return redacted(str(self.args[0]))


class PatchError(DeltaMemError, ValueError):
    """A patch does not fit the experience it is applied to (a damaged or foreign chain)."""


class StoreError(DeltaMemError):
    """The storage backend failed or found the data inconsistent."""


class SchemaError(StoreError):
    """The database schema is from a newer deltamem, or could not be migrated."""


class InvalidExport(StoreError):
    """An import is malformed or would damage the trees; it was refused whole, nothing written."""


class EmbedderMismatch(StoreError):
    """The space was built with a different embedder; mixing vectors would corrupt retrieval."""


class ProviderError(DeltaMemError):
    """An LLM or embedding provider failed (network, HTTP status, model load)."""


class BudgetExceeded(ProviderError):
    """Serving the request would exceed a configured token budget; nothing was sent."""


class ExtractionError(DeltaMemError):
    """The model's answer never became a valid experience. The memory is unchanged."""

    def __init__(self, message: str, *, episode: str | None = None, raw: str | None = None,
                 attempts: int = 0, usage: Any = None):
        self.episode = episode
        self.raw = raw
        self.attempts = attempts
        self.usage = usage
        detail = f" (episode {episode!r})" if episode else ""
        shown = raw if raw is None or len(raw) <= 300 else raw[:300] + "..."
        super().__init__(f"{message}{detail}; last answer: {shown!r}")


class RemoteError(DeltaMemError):
    """A deltamem server refused a request for a reason that is not a library error.

    Library errors a server reports (``NodeNotFound``, ``EpisodeError``, ...) reach a
    :class:`deltamem.Client` as themselves; this is everything else: a missing or invalid API
    key (401), a key without the space or scope (403), a rate limit (429), a request the server
    rejected before the library saw it (413, 422), or no answer at all (``status`` None).
    """

    def __init__(self, message: str, *, status: int | None = None, kind: str = "",
                 field: str | None = None):
        self.status = status
        self.kind = kind
        self.field = field
        super().__init__(message)


# The redactor of error texts: ``deltamem.privacy.redact`` registers itself here when it is imported
# (``import deltamem``, and so any ``deltamem.*`` import, does), so this ground-floor module
# names nothing above it.
_REDACTOR: list[Callable[[str], str]] = []


def register_redactor(redactor: Callable[[str], str]) -> None:
    """Make ``redactor`` the function :func:`redacted` applies."""
    _REDACTOR[:] = [redactor]


def redacted(text: str) -> str:
    """``text`` with secrets replaced (``deltamem.privacy.redact``, which the package imports
    first)."""
    if not _REDACTOR:  # pragma: no cover - the package's __init__ imports deltamem.privacy.redact
        raise RuntimeError("no redactor registered: import deltamem.privacy.redact first")
    return _REDACTOR[0](text)
