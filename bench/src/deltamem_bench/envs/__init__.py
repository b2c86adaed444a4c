"""Real text environments for the evaluation harness.

``make_env`` builds one by name:

* ``"scienceworld"`` - ScienceWorld's 30 tasks (:mod:`.scienceworld`),
* ``"alfworld-generated"`` - generated ALFWorld games on the real engine (:mod:`.alfworld`);
  not the official ALFWorld game files, which cannot be downloaded offline,
* ``"twx-<game>"`` - a TextWorldExpress game, e.g. ``"twx-cookingworld"``, ``"twx-coin"``
  (:mod:`.textworld_express`).

Engines are imported only when an environment is made, so this package imports without them.
"""

from __future__ import annotations

from typing import Any

from deltamem.errors import ConfigError
from deltamem_bench.envs.base import (
    EnvError,
    Environment,
    EpisodeSpec,
    Reset,
    Transition,
)

__all__ = ["ENV_NAMES", "EnvError", "Environment", "EpisodeSpec", "Reset", "Transition",
           "make_env"]

TWX_PREFIX = "twx-"


def _twx_names() -> list[str]:
    from deltamem_bench.envs.textworld_express import GAMES

    return [TWX_PREFIX + g for g in GAMES]


ENV_NAMES = ("scienceworld", "alfworld-generated", *_twx_names())


def make_env(name: str, **kwargs: Any) -> Environment:
    """Build the environment called ``name``; ``kwargs`` go to its constructor.

    Raises:
        ConfigError: ``name`` is unknown, or its engine package is not installed.
    """
    if name == "scienceworld":
        from deltamem_bench.envs.scienceworld import ScienceWorldEnvironment

        return ScienceWorldEnvironment(**kwargs)
    if name == "alfworld-generated":
        from deltamem_bench.envs.alfworld import AlfworldGeneratedEnvironment

        return AlfworldGeneratedEnvironment(**kwargs)
    if name in _twx_names():
        from deltamem_bench.envs.textworld_express import TextWorldExpressEnvironment

        return TextWorldExpressEnvironment(name[len(TWX_PREFIX):], **kwargs)
    raise ConfigError(f"unknown environment {name!r}; known: {list(ENV_NAMES)} "
                      "(ALFWorld is offered only as 'alfworld-generated')")
