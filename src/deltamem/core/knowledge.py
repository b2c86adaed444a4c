"""Scene-knowledge rules: fact subjects, supersession, contradictions and tie orders.

A fact is a short statement ``"<subject>: <statement>"`` -- "North of the kitchen: the
corridor", "In the pantry: a shelf, a coin". The subject is what the fact is about; a body of
knowledge holds at most one statement per subject. A fact without a ``": "`` separator (or with a
separator too far in to be a subject) is its own subject, so it can only repeat, never contradict.

* :func:`supersede` merges newer facts into older ones: a newer fact about a known subject
  replaces the older statement *in place* (so the stored delta is a one-item replacement that
  names what it replaces, and the older text stays in the chain's history); facts about new
  subjects are appended.
* :func:`contradictions` lists the pairs of different statements about one subject (the
  invariant is that composed knowledge has none).
* :func:`latest_first` and :func:`same_layout_first` reorder exact score ties (newest first; the
  ones learned under a given scene signature first).

Nothing here knows a domain's phrasing: what a scene *is* (its signature, its places, which
observations are facts) is a scene plug-in's business (``deltamem.scenes``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

SUBJECT_SEP = ": "
MAX_SUBJECT_CHARS = 60

_SENTENCE_END = re.compile(r"[.!?](?:\s|$)")


def fact_subject(fact: str) -> str:
    """The subject a fact is about (case-folded), or the whole fact when it has none."""
    head, sep, rest = fact.partition(SUBJECT_SEP)
    head = head.strip()
    if sep and rest.strip() and 0 < len(head) <= MAX_SUBJECT_CHARS \
            and not _SENTENCE_END.search(head):
        return " ".join(head.lower().split())
    return " ".join(fact.lower().split())


def supersede(known: Iterable[str], newer: Iterable[str]) -> tuple[str, ...]:
    """``known`` facts updated by ``newer`` ones, one statement per subject.

    A newer fact about a subject already present replaces it where it stands; a fact about a new
    subject is appended. Duplicates within either input collapse the same way (the later wins),
    so ``supersede((), facts)`` normalises a list.
    """
    out: list[str] = []
    where: dict[str, int] = {}
    for fact in (*known, *newer):
        subject = fact_subject(fact)
        if subject in where:
            out[where[subject]] = fact
        else:
            where[subject] = len(out)
            out.append(fact)
    return tuple(out)


def contradictions(facts: Iterable[str]) -> list[tuple[str, str]]:
    """Pairs of different facts about the same subject, in order of appearance."""
    seen: dict[str, list[str]] = {}
    pairs: list[tuple[str, str]] = []
    for fact in facts:
        earlier = seen.setdefault(fact_subject(fact), [])
        pairs += [(old, fact) for old in earlier if old != fact]
        if fact not in earlier:
            earlier.append(fact)
    return pairs


# -- tie orders ------------------------------------------------------------------------------

class _Scored(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def score(self) -> float: ...


S = TypeVar("S", bound=_Scored)


def _within_ties(ranked: Sequence[S], key: Callable[[S], Any]) -> list[S]:
    """``ranked`` (best score first) with each run of exactly tied scores sorted by ``key``
    (stable, so equal keys keep their order); different scores never change places."""
    out: list[S] = []
    start = 0
    while start < len(ranked):
        end = start
        while end < len(ranked) and ranked[end].score == ranked[start].score:
            end += 1
        out += sorted(ranked[start:end], key=key)
        start = end
    return out


def latest_first(ranked: Sequence[S], created: Mapping[str, float]) -> list[S]:
    """``ranked`` (best score first) with each run of exactly tied scores newest first.

    Knowledge of one scene is a snapshot that later episodes supersede, so among environment
    nodes that tie (same scene text, same vector) the latest word wins.
    """
    return _within_ties(ranked, lambda c: -created.get(c.id, 0.0))


def same_layout_first(ranked: Sequence[S], layouts: Mapping[str, str], layout: str) -> list[S]:
    """``ranked`` (best score first) with each run of exactly tied scores reordered so that the
    candidates whose ``layouts`` entry equals ``layout`` come first (otherwise in order)."""
    return _within_ties(ranked, lambda c: layouts.get(c.id) != layout)
