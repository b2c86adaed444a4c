"""Template and slots of a task key: what a task does, apart from what it does it to.

Templated tasks share most of their words ("heat some mug and put it in countertop", "cool some
mug and put it in countertop"), and a sentence embedding weighs the shared object and
receptacle above the one word that changes the procedure. A key's **slots** are its words that
name the entities its episode acted on; the rest is its **template** ("heat some and put it
in"). Recall compares the query's template with the stored keys beside the full cosine
(``core.ranking.kind_first``), so the kind of task decides which skill comes first.

What is a slot is read from the episode itself, never from a list of words: a word of the key
that is an *argument* of one of the episode's actions (any word of an action but its first,
the verb) and never the verb of one. "take mug 1 from countertop 1" makes ``mug`` and
``countertop`` slots of "put a clean mug in countertop"; ``clean`` stays in the template
("clean mug 1 with sinkbasin 1" has it as a verb). A coding session's file names, paths and
command arguments are slots the same way ("Bash: pytest tests/test_api.py" makes ``tests``,
``api``, ``py`` slots of "fix the failing case in tests/test_api.py").

A query has no episode: its slots are its words that the stored keys holding them hold as
slots more often than not (:func:`query_slots`).

:func:`roles` maps a recalled key's slots onto a new task's by their order in the template,
or by a word alignment of the two keys ("heat some mug and put it in countertop" with slots
``mug``, ``countertop`` against "put a hot egg in shelf" maps mug -> egg, countertop -> shelf),
and :func:`adapt`
rewrites a recalled step by them: a procedure learned on one object and receptacle is handed
over for another by role, not by a shared instance number.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from functools import lru_cache

_WORD = re.compile(r"[^\W\d_]+")
_SPLIT = re.compile(r"\S+")
WORDS_CACHED = 8192  # texts whose word split (:func:`_words`) is kept: recall cuts the same keys


def tokens(text: str) -> list[str]:
    """The words of ``text``: runs of letters, case-folded (numbers name instances)."""
    return _WORD.findall(text.lower())


def slots_of(key: str, actions: Iterable[str]) -> tuple[str, ...]:
    """The words of ``key`` that name what ``actions`` acted on: arguments of an action (every
    word but its first) that are the verb (first word) of none; sorted, each once."""
    verbs: set[str] = set()
    arguments: set[str] = set()
    for action in actions:
        words = tokens(action)
        if words:
            verbs.add(words[0])
            arguments.update(words[1:])
    return tuple(sorted(w for w in set(tokens(key)) if w in arguments and w not in verbs))


@lru_cache(maxsize=WORDS_CACHED)
def _words(text: str) -> tuple[tuple[str, frozenset[str]], ...]:
    """``text``'s whitespace-separated words, each with its letters' :func:`tokens` (a pure
    function of ``text``, kept: recall cuts the templates of the same stored keys again and
    again)."""
    return tuple((word, frozenset(tokens(word))) for word in _SPLIT.findall(text))


@lru_cache(maxsize=WORDS_CACHED)
def key_words(text: str) -> frozenset[str]:
    """The distinct :func:`tokens` of ``text`` (kept, as :func:`_words`)."""
    return frozenset(tokens(text))


def template(text: str, slots: Collection[str]) -> str:
    """``text`` without its slot words: each whitespace-separated word whose letters are all
    slots is dropped ("put a clean mug in countertop." with ``mug``, ``countertop`` -> "put a
    clean in"); punctuation goes with its word."""
    if not slots:
        return text
    return _cut(text, frozenset(slots))


@lru_cache(maxsize=WORDS_CACHED)
def _cut(text: str, cut: frozenset[str]) -> str:
    """:func:`template` of ``text`` by ``cut`` (kept: recall cuts the same keys by the same
    votes again and again)."""
    return " ".join(word for word, letters in _words(text) if not letters or not letters <= cut)


def slot_votes(stored: Iterable[tuple[str, Collection[str]]]) -> dict[str, int]:
    """Each key word's vote over ``stored`` (``(key, slots)`` pairs): +1 for every key that
    holds it as a slot, -1 for every key that holds it in its template. A word is a slot of
    the pool when its vote is positive (:func:`query_slots`, :func:`pool_template`)."""
    votes: dict[str, int] = {}
    for key, slots in stored:
        for word in key_words(key):
            votes[word] = votes.get(word, 0) + (1 if word in slots else -1)
    return votes


def query_slots(query: str, stored: Iterable[tuple[str, Collection[str]]]) -> frozenset[str]:
    """The slots of a query: its words that the stored keys holding them hold as a slot more
    often than in their template (``stored``: ``(key, slots)`` pairs). "living" is a slot of a
    key whose agent went to the living room and the kind of "find a living thing": the keys
    vote. A word no stored key acted on stays in the template: an alignment with the stored
    keys would also take a new kind word ("cold" where a key has "hot") for a slot."""
    votes = slot_votes(stored)
    return frozenset(w for w in key_words(query) if votes.get(w, 0) > 0)


def pool_template(key: str, slots: Collection[str], votes: Mapping[str, int]) -> str:
    """A stored key's template as the query's is cut: without those of its slots the pool does
    not vote against (``votes``, :func:`slot_votes`). A word one episode happened to act on
    ("the" of "go to the plant") but most keys hold in their template stays, on both sides, so
    a query and its own key get the same template."""
    return template(key, tuple(w for w in slots if votes.get(w, 1) > 0))


def _runs(old: Sequence[str], new: Sequence[str]) -> Iterable[tuple[str, str]]:
    """Word pairs of the equal-length replaced runs of a ``difflib`` alignment."""
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "replace" and i2 - i1 == j2 - j1:
            yield from zip(old[i1:i2], new[j1:j2], strict=True)


def ordered(text: str, slots: Collection[str]) -> list[str]:
    """The ``slots`` that ``text`` names, in the order it first names them."""
    return list(dict.fromkeys(w for w in tokens(text) if w in slots))


def roles(key: str, slots: Collection[str], task: str,
          task_slots: Collection[str] = ()) -> dict[str, str]:
    """Which of ``task``'s words fills each of ``key``'s slots.

    By role in the template: when ``task_slots`` (the task's own slots, :func:`query_slots`)
    are as many as the key's, the key's slots map in the order each names them ("heat some mug
    and put it in shelf" -> "put a hot egg in countertop": mug -> egg, shelf -> countertop; the
    object comes before the destination in either phrasing). Otherwise by a word alignment of
    the two texts: the word that takes a slot's place in a replaced run of equal length. A
    slot that maps to nothing, or to itself, is left out."""
    mine, theirs = ordered(key, slots), ordered(task, task_slots)
    if mine and len(mine) == len(theirs):
        pairs: Iterable[tuple[str, str]] = zip(mine, theirs, strict=True)
    else:
        pairs = ((old, new) for old, new in _runs(tokens(key), tokens(task)) if old in slots)
    out: dict[str, str] = {}
    for old, new in pairs:
        if old != new:
            out.setdefault(old, new)
    return out


def adapt(step: str, mapping: Mapping[str, str]) -> str:
    """``step`` with each word that is a key of ``mapping`` replaced by its value (whole words,
    case-folded match; numbers and punctuation kept)."""
    if not mapping:
        return step
    return _WORD.sub(lambda m: mapping.get(m.group(0).lower(), m.group(0)), step)
