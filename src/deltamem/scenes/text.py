"""Text rules shared by every scene plug-in and the trace extractor (no domain phrasing).

* whitespace and length: :func:`flat`, :func:`clean`, :func:`first_sentence`;
* noise: :class:`Noise` -- which replies say the step did not happen (*rejected*: "Invalid
  action", "I don't understand") or changed nothing (*no-op*: "Nothing happens", "The door is
  already open"). :data:`GENERIC` knows only such domain-free phrasing; a scene plug-in may carry
  its own ``noise`` with its domain's phrases added (the text-game scene does), which the trace
  extractor then uses. :func:`rejected` and :func:`says_nothing` apply :data:`GENERIC`;
* scores: :func:`lowered_score` (a mistake), :func:`earned_nothing` (no evidence it worked).

These sit under both ``deltamem.extract.trace`` and the scenes so that neither imports the other's
package in a circle; ``deltamem.extract.trace`` re-exports them under their old names.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from deltamem.core.model import Step

_WS = re.compile(r"\s+")
SENTENCE_END = re.compile(r"(?<=[.!?])\s")
# Replies, at their start, that say the step did not happen / changed nothing (regex pieces).
REJECTED_PHRASES = (r"i don'?t understand", r"invalid action", r"unknown command",
                    r"you can'?t do that")
NO_OP_PHRASES = (r"nothing happens", r"nothing happened", r"(?:the|this|that|it) [\w -]*is already",
                 r"you are already")


class Noise:
    """Which replies carry no information: *rejected* (the step did not happen) and *no-op*
    (nothing changed), each a reply that starts with one of the phrases (regex pieces, matched
    case-insensitively after whitespace is collapsed). The generic phrases are always included;
    ``rejected`` and ``no_op`` add a domain's own."""

    def __init__(self, rejected: Sequence[str] = (), no_op: Sequence[str] = ()) -> None:
        self.rejected_phrases = (*REJECTED_PHRASES, *rejected)
        self.no_op_phrases = (*NO_OP_PHRASES, *no_op)
        self._rejected = re.compile(f"^({'|'.join(self.rejected_phrases)})", re.IGNORECASE)
        self._no_op = re.compile(f"^({'|'.join(self.no_op_phrases)})", re.IGNORECASE)

    def rejected(self, observation: str) -> bool:
        """Whether an observation is an invalid-action reply (the step did not happen)."""
        return bool(self._rejected.match(flat(observation)))

    def says_nothing(self, observation: str) -> bool:
        """Whether an observation carries no scene information (empty, rejected or a no-op)."""
        text = flat(observation)
        return not text or bool(self._rejected.match(text) or self._no_op.match(text))


def noise_of(scene: object) -> Noise:
    """The noise rules of a scene plug-in: its ``noise`` attribute, else :data:`GENERIC`."""
    noise = getattr(scene, "noise", None)
    return noise if isinstance(noise, Noise) else GENERIC


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


GENERIC = Noise()


def rejected(observation: str) -> bool:
    """Whether an observation is a generic invalid-action reply (:data:`GENERIC`)."""
    return GENERIC.rejected(observation)


def says_nothing(observation: str) -> bool:
    """Whether an observation carries no information by the generic rules (:data:`GENERIC`)."""
    return GENERIC.says_nothing(observation)


def lowered_score(step: Step) -> bool:
    """Whether the step is known to have lowered the environment's score (a mistake)."""
    return step.reward is not None and step.reward < 0


def earned_nothing(step: Step) -> bool:
    """Whether the environment scored the step and it gained nothing (``Step.reward <= 0``).

    In a failed episode such a step is no evidence of what works: it is no "worked" step of the
    lesson and gives no action fact (``open cabinet: It's empty inside.`` played by an agent
    that lost)."""
    return step.reward is not None and step.reward <= 0
