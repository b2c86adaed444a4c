"""Text rules shared by every scene plug-in and the trace extractor (no domain phrasing).

* whitespace and length: :func:`flat`, :func:`clean`, :func:`first_sentence`;
* noise: :func:`rejected` (an invalid-action reply: the step did not happen), :func:`says_nothing`
  (empty, rejected, or a reply that says nothing changed);
* scores: :func:`lowered_score` (a mistake), :func:`earned_nothing` (no evidence it worked).

These sit under both ``deltamem.extract.trace`` and the scenes so that neither imports the other's
package in a circle; ``deltamem.extract.trace`` re-exports them under their old names.
"""

from __future__ import annotations

import re

from deltamem.core.model import Step

_WS = re.compile(r"\s+")
SENTENCE_END = re.compile(r"(?<=[.!?])\s")
_REJECTED = re.compile(
    r"^(no known action matches|i don'?t understand|invalid action|unknown command|"
    r"that'?s not a verb|you can'?t do that)",
    re.IGNORECASE,
)
_NO_OP = re.compile(
    r"^(nothing happens|nothing happened|(?:the|this|that|it) [\w -]*is already|"
    r"you are already|you decide to wait)",
    re.IGNORECASE,
)


def flat(text: str) -> str:
    """``text`` with its whitespace collapsed to single spaces and trimmed."""
    return _WS.sub(" ", text).strip()


def clean(text: str, max_chars: int) -> str:
    """Collapse whitespace and cut to ``max_chars`` characters."""
    text = flat(text)
    return text if len(text) <= max_chars else text[: max_chars - 3].rstrip() + "..."


def first_sentence(text: str, max_chars: int) -> str:
    """The first sentence of ``text``, whitespace collapsed, cut to ``max_chars``."""
    text = flat(text)
    return clean(SENTENCE_END.split(text, maxsplit=1)[0], max_chars)


def rejected(observation: str) -> bool:
    """Whether an observation is an invalid-action reply (the step did not happen)."""
    return bool(_REJECTED.match(flat(observation)))


def says_nothing(observation: str) -> bool:
    """Whether an observation carries no scene information (empty, rejected or a no-op)."""
    text = flat(observation)
    return not text or bool(_REJECTED.match(text) or _NO_OP.match(text))


def lowered_score(step: Step) -> bool:
    """Whether the step is known to have lowered the environment's score (a mistake)."""
    return step.reward is not None and step.reward < 0


def earned_nothing(step: Step) -> bool:
    """Whether the environment scored the step and it gained nothing (``Step.reward <= 0``).

    In a failed episode such a step is no evidence of what works: it is no "worked" step of the
    lesson and gives no action fact (``open cabinet: It's empty inside.`` played by an agent
    that lost)."""
    return step.reward is not None and step.reward <= 0
