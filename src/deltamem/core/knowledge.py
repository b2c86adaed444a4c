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

**Tendencies** -- facts with support counts. A scene plug-in may state a fact as a tendency:
``"<subject>: <claim> (k of n <unit>)"``, several claims about one subject joined by ``"; "``
(``"mug: found in cabinet (3 of 4 episodes); found in countertop (1 of 4 episodes)"``): of the
``n`` episodes (sessions, ...) that observed the subject, ``k`` showed the claim.
:func:`episode_tendencies` writes one episode's observations in that form (``1 of 1``);
:func:`absorb` merges newer facts into known ones -- a tendency *tallies*: a claim seen again
adds its ``k``, a claim of an observed subject that the newer facts do not show adds ``n``
without ``k`` (it was contradicted), a new claim starts at the newer ``k`` of the summed ``n``;
a plain fact supersedes as before; best supported claims first, the latest among equals. The
subject stays one fact, so the delta an episode writes
is the one-item replacement of each subject it observed, and composition stays exact. Two
claims are the same claim when they agree once parenthesised details are dropped
(:func:`claim_key`: "`pytest -q` works (5 passed)" is "`pytest -q` works (7 passed)" seen
again, the newer text kept).

**Scene contents** -- :func:`scene_overlap`: the Jaccard overlap of two scenes' entity types
(what a scene plug-in's ``contents`` returns), for matching knowledge across layouts by what
the scenes contain rather than by an exact signature (:data:`SCENE_OVERLAP`).

Nothing here knows a domain's phrasing: what a scene *is* (its signature, its places, which
observations are facts) is a scene plug-in's business (``deltamem.scenes``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
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


# -- tendencies: facts with support counts ------------------------------------------------------

# One claim's count at its end: " (k of n <unit>)", followed by the next claim or the end.
_COUNT = re.compile(r" \((\d+) of (\d+) ([a-z]+)\)(?:; |$)")
_PARENTHESISED = re.compile(r"\([^()]*\)")
# Claims kept per subject: the best supported (a subject seen in many places keeps its main ones).
MAX_CLAIMS = 4
# The least :func:`scene_overlap` at which two scenes' knowledge is shared (chosen on the
# memory-quality probe's 120 dev games, docs/results.md "Turn 6: tendencies": the lower, the
# more episodes one chain tallies, and the better its first search hint).
SCENE_OVERLAP = 0.2


@dataclass(frozen=True, slots=True)
class Tendency:
    """A subject's claims with their support: ``claims`` is ``((claim, k), ...)``, best
    supported first; ``n`` the episodes (``unit``) that observed the subject."""

    subject: str
    claims: tuple[tuple[str, int], ...]
    n: int
    unit: str

    def text(self) -> str:
        """The fact: ``"<subject>: <claim> (k of n <unit>); ..."``."""
        shown = "; ".join(f"{claim} ({k} of {self.n} {self.unit})" for claim, k in self.claims)
        return f"{self.subject}{SUBJECT_SEP}{shown}"


def claim_key(claim: str) -> str:
    """What identifies a claim: its text without parenthesised details, case-folded."""
    return " ".join(_PARENTHESISED.sub(" ", claim).lower().split()).rstrip(".")


def tendency(fact: str) -> Tendency | None:
    """The tendency a fact states, or None for a plain fact (no count after every claim)."""
    head, sep, rest = fact.partition(SUBJECT_SEP)
    if not sep or not rest:
        return None
    claims: list[tuple[str, int]] = []
    n, unit, at = 0, "", 0
    for match in _COUNT.finditer(rest):
        k, total, this_unit = int(match.group(1)), int(match.group(2)), match.group(3)
        claim = rest[at:match.start()].strip()
        if not claim or k > total or (claims and (total, this_unit) != (n, unit)):
            return None
        claims.append((claim, k))
        n, unit, at = total, this_unit, match.end()
    if not claims or at != len(rest):
        return None
    return Tendency(head.strip(), tuple(claims), n, unit)


def episode_tendencies(facts: Iterable[str], unit: str = "episodes") -> tuple[str, ...]:
    """One episode's observations ``"<subject>: <claim>"`` as tendencies: each subject once,
    its distinct claims in order, each ``1 of 1 <unit>``."""
    claims: dict[str, list[str]] = {}
    heads: dict[str, str] = {}
    for fact in facts:
        head, _, claim = fact.partition(SUBJECT_SEP)
        subject = fact_subject(fact)
        heads.setdefault(subject, head.strip())
        mine = claims.setdefault(subject, [])
        if claim.strip() and claim_key(claim) not in {claim_key(c) for c in mine}:
            mine.append(claim.strip())
    return tuple(Tendency(heads[s], tuple((c, 1) for c in cs[:MAX_CLAIMS]), 1, unit).text()
                 for s, cs in claims.items() if cs)


def tally(known: Tendency, newer: Tendency, max_claims: int = MAX_CLAIMS, *,
          latest: bool = False) -> Tendency:
    """``known`` with ``newer``'s counts added (see the module docstring): the same claim adds
    ``k`` (the newer text kept), a known claim the newer one lacks keeps its ``k`` of the summed
    ``n``, a new claim brings its ``k``; best supported first, and among equals the claims
    ``newer`` shows first (the latest word), at most ``max_claims``. ``latest``: the claims
    ``newer`` shows first whatever their support (with ``max_claims`` 1, the latest statement
    with its support: :func:`supersede` with counts)."""
    counts: dict[str, list[Any]] = {claim_key(c): [c, k] for c, k in known.claims}
    for claim, k in newer.claims:
        slot = counts.setdefault(claim_key(claim), [claim, 0])
        slot[0] = claim
        slot[1] += k
    shown = {claim_key(c) for c, _ in newer.claims}
    def order(slot: list[Any]) -> tuple[int, ...]:
        old = claim_key(slot[0]) not in shown
        return (old, -slot[1]) if latest else (-slot[1], old)

    ranked = sorted(counts.values(), key=order)[:max(max_claims, 1)]
    return Tendency(newer.subject, tuple((c, k) for c, k in ranked), known.n + newer.n,
                    newer.unit)


def absorb(known: Iterable[str], newer: Iterable[str], max_claims: int = MAX_CLAIMS, *,
           latest: bool = False) -> tuple[str, ...]:
    """``known`` facts updated by ``newer`` ones, one fact per subject: a newer tendency tallies
    with the known one about its subject (:func:`tally`, keeping ``max_claims``, ``latest``
    first if asked; a known plain fact counts as ``1 of 1``), a newer plain fact supersedes
    (:func:`supersede`), each in place; new subjects are appended."""
    out = list(supersede((), known))  # one fact per subject, the last of each, in place
    where = {fact_subject(fact): i for i, fact in enumerate(out)}
    for fact in newer:
        subject = fact_subject(fact)
        new = tendency(fact)
        if subject not in where:
            where[subject] = len(out)
            out.append(fact)
        elif new is None:
            out[where[subject]] = fact
        else:
            old = tendency(out[where[subject]])
            if old is None:
                claim = out[where[subject]].partition(SUBJECT_SEP)[2].strip()
                old = Tendency(new.subject, ((claim, 1),) if claim else (), int(bool(claim)),
                               new.unit)
            out[where[subject]] = tally(old, new, max_claims, latest=latest).text()
    return tuple(out)


def scene_overlap(a: frozenset[str], b: frozenset[str]) -> float:
    """The Jaccard overlap of two scenes' entity types (0 when either has none)."""
    return len(a & b) / len(a | b) if a and b else 0.0


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
