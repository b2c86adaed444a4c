"""Scene-knowledge rules, property-tested on real text."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st
from real_text import text

from deltamem.core.delta import apply, diff
from deltamem.core.knowledge import (
    absorb,
    claim_key,
    contradictions,
    episode_tendencies,
    fact_subject,
    latest_first,
    same_layout_first,
    scene_overlap,
    supersede,
    tendency,
)
from deltamem.core.model import Knowledge

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


# -- tendencies: facts with support counts ----------------------------------------------------

def test_a_tendency_counts_support_seen_again_and_contradicted():
    """A claim seen again adds k and n; a claim the newer episode contradicts (it observed the
    subject elsewhere) adds n without k; a new claim starts at 1 of the summed n. Subjects the
    episode did not observe keep their counts; best supported first."""
    first = episode_tendencies(["mug: found in cabinet", "apple: found in fridge"])
    assert first == ("mug: found in cabinet (1 of 1 episodes)",
                     "apple: found in fridge (1 of 1 episodes)")
    second = absorb(first, episode_tendencies(["mug: found in cabinet"]))
    assert second[0] == "mug: found in cabinet (2 of 2 episodes)"
    third = absorb(second, episode_tendencies(["mug: found in countertop",
                                               "bowl: found in shelf"]))
    assert third == ("mug: found in cabinet (2 of 3 episodes); "
                     "found in countertop (1 of 3 episodes)",
                     "apple: found in fridge (1 of 1 episodes)",
                     "bowl: found in shelf (1 of 1 episodes)")
    fourth = absorb(third, episode_tendencies(["mug: found in countertop"]))
    parsed = tendency(fourth[0])
    assert parsed is not None and parsed.n == 4
    # equal support: the claim the latest episode showed comes first
    assert parsed.claims == (("found in countertop", 2), ("found in cabinet", 2))
    assert contradictions(fourth) == []


def test_one_episode_counts_a_claim_once_and_the_newer_text_is_kept():
    """Within an episode a subject is one fact, each claim once; claims agree without their
    parenthesised details, and the newer wording is kept ("tests run with `pytest -q` in k of n
    sessions" whatever each run's totals)."""
    one = episode_tendencies(["mug: found in cabinet", "mug: found in cabinet",
                              "mug: found in drawer"])
    assert one == ("mug: found in cabinet (1 of 1 episodes); found in drawer (1 of 1 episodes)",)
    runs = ["tests (pytest): `pytest -q` works (5 passed in 0.31s)",
            "tests (pytest): `pytest -q` works (7 passed in 0.40s)"]
    known = episode_tendencies(runs[:1], "sessions")
    merged = absorb(known, episode_tendencies(runs[1:], "sessions"))
    assert merged == ("tests (pytest): `pytest -q` works (7 passed in 0.40s) (2 of 2 sessions)",)
    assert claim_key("`pytest -q` works (5 passed)") == claim_key("`pytest -q` works (7 passed)")


def test_a_plain_fact_becomes_one_of_one_when_a_tendency_tallies_with_it():
    merged = absorb(["mug: found in cabinet"], episode_tendencies(["mug: found in cabinet"]))
    assert merged == ("mug: found in cabinet (2 of 2 episodes)",)


@given(fact_lists, fact_lists)
def test_absorb_is_supersede_for_plain_facts(known, newer):
    """Without counts, absorbing is superseding: the old rule holds unchanged."""
    plain = [f for f in (*known, *newer) if tendency(f) is None]
    cut = len([f for f in known if tendency(f) is None])
    assert absorb(plain[:cut], plain[cut:]) == supersede(plain[:cut], plain[cut:])


# At most MAX_CLAIMS distinct claims, so that none is dropped and every count is exact.
claims = st.sampled_from(["found in cabinet", "found in drawer", "`make test` works (3 passed)",
                          "`make test` fails: \"E1\""])
episodes = st.lists(st.lists(st.tuples(st.sampled_from(["mug", "apple", "tests (make)"]),
                                       claims), max_size=5), min_size=1, max_size=6)


@given(episodes)
def test_tendencies_tally_exactly_and_compose_as_residuals(seen):
    """Across episodes each subject's n is the episodes that observed it and each claim's k the
    ones that showed it (up to the best few claims); every episode's residual touches only the
    subjects it observed, and composing the residuals gives the tallies back exactly."""
    known = Knowledge("You are in the middle of a room.")
    for observed in seen:
        facts = episode_tendencies(f"{s}: {c}" for s, c in observed)
        merged = Knowledge(known.trigger, absorb(known.facts, facts))
        patch = diff(known, merged)
        assert apply(known, patch) == merged
        untouched = [f for f in known.facts if fact_subject(f) not in
                     {fact_subject(g) for g in facts}]
        assert all(f in merged.facts for f in untouched)
        assert contradictions(merged.facts) == []
        known = merged
    for subject in {s for observed in seen for s, _ in observed}:
        [fact] = [f for f in known.facts if fact_subject(f) == subject]
        counted = tendency(fact)
        assert counted is not None
        assert counted.n == sum(any(s == subject for s, _ in ep) for ep in seen)
        for claim, k in counted.claims:
            assert k == sum(any(s == subject and claim_key(c) == claim_key(claim)
                                for s, c in ep) for ep in seen)


def test_scene_overlap_is_the_jaccard_of_contents():
    a, b = frozenset({"cabinet", "countertop", "fridge"}), frozenset({"cabinet", "fridge"})
    assert scene_overlap(a, b) == 2 / 3
    assert scene_overlap(a, frozenset()) == 0.0
