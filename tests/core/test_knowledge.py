"""Scene-knowledge rules, property-tested on real text."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st
from real_text import text

from deltamem.core.knowledge import (
    contradictions,
    fact_subject,
    latest_first,
    same_layout_first,
    supersede,
)

subjects = st.one_of(st.sampled_from(["North", "north ", "In the pantry", "The door"]), text)
facts = st.one_of(text, st.builds(lambda s, v: f"{s}: {v}", subjects, text))
fact_lists = st.lists(facts, max_size=12)


@given(fact_lists, fact_lists)
def test_supersede_keeps_one_statement_per_subject_the_latest(known, newer):
    """The result has no contradictions, one fact per subject, and for every subject the last
    statement made about it; known subjects keep their place."""
    merged = supersede(known, newer)
    assert contradictions(merged) == []
    subjects_of = [fact_subject(f) for f in merged]
    assert len(subjects_of) == len(set(subjects_of))
    last = {fact_subject(f): f for f in (*known, *newer)}
    assert set(merged) == set(last.values())
    assert subjects_of == list(dict.fromkeys(fact_subject(f) for f in (*known, *newer)))
    assert supersede((), merged) == merged


@given(fact_lists)
def test_contradictions_are_the_pairs_of_different_statements(facts):
    """Each pair is about one subject and differs; a list with no repeated subject has none."""
    pairs = contradictions(facts)
    assert all(fact_subject(a) == fact_subject(b) and a != b for a, b in pairs)
    if len({fact_subject(f) for f in facts}) == len(facts):
        assert pairs == []


@dataclass(frozen=True)
class Cand:
    id: str
    score: float


ranked = st.lists(st.sampled_from([0.9, 0.5, 0.1]), max_size=10).map(
    lambda scores: [Cand(f"c{i}", s) for i, s in enumerate(sorted(scores, reverse=True))])


@given(ranked, st.data())
def test_tie_reorderings_only_permute_within_ties(cands, data):
    """latest_first and same_layout_first keep the score order and every candidate; inside a
    tie, the newest (or the same layout) comes first."""
    created = {c.id: data.draw(st.floats(0, 10)) for c in cands}
    layouts = {c.id: data.draw(st.sampled_from(["a", "b"])) for c in cands}
    for out in (latest_first(cands, created), same_layout_first(cands, layouts, "a")):
        assert sorted(out, key=lambda c: c.id) == sorted(cands, key=lambda c: c.id)
        assert [c.score for c in out] == [c.score for c in cands]
    newest = latest_first(cands, created)
    same = same_layout_first(cands, layouts, "a")
    for a, b in zip(newest, newest[1:], strict=False):
        assert a.score != b.score or created[a.id] >= created[b.id]
    for a, b in zip(same, same[1:], strict=False):
        assert a.score != b.score or layouts[a.id] == "a" or layouts[b.id] != "a"
