"""The read path's ranking rules, on values: no store, no embedder."""

from __future__ import annotations

from deltamem.core.model import Episode, Node, NodeKind, Outcome, Skill, Step, Tree
from deltamem.core.ranking import (
    Candidate,
    best_ties,
    first_round,
    kind_first,
    link,
    rescored,
    same_scene,
    started_here,
    task_ranked,
    trace_signature,
)
from deltamem.core.scoring import penalised, score

PENALTY = 0.3


def cand(node_id: str, score_: float, depth: int = 1) -> Candidate:
    return Candidate(node_id, score_, False, depth, score_)


def node(node_id: str, *, created: float = 0.0, successes: int = 0, failures: int = 0,
         key: str = "k", meta: dict[str, str] | None = None, tree: Tree = Tree.TASK,
         outcome: Outcome = Outcome.SUCCESS) -> Node:
    return Node(node_id, tree, NodeKind.ROOT, outcome, key, content=Skill("s"),
                successes=successes, failures=failures, hits=successes + failures,
                created_at=created, meta=meta or {})


def bad(node_id: str, created: float = 0.0) -> Node:
    """A success whose record is mostly failures (discredited)."""
    return node(node_id, failures=3, created=created)


def test_without_a_discredited_candidate_the_scan_stands():
    found = [cand("a", 0.9), cand("b", 0.8), cand("c", 0.7)]
    nodes = {c.id: node(c.id) for c in found}
    assert task_ranked(found, nodes, 1, PENALTY, exhausted=False).candidates == found


def test_a_discredited_best_is_rescored_and_gives_way():
    found = [cand("a", 0.9), cand("b", 0.8), cand("c", 0.1)]
    nodes = {"a": bad("a"), "b": node("b"), "c": node("c")}
    ranked = task_ranked(found, nodes, 1, PENALTY, exhausted=False).candidates
    assert ranked is not None and [c.id for c in ranked] == ["b", "a"]
    assert ranked[1].discredited and ranked[1].failure
    assert ranked[1].score == penalised(0.9, PENALTY)


def test_when_every_scanned_candidate_is_discredited_the_scan_is_widened():
    """Re-scoring may drop every pooled candidate below one the scan left out."""
    found = [cand("a", 0.9), cand("b", 0.89)]
    nodes = {"a": bad("a"), "b": bad("b")}
    assert task_ranked(found, nodes, 1, PENALTY, exhausted=False).widen
    wider = [*found, cand("c", 0.7), cand("d", 0.65)]
    ranked = task_ranked(wider, {**nodes, "c": node("c"), "d": node("d")}, 1, PENALTY,
                         exhausted=False).candidates
    assert ranked is not None and [c.id for c in ranked] == ["c", "a", "b"]
    # a scan that holds the whole tree is exact even with every candidate discredited
    whole = task_ranked(found, nodes, 1, PENALTY, exhausted=True).candidates
    assert whole is not None and [c.id for c in whole] == ["a", "b"]


def test_rescored_ties_go_to_shallower_then_newer():
    found = [cand("a", 0.9), cand("b", 0.6, depth=2), cand("c", 0.6), cand("d", 0.6)]
    nodes = {"a": bad("a"), "b": node("b", created=5), "c": node("c", created=1),
             "d": node("d", created=2)}
    ranked = task_ranked(found, nodes, 3, 0.3, exhausted=True).candidates
    assert ranked is not None and [c.id for c in ranked] == ["d", "c", "b", "a"]


def test_a_candidate_deleted_since_the_scan_is_dropped():
    found = [cand("gone", 0.9), cand("a", 0.8)]
    kept = rescored(found, {"a": node("a")}, 1, PENALTY)
    assert kept is not None and [c.id for c, _ in kept[0]] == ["a"]


def test_rules_ask_for_more_nodes_past_the_fetched_prefix():
    found = [cand("a", 0.9), cand("b", 0.8), cand("c", 0.7)]
    assert first_round(found, 1) == 2
    assert first_round([cand("a", 0.9), cand("b", 0.9), cand("c", 0.7), cand("d", 0.1)], 1) == 3
    assert first_round(found, 5) == 3
    nodes = {"a": bad("a"), "b": bad("b")}
    assert task_ranked(found, nodes, 1, PENALTY, exhausted=True, fetched=2).fetch_more
    ranked = task_ranked(found, {**nodes, "c": node("c")}, 1, PENALTY, exhausted=True,
                         fetched=3).candidates
    assert ranked is not None and ranked[0].id == "c"
    assert same_scene(found, {"a": node("a", key="x")}, "", lambda k: k, limit=1,
                      fetched=1) is None


def test_same_layout_ties_come_first_and_other_scores_keep_their_place():
    found = [cand("a", 0.9), cand("b", 0.9), cand("c", 0.9), cand("d", 0.5)]
    nodes = {"a": node("a"), "b": node("b", meta={"layout": "kitchen|n=hall"}),
             "c": node("c", meta={"layout": "kitchen|n=hall"}), "d": node("d")}
    assert [c.id for c in best_ties(found)] == ["a", "b", "c"]
    assert [c.id for c in started_here(found, nodes, "kitchen|n=hall")] == ["b", "c", "a", "d"]
    assert started_here(found, nodes, "") == found
    assert [c.id for c in started_here(found, {}, "kitchen|n=hall")] == ["a", "b", "c", "d"]


def test_same_scene_keeps_the_layout_and_puts_the_newest_first():
    found = [cand("a", 0.9), cand("b", 0.9), cand("c", 0.9), cand("d", 0.8)]
    nodes = {"a": node("a", key="room A", created=1), "b": node("b", key="room B", created=9),
             "c": node("c", key="room A again", created=3), "d": node("d", key="room A")}
    signature = lambda text: text.split()[1]  # noqa: E731 - the layout is the second word
    assert [c.id for c in same_scene(found, nodes, "A", signature) or []] == ["c", "a", "d"]
    # with a limit the walk stops after the run of ties of the last kept one
    assert [c.id for c in same_scene(found, nodes, "A", signature, limit=1) or []] == ["c", "a"]
    assert same_scene(found, nodes, "Z", signature) == []


