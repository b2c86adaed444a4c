"""Scene plug-ins: what a domain knows about the scenes its episodes happen in.

The port is :class:`~deltamem.scenes.base.Scene`; :func:`make_scene` resolves a name:

* ``"text-games"`` (the default) -- :class:`deltamem.scenes.text_games.TextGames`, the room, exit
  and door grammar of TextWorld(Express), ScienceWorld and ALFWorld;
* ``"coding"`` -- :class:`deltamem.scenes.project.CodingScene`: software projects, from
  coding-agent transcripts (their tool calls read by ``scenes.tool_calls``, their prompts by
  ``scenes.prompts``);
* ``"plain"`` -- :class:`deltamem.scenes.plain.Plain`, no grammar at all.

Each implementation is imported only when asked for, so a deployment pays for the scene it uses.
"""

from __future__ import annotations

import importlib

from deltamem.errors import ConfigError
from deltamem.scenes.base import Scene

DEFAULT_SCENE = "text-games"

# name -> (module, class)
_SCENES: dict[str, tuple[str, str]] = {
    "text-games": ("deltamem.scenes.text_games", "TextGames"),
    "coding": ("deltamem.scenes.project", "CodingScene"),
    "plain": ("deltamem.scenes.plain", "Plain"),
}

SCENE_NAMES: tuple[str, ...] = tuple(_SCENES)


def make_scene(scene: str | Scene | None = None) -> Scene:
    """The scene plug-in named ``scene`` (``None``: the default, ``"text-games"``); a
    :class:`Scene` instance is returned as it is. Raises :class:`ConfigError` for an unknown
    name or a plug-in that is not installed."""
    if scene is None:
        scene = DEFAULT_SCENE
    if not isinstance(scene, str):
        if isinstance(scene, Scene):
            return scene
        raise ConfigError(f"scene must be a name ({', '.join(SCENE_NAMES)}) or a Scene, "
                          f"got {type(scene).__name__}")
    key = scene.strip().lower().replace("_", "-")
    if key not in _SCENES:
        raise ConfigError(f"unknown scene {scene!r}: choose one of {', '.join(SCENE_NAMES)}")
    module_name, class_name = _SCENES[key]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise
        raise ConfigError(f"the {key!r} scene is not available in this installation "
                          f"({module_name} is missing)") from exc
    cls = getattr(module, class_name, None)  # the class by its registered name, nothing else
    made = cls() if isinstance(cls, type) else None
    if not isinstance(made, Scene):
        raise ConfigError(f"{module_name} has no Scene plug-in {class_name} (the {key!r} scene)")
    return made


__all__ = ["DEFAULT_SCENE", "SCENE_NAMES", "Scene", "make_scene"]
