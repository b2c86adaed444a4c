"""The ALFWorld text engine: TextWorld's ``PddlEnv`` wrapped the way ALFWorld's own
``AlfredTWEnv`` wraps it (``AlfredInfos(AlfredDemangler(PddlEnv(infos)))``), so generated games
read exactly like ALFWorld's ("apple 1", "countertop 2", "Nothing happens.").

Each engine loads its own copy of Fast Downward's shared library (the library keeps the game in
global state), so the planner used while generating games never disturbs a running episode.
"""

from __future__ import annotations

import threading
from typing import Any

from deltamem.errors import ConfigError

_planner: Any = None
_planner_lock = threading.Lock()


def open_engine(*, with_plan: bool, shared: bool = True) -> Any:
    """A TextWorld environment for ``.tw-pddl`` games.

    Args:
        with_plan: Also ask Fast Downward for ``policy_commands`` after every state change
            (about 12 ms a step on the generated games).
        shared: With ``with_plan``, the one planning engine of the process (the generator's);
            ``False`` gives a player its own, so that generating a game never replaces the
            game being played.
    """
    global _planner
    if with_plan and shared:
        with _planner_lock:
            if _planner is None:
                _planner = _build(with_plan=True)
            return _planner
    return _build(with_plan=with_plan)


def _build(*, with_plan: bool) -> Any:
    try:
        import textworld
        from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos
        from textworld.envs.pddl import PddlEnv
    except ImportError as exc:
        raise ConfigError("generated ALFWorld games need the 'alfworld' package (text-only; "
                          "compiles fast-downward): pip install 'deltamem[alfworld]'") from exc
    infos = textworld.EnvInfos(won=True, admissible_commands=True, policy_commands=with_plan,
                               extras=["gamefile"])
    return AlfredInfos(AlfredDemangler(PddlEnv(infos)))
