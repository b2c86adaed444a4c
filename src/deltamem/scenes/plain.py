"""The plain scene: no domain grammar at all.

* :meth:`Plain.signature` is ``""`` for every text: a plain scene has no layout to compare, so
  the embedding alone decides which knowledge a scene matches (the environment tree's threshold,
  as for any text the text-game grammar cannot read). A signature made of the whole normalised
  text was the alternative; it would only ever recall knowledge for a scene described word for
  word the same, which an embedding-keyed memory exists to avoid.
* :meth:`Plain.place` is ``""``: no places, so no retraced moves (undone ``open``/``close``
  pairs are still dropped by the extractor).
* :meth:`Plain.facts`: one generic statement ``"<action>: <reply>"`` per informative reply --
  replies that are empty, rejected or no-ops (``scenes.text.says_nothing``), repeated word for
  word, or that the score did not confirm (a step that lowered it; in a failed episode one that
  earned nothing) give none. A later reply to the same action supersedes the earlier one.
* :meth:`Plain.trigger`: the scene text's first sentence.
"""

from __future__ import annotations

from deltamem.core.knowledge import supersede
from deltamem.core.model import Episode
from deltamem.scenes.text import clean, earned_nothing, first_sentence, lowered_score, says_nothing

ACTION_CHARS = 80


class Plain:
    """A scene with no grammar (see the module docstring)."""

    name = "plain"

    def signature(self, scene: str) -> str:
        return ""

    def place(self, observation: str) -> str:
        return ""

    def trigger(self, scene: str, max_chars: int) -> str:
        return first_sentence(scene, max_chars)

    def facts(self, episode: Episode, max_chars: int) -> tuple[str, ...]:
        facts: list[str] = []
        seen: set[str] = set()
        for step in episode.steps:
            observation = step.observation.strip()
            if says_nothing(observation) or observation in seen:
                continue
            seen.add(observation)
            if lowered_score(step) or (not episode.success and earned_nothing(step)):
                continue
            facts.append(clean(f"{clean(step.action, ACTION_CHARS)}: {observation}", max_chars))
        return supersede((), facts)

    def __repr__(self) -> str:
        return "Plain()"