def test_same_scene_matches_other_layouts_by_contents_newest_first():
    """Bad case (ALFWorld dev games, docs/results.md "Memory-quality probe"): knowledge matched
    13 % of unseen floor plans, because a layout is the plan's receptacle list. A scene with
    contents matches the nodes whose contents overlap its own by the threshold, whatever their
    layout, and the newest (which holds the tallies of those before it) comes first."""
    found = [cand("a", 0.95), cand("b", 0.9), cand("c", 0.85), cand("d", 0.8)]
    nodes = {"a": node("a", key="plan1 cabinet countertop fridge", created=1),
             "b": node("b", key="plan2 cabinet countertop fridge sinkbasin", created=5),
             "c": node("c", key="plan3 toilet bathtubbasin", created=9),
             "d": node("d", key="plan4 cabinet fridge", created=3)}
    signature = lambda text: text.split()[0]  # noqa: E731 - the layout is the first word
    contents = lambda text: frozenset(text.split()[1:])  # noqa: E731
    mine = frozenset({"cabinet", "countertop", "fridge", "microwave"})
    assert same_scene(found, nodes, "plan9", signature) == []  # the exact rule: nothing
    kept = same_scene(found, nodes, "plan9", signature, contents=contents, mine=mine,
                      overlap=0.5)
    assert [c.id for c in kept or []] == ["b", "d", "a"]  # overlaps 3/5, 2/4, 3/4; c none
    kept = same_scene(found, nodes, "plan9", signature, contents=contents, mine=mine,
                      overlap=0.6, limit=1)
    assert [c.id for c in kept or []] == ["b", "a"]
    # the newest first among those that clear the threshold only: d (0.8) does not
    kept = same_scene(found, nodes, "plan9", signature, contents=contents, mine=mine,
                      overlap=0.5, threshold=0.85)
    assert [c.id for c in kept or []] == ["b", "a", "d"]
    # without contents of its own, a scene keeps the exact rule
    assert same_scene(found, nodes, "plan1", signature, contents=contents) == [found[0]]


def test_a_link_scores_as_the_scan_does():
    success = node("s")
    failure = node("f", outcome=Outcome.FAILURE)
    assert link(success, 0.8, PENALTY).score == score(0.8, False, PENALTY)
    assert link(failure, 0.8, PENALTY).score == penalised(0.8, PENALTY)
    assert link(bad("d"), 0.8, PENALTY).failure
    assert not link(node("e", failures=3, tree=Tree.ENV), 0.8, PENALTY).failure
    assert link(success, None, PENALTY).similarity == 0.0


def test_trace_signature_sees_what_each_tree_sees():
    steps = (Step("go north", "a hall"),)
    one = Episode("task", "scene", steps, success=True)
    other_obs = Episode("task", "scene", (Step("go north", "a cellar"),), success=True)
    failed = Episode("task", "scene", steps, success=False)
    assert trace_signature(one, Tree.TASK) == trace_signature(other_obs, Tree.TASK)
    assert trace_signature(one, Tree.ENV) != trace_signature(other_obs, Tree.ENV)
    assert trace_signature(one, Tree.TASK) != trace_signature(failed, Tree.TASK)
    assert trace_signature(one, Tree.TASK) != trace_signature(one, Tree.ENV)


# -- kind_first: the template's similarity beside the score -------------------------------------

def test_kind_first_prefers_the_key_nearest_the_template_over_a_higher_score() -> None:
    # The case: "cool some plate ..." recalled "heat some mug ..." at a higher cosine
    # (the shared object). The template similarity of the cool skill wins, also below the
    # threshold: the threshold decided that something matched (the best score clears it).
    found = [cand("heat-mug", 0.77), cand("cool-plate", 0.60), cand("cool-egg", 0.50)]
    kinds = {"heat-mug": 0.55, "cool-plate": 0.70, "cool-egg": 0.75}
    out = kind_first(found, kinds, threshold=0.54, weight=4.0)
    assert [c.id for c in out] == ["cool-egg", "heat-mug", "cool-plate"]
    assert out[0].score == 0.50  # scores are unchanged


def test_kind_first_leaves_an_unmatched_query_and_weight_zero_alone() -> None:
    found = [cand("heat-mug", 0.50), cand("cool-plate", 0.40)]
    kinds = {"heat-mug": 0.1, "cool-plate": 0.9}
    assert kind_first(found, kinds, threshold=0.54) == found  # nothing clears: nothing matched
    found = [cand("heat-mug", 0.80), cand("cool-plate", 0.70)]
    assert kind_first(found, kinds, threshold=0.54, weight=0.0) == found
    assert kind_first(found[:1], kinds, threshold=0.54) == found[:1]  # one: no choice
    assert kind_first(found, {}, threshold=0.54) == found  # no template: the score decides


def test_kind_first_never_shows_a_candidate_matched_neither_by_score_nor_by_template() -> None:
    found = [cand("a", 0.80), cand("b", 0.30), cand("c", 0.20)]
    kinds = {"a": 0.30, "b": 0.53, "c": 0.55}  # b's 0.3 + 2.12 is the best sum, yet ...
    assert [c.id for c in kind_first(found, kinds, threshold=0.54, weight=4.0)] == \
        ["c", "a", "b"]  # ... only c clears the threshold by its template
    kinds["c"] = 0.50
    assert kind_first(found, kinds, threshold=0.54, weight=4.0) == found
