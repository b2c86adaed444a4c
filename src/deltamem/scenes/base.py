"""The scene port: what a domain knows about the scenes its episodes happen in.

The core knows facts as ``"<subject>: <statement>"`` and supersession (``core.knowledge``), and
nothing about any domain's phrasing. A :class:`Scene` plug-in supplies the rest:

* :meth:`Scene.signature` -- the scene's identity (and, where the domain has one, its layout).
  Knowledge learned under one signature is never recalled for, nor merged into, a scene with
  another; skills learned in the same signature win exact ties. ``""`` when the text names no
  scene (it then only matches other texts that name none).
* :meth:`Scene.place` -- where an observation shows the agent (a room, a directory), ``""`` when
  it shows none; used to spot detours (a move into a place and straight back).
* :meth:`Scene.facts` -- the scene facts an episode teaches, already superseded within the
  episode (``core.knowledge.supersede``), each at most ``max_chars`` long.
* :meth:`Scene.trigger` -- the short text a knowledge node is keyed and shown by.

Optionally, ``contents(scene) -> frozenset[str]``: the entity types a scene shows, for scenes
that are random draws of their types (ALFWorld's floor plans). Knowledge of scenes whose
contents overlap is shared across layouts (``core.ranking.same_scene``); :func:`contents_of`
gives a plug-in's, or none.

Implementations: ``deltamem.scenes.text_games`` (TextWorld, ScienceWorld, ALFWorld phrasing; the
default), ``deltamem.scenes.project`` (software projects: coding-agent transcripts), and
``deltamem.scenes.plain`` (no grammar: every text is its own scene, no facts beyond replies).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

from deltamem.core.model import Episode


@runtime_checkable
class Scene(Protocol):
    """What a domain knows about its scenes (see the module docstring)."""

    name: str

    def signature(self, scene: str) -> str:
        """The scene's identity and layout, normalised; ``""`` when the text names none."""
        ...

    def place(self, observation: str) -> str:
        """The place an observation shows the agent in, ``""`` when it shows none."""
        ...

    def facts(self, episode: Episode, max_chars: int) -> tuple[str, ...]:
        """The scene facts ``episode`` teaches, ``"<subject>: <statement>"``, superseded."""
        ...

    def trigger(self, scene: str, max_chars: int) -> str:
        """The short text a knowledge node of this scene is keyed and shown by."""
        ...


def contents_of(scene: object) -> Callable[[str], frozenset[str]]:
    """A scene plug-in's ``contents`` (the entity types a scene text shows), or a function that
    finds none (its scenes then match by their exact signature only)."""
    method = getattr(scene, "contents", None)
    return method if callable(method) else _none


def _none(scene: str) -> frozenset[str]:
    return frozenset()
