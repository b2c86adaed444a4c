"""The trace extractor: experiences read straight off the trajectory, no model, no cost.

Rules (deterministic, documented in docs/extractors.md):

* Task tree, successful episode -> ``Skill``: activation = the task text; steps = the episode's
  actions verbatim, in order; termination = the last observation.
* Task tree, failed episode -> ``Lesson``: situation = the task text; failed = the actions tried,
  verbatim, in order; untried is left empty (a trace cannot know what was not tried).
* Environment tree, any outcome -> ``Knowledge``: trigger = the first sentence of the scene text;
  facts = one line ``<action>: <statement>`` per line or sentence of every observation that says
  something (invalid-action replies and empty observations are dropped), duplicates removed, in
  order. Knowledge accumulates: when the episode matched a scene already known, the new
  experience is the known facts followed by the new ones (the oldest dropped beyond
  ``max_facts``), so the stored residual is exactly the new facts -- the paper's "smallest
  update". Facts are kept atomic on purpose: two visits to similar scenes then share most of them.

Whitespace is collapsed everywhere and every text item is cut to ``max_chars`` so that a noisy
observation cannot blow up the memory.
"""

from __future__ import annotations

import re

from deltamem.core.model import Episode, Knowledge, Lesson, Skill, Tree
from deltamem.extract.base import Extraction, ExtractRequest

_WS = re.compile(r"\s+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")
_UNINFORMATIVE = re.compile(
    r"^(no known action matches|nothing happens|nothing happened|i don'?t understand|"
    r"invalid action|unknown command|that'?s not a verb)",
    re.IGNORECASE,
)


def clean(text: str, max_chars: int) -> str:
    """Collapse whitespace and cut to ``max_chars`` characters."""
    text = _WS.sub(" ", text).strip()
    return text if len(text) <= max_chars else text[: max_chars - 3].rstrip() + "..."


def first_sentence(text: str, max_chars: int) -> str:
    text = _WS.sub(" ", text).strip()
    return clean(_SENTENCE_END.split(text, maxsplit=1)[0], max_chars)


def statements(text: str, max_chars: int) -> list[str]:
    """The lines of ``text``, each split into sentences, cleaned; empty ones dropped."""
    out = []
    for line in text.splitlines():
        for sentence in _SENTENCE_END.split(_WS.sub(" ", line).strip()):
            if sentence:
                out.append(clean(sentence, max_chars))
    return out


class TraceExtractor:
    """Deterministic extractor (see the module docstring for its rules)."""

    name = "trace"
    uses_llm = False

    def __init__(self, *, max_facts: int = 80, max_chars: int = 300):
        self.max_facts = max_facts
        self.max_chars = max_chars

    def extract(self, request: ExtractRequest) -> Extraction:
        episode = request.episode
        if request.tree is Tree.ENV:
            known = request.matched if isinstance(request.matched, Knowledge) else None
            alone = self.knowledge(episode)
            merged = self.knowledge(episode, known) if known is not None else alone
            return Extraction(merged, standalone=alone)
        return Extraction(self.skill(episode) if episode.success else self.lesson(episode))

    def compile(self, tree: Tree, composed: Skill | Knowledge | Lesson) -> Extraction:
        """The exact composition is already self-contained; nothing to generalise."""
        return Extraction(composed, note="exact composition")

    def skill(self, episode: Episode) -> Skill:
        last = episode.steps[-1].observation if episode.steps else ""
        return Skill(
            activation=clean(episode.task, self.max_chars),
            steps=tuple(clean(s.action, self.max_chars) for s in episode.steps),
            termination=clean(last, self.max_chars),
        )

    def lesson(self, episode: Episode) -> Lesson:
        return Lesson(
            situation=clean(episode.task, self.max_chars),
            failed=tuple(clean(s.action, self.max_chars) for s in episode.steps),
        )

    def knowledge(self, episode: Episode, known: Knowledge | None = None) -> Knowledge:
        """The episode's facts, after the ``known`` ones when it matched a known scene.

        Over ``max_facts``, the oldest known facts this episode did not observe again go first."""
        own = self._facts(episode)
        trigger = first_sentence(episode.env, self.max_chars)
        if known is None:
            return Knowledge(trigger=trigger, facts=own)
        known_set, own_set = set(known.facts), set(own)
        merged = list(known.facts) + [f for f in own if f not in known_set]
        # Over the cap, forget the oldest facts this episode did not see again.
        overflow = len(merged) - self.max_facts
        if overflow > 0:
            stale = [f for f in merged if f not in own_set][:overflow]
            dropped = set(stale)
            merged = [f for f in merged if f not in dropped]
        return Knowledge(trigger=trigger, facts=tuple(merged))

    def _facts(self, episode: Episode) -> tuple[str, ...]:
        facts: list[str] = []
        seen: set[str] = set()
        for step in episode.steps:
            observation = clean(step.observation, self.max_chars * 10)
            if not observation or _UNINFORMATIVE.match(observation):
                continue
            action = clean(step.action, 80)
            for statement in statements(step.observation, self.max_chars):
                fact = f"{action}: {statement}"
                if fact not in seen and len(facts) < self.max_facts:
                    seen.add(fact)
                    facts.append(fact)
        return tuple(facts)
