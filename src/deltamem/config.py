"""The library's configuration: the memory's settings and the model endpoint.

* :meth:`Settings.from_env` -- the memory's tunables (``DELTAMEM_TAU_TASK``, ...);
* :func:`llm_endpoint` -- the model endpoint, OpenAI-compatible or Anthropic
  (``DELTAMEM_LLM_BASE_URL``, ...);
* :func:`cache_dir` -- where derived artefacts are cached (``DELTAMEM_CACHE``).

The faces read their own variables beside it, with :func:`env_value`'s parsing:
:mod:`deltamem.faces.env` (the CLI and the server) and :mod:`deltamem.integrations.env` (the
coding-agent hooks). No other module reads ``DELTAMEM_*``.

Every constructor that takes ``settings`` (``DeltaMem``, ``DeltaMem.open``, the server's
``create_app`` and ``SpacePool``) uses ``Settings.from_env()`` when given none, so the same
environment configures every entry point the same way.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from deltamem.core.model import Tree
from deltamem.core.render import Style
from deltamem.core.tree import MAX_DEPTH
from deltamem.errors import ConfigError
from deltamem.scenes import DEFAULT_SCENE, SCENE_NAMES

DEFAULT_EMBEDDER = "minilm"

# Calibrated for the default embedder (all-MiniLM-L6-v2) on training episodes only: `deltamem
# calibrate tests/fixtures/scienceworld_gold.jsonl --split train` (24 recorded ScienceWorld gold
# episodes, 6 tasks x 4 train variations; the fixture's test episodes are not read), the middle
# of the best top-1 F2 plateau; see docs/calibration.md for why not the larger training set's
# answer. The paper's 0.75 / 0.85 were tuned for e5-base-v2 used without its prefixes, whose
# cosines run much higher than MiniLM's.
DEFAULT_TAU_TASK = 0.54
DEFAULT_TAU_ENV = 0.88


@dataclass(frozen=True, slots=True)
class Settings:
    """Every tunable constant of the memory (paper defaults unless noted).

    Attributes:
        tau_task: retrieval threshold of the task tree (accept the best node iff score >= tau).
        tau_env: retrieval threshold of the environment tree.
        penalty: failure penalty lambda subtracted from a failure node's cosine.
        k_cons: successes as deepest match after which a chain is compiled into a new root.
        max_depth: deepest level of a tree; a delta for a node at this depth becomes its sibling.
        top_k: candidates reported per tree by recall (the chain always follows the best one).
        auto_consolidate: consolidate during ``learn`` as soon as a node is due.
        embedder: embedder spec (``minilm``, ``static``, ``st:<model>``; ``hashing`` in tests).
        style: prompt rendering, ``composed`` or ``patches``.
        scene: the scene plug-in (``deltamem.scenes``): ``text-games`` (rooms, exits and doors of
            TextWorld, ScienceWorld and ALFWorld; the default), ``coding`` or ``plain``.
        embed_cache: embeddings of recent texts kept per memory, so a repeated task or scene is
            not embedded again (0 turns the cache off).
        embed_threads: BLAS threads one embedding call may use (0: the BLAS library's default).
            One is fastest for the small batches memory operations embed, and keeps concurrent
            writers from oversubscribing the cores.
        ann_from: a tree with more nodes than this is scanned through an approximate index
            (faiss IVF, the ``ann`` extra) whose candidates are re-scored exactly: the answer is
            the exact one whenever the exact best node is among them (0: always scan exactly).
            The default is about where the exact scan of a tree misses 5 ms on one core
            (docs/results.md); without faiss, larger trees are scanned exactly.
        redact: replace secrets in every episode, root and import by ``[REDACTED:<kind>]``
            and drop ``<private>`` spans before anything is stored or sent to a model
            (``deltamem.privacy.redact``). Turn it off only for data known to hold no secret.
    """

    tau_task: float = DEFAULT_TAU_TASK
    tau_env: float = DEFAULT_TAU_ENV
    penalty: float = 0.05
    k_cons: int = 3
    max_depth: int = MAX_DEPTH
    top_k: int = 1
    auto_consolidate: bool = True
    embedder: str = DEFAULT_EMBEDDER
    style: Style = Style.COMPOSED
    scene: str = DEFAULT_SCENE
    embed_cache: int = 4096
    embed_threads: int = 1
    ann_from: int = 400_000
    redact: bool = True

    def __post_init__(self) -> None:
        for name in ("tau_task", "tau_env"):
            value = getattr(self, name)
            if not -1.0 <= value <= 1.0:
                raise ConfigError(f"{name} must be a cosine threshold in [-1, 1], got {value}")
        if self.penalty < 0:
            raise ConfigError(f"penalty must be >= 0, got {self.penalty}")
        if self.embed_cache < 0:
            raise ConfigError(f"embed_cache must be >= 0, got {self.embed_cache}")
        if self.k_cons < 1 or self.max_depth < 2 or self.top_k < 1:
            raise ConfigError("k_cons and top_k must be >= 1 and max_depth >= 2")
        if self.ann_from < 0:
            raise ConfigError(f"ann_from must be >= 0 (0: always exact), got {self.ann_from}")
        if self.embed_threads < 0:
            raise ConfigError(f"embed_threads must be >= 0, got {self.embed_threads}")
        try:  # the enum, or its value ("composed", "patches")
            object.__setattr__(self, "style", Style(self.style))
        except ValueError:
            raise ConfigError(f"style must be 'composed' or 'patches', got {self.style!r}"
                              ) from None
        if self.scene not in SCENE_NAMES:
            raise ConfigError(f"scene must be one of {', '.join(SCENE_NAMES)}, got {self.scene!r}")

    def threshold(self, tree: Tree) -> float:
        """The acceptance threshold of ``tree`` (``tau_task`` or ``tau_env``)."""
        return self.tau_task if Tree(tree) is Tree.TASK else self.tau_env

    def with_(self, **changes: Any) -> Settings:
        """A copy with ``changes`` applied; ``None`` values are ignored (handy for CLI flags)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Settings from ``DELTAMEM_TAU_TASK``, ``DELTAMEM_PENALTY``, ... over the defaults."""
        env = os.environ if environ is None else environ
        changes: dict[str, Any] = {}
        for f in fields(cls):
            raw = env.get(f"DELTAMEM_{f.name.upper()}")
            if raw is None:
                continue
            changes[f.name] = env_value(f.name, raw, type(getattr(cls(), f.name)))
        return cls(**changes)


def llm_endpoint(environ: Mapping[str, str] | None = None) -> dict[str, str | None]:
    """``base_url``, ``model`` and ``api_key`` of the model endpoint (the ``openai`` and
    ``anthropic`` providers), from ``DELTAMEM_LLM_BASE_URL``, ``DELTAMEM_LLM_MODEL`` and
    ``DELTAMEM_LLM_API_KEY`` (None when unset or empty). Values are stripped of surrounding
    whitespace (a key read from a secret file ends in a newline); the key is normalised by
    :func:`secret`."""
    env = os.environ if environ is None else environ
    out = {k: (env.get(f"DELTAMEM_LLM_{k.upper()}") or "").strip() or None
           for k in ("base_url", "model")}
    out["api_key"] = secret("DELTAMEM_LLM_API_KEY", env.get("DELTAMEM_LLM_API_KEY"))
    return out


def secret(name: str, value: str | None) -> str | None:
    """A configured secret (an API key, a password) as it is used: surrounding whitespace
    stripped (None when nothing is left), and registered with :mod:`deltamem.privacy.redact` so that
    no text leaving the process (error bodies, CLI errors, logs, worker output, echoed model
    answers) shows it or a piece of it.

    Raises:
        ConfigError: whitespace or a control character inside it, or a character outside
            ASCII (no HTTP header can carry it); the message names ``name``, never the value.
    """
    from deltamem.privacy.redact import register_secret

    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    register_secret(value)
    if any(c.isspace() or not c.isprintable() for c in value) or not value.isascii():
        raise ConfigError(f"{name} holds whitespace, a control character or a non-ASCII "
                          "character inside it; check the secret's source")
    return value


def cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Where deltamem caches derived artefacts: ``$DELTAMEM_CACHE``, else
    ``$XDG_CACHE_HOME/deltamem``, else ``~/.cache/deltamem``."""
    env = os.environ if environ is None else environ
    if env.get("DELTAMEM_CACHE"):
        return Path(env["DELTAMEM_CACHE"]).expanduser()
    base = env.get("XDG_CACHE_HOME")
    return (Path(base).expanduser() if base else Path.home() / ".cache") / "deltamem"


def env_value(name: str, raw: str, kind: type) -> Any:
    """``raw``, the value of ``DELTAMEM_<NAME>``, as a ``kind`` (``bool`` takes 1/0, true/false,
    yes/no).

    Raises:
        ConfigError: a value that is not a ``kind``; the message names the variable.
    """
    try:
        if kind is bool:
            if raw.lower() not in ("1", "0", "true", "false", "yes", "no"):
                raise ValueError(raw)
            return raw.lower() in ("1", "true", "yes")
        return kind(raw)
    except ValueError as exc:
        message = f"DELTAMEM_{name.upper()}={raw!r} is not a valid {kind.__name__}"
        raise ConfigError(message) from exc
