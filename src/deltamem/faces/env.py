"""The environment of the CLI and the server: tracebacks on request, the app description that
``deltamem serve --workers N`` hands its worker processes, and the size limit of skill files.

With :mod:`deltamem.config` (the library's settings) and :mod:`deltamem.integrations.env` (the
coding-agent hooks), this is one of the three modules that read ``DELTAMEM_*`` variables.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from deltamem.errors import ConfigError

# How `deltamem serve --workers N` describes the app to its worker processes (spawned processes
# inherit the environment; uvicorn shares the bound socket among them).
SERVE_CONFIG = "DELTAMEM_SERVE_CONFIG"


def debug(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``DELTAMEM_DEBUG`` asks for tracebacks of internal errors."""
    env = os.environ if environ is None else environ
    return bool(env.get("DELTAMEM_DEBUG"))


def hand_to_workers(description: str) -> None:
    """Leave the serve command's app description where its worker processes read it."""
    os.environ[SERVE_CONFIG] = description


def serve_description(environ: Mapping[str, str] | None = None) -> str:
    """The app description ``hand_to_workers`` left (a ``--workers`` process).

    Raises:
        ConfigError: this process was not started by ``deltamem serve --workers``.
    """
    env = os.environ if environ is None else environ
    value = env.get(SERVE_CONFIG)
    if not value:
        raise ConfigError(f"{SERVE_CONFIG} is not set: start workers with deltamem serve "
                          "--workers N")
    return value


def skill_max_bytes(environ: Mapping[str, str] | None = None, default: int = 1 << 20) -> int:
    """The largest skill file ``skills import`` reads (``DELTAMEM_SKILL_MAX_BYTES``)."""
    env = os.environ if environ is None else environ
    raw = env.get("DELTAMEM_SKILL_MAX_BYTES", "")
    if not raw:
        return default
    if not raw.isdigit() or int(raw) <= 0:
        raise ConfigError(f"DELTAMEM_SKILL_MAX_BYTES must be a positive number of bytes, "
                          f"got {raw!r}")
    return int(raw)
