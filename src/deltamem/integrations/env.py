"""The environment of the coding-agent hooks: how far memory reaches, what each hook may
inject, how long the hook daemon lives and which extractor it learns with.

With :mod:`deltamem.config` (the library's settings) and :mod:`deltamem.faces.env` (the CLI and
the server), this is one of the three modules that read ``DELTAMEM_*`` variables.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from deltamem.config import env_value
from deltamem.errors import ConfigError

SCOPES = ("project", "user", "global")
DEFAULT_SCOPE = "project"
# What the coding hooks inject at most, in tokens of the bundled MiniLM tokenizer.
HOOK_BUDGETS = {"session-start": 200, "user-prompt": 250}


def scope(environ: Mapping[str, str] | None = None) -> str:
    """How far a coding agent's memory reaches: ``DELTAMEM_SCOPE`` = ``project`` (the default:
    only what this repository taught), ``user`` (also portable skills from this user's other
    repositories) or ``global`` (also portable skills from anyone sharing the database).
    Project knowledge never crosses repositories in any scope."""
    env = os.environ if environ is None else environ
    value = (env.get("DELTAMEM_SCOPE") or DEFAULT_SCOPE).strip().lower()
    if value not in SCOPES:
        raise ConfigError(f"DELTAMEM_SCOPE={value!r} is not one of {', '.join(SCOPES)}")
    return value


def hook_budget(event: str, environ: Mapping[str, str] | None = None) -> int:
    """The token budget of a hook (``session-start``, ``user-prompt``), from
    ``DELTAMEM_SESSION_START_TOKENS`` / ``DELTAMEM_USER_PROMPT_TOKENS``; 0 turns it off."""
    env = os.environ if environ is None else environ
    name = f"DELTAMEM_{event.upper().replace('-', '_')}_TOKENS"
    raw = env.get(name)
    if raw is None or not raw.strip():
        return HOOK_BUDGETS.get(event, 0)
    try:
        value = int(raw)
    except ValueError as exc:
        raise ConfigError(f"{name}={raw!r} is not a whole number of tokens") from exc
    if value < 0:
        raise ConfigError(f"{name} must be >= 0 (0 turns the hook off), got {value}")
    return value


def hook_idle(environ: Mapping[str, str] | None = None, default: float = 900.0) -> float:
    """Seconds the hook daemon waits for a call before it exits (``DELTAMEM_HOOK_IDLE``)."""
    env = os.environ if environ is None else environ
    raw = env.get("DELTAMEM_HOOK_IDLE")
    if not raw:
        return default
    value = env_value("hook_idle", raw, float)
    if value <= 0:
        raise ConfigError(f"DELTAMEM_HOOK_IDLE must be > 0 seconds, got {raw!r}")
    return float(value)


def hook_turn_stale(environ: Mapping[str, str] | None = None, default: float = 1800.0) -> float:
    """Seconds a turn's transcript must lie still before the hook daemon learns it unended
    (``DELTAMEM_TURN_STALE``)."""
    env = os.environ if environ is None else environ
    raw = env.get("DELTAMEM_TURN_STALE", "").strip()
    if not raw:
        return default
    value = env_value("turn_stale", raw, float)
    if value < 0:
        raise ConfigError(f"DELTAMEM_TURN_STALE must be >= 0 seconds, got {raw!r}")
    return float(value)


def extractor_choice(environ: Mapping[str, str] | None = None) -> tuple[str, str | None]:
    """``(extractor, llm)`` as ``DELTAMEM_EXTRACTOR`` (``trace`` when unset) and
    ``DELTAMEM_LLM`` (None when unset) name them; the endpoint is ``config.llm_endpoint``'s."""
    env = os.environ if environ is None else environ
    extractor = (env.get("DELTAMEM_EXTRACTOR") or "trace").strip().lower()
    return extractor, (env.get("DELTAMEM_LLM") or "").strip() or None


def hook_process(blas_threads: int) -> None:
    """Set up a hook process's environment before anything heavy is imported; a value the
    user set is kept.

    * No pydantic plugins: looking for them scans every installed package's metadata (~20 ms,
      paid by the first answer a session waits for), and none has anything to observe in a
      private process.
    * The BLAS library starts with ``blas_threads`` threads (``Settings.embed_threads``, which
      every embedding call is limited to anyway; 0 leaves the library's default): starting a
      thread pool per core only to limit it later costs numpy's import ~50 ms on two cores.
    """
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    if blas_threads > 0:
        for name in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(name, str(blas_threads))
