"""Placement, consolidation eligibility and integrity rules of residual trees."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from real_text import chain_of, experiences

from deltamem.core.delta import compose, diff, patch_chars
from deltamem.core.model import (
    Knowledge,
    Lesson,
    Node,
    NodeKind,
    Outcome,
    Skill,
    Tree,
    experience_chars,
)
from deltamem.core.tree import (
    Action,
    Evidence,
    Placement,
    chain_evidence,
    choose_placement,
    compose_chain,
    consolidation_meta,
    discredited,
    due_for_consolidation,
    forest_problems,
    growth_chain,
    place,
    retirement,
    success_prefix,
)

BASE = Skill("heat the apple", ("go to kitchen", "take apple", "heat apple"), "apple is hot")


def root(exp=BASE, node_id="r", outcome=Outcome.SUCCESS, tree=Tree.TASK):
    return Node(node_id, tree, NodeKind.ROOT, outcome, "key", content=exp)


def child(parent, exp_from, exp_to, node_id, outcome=Outcome.SUCCESS, **kw):
    return Node(node_id, parent.tree, NodeKind.DELTA, outcome, "key", parent_id=parent.id,
                depth=parent.depth + 1, patch=diff(exp_from, exp_to), **kw)


def test_no_match_places_a_root():
    """Nothing matched: the experience becomes a new root."""
    assert place(BASE, []).action is Action.ROOT


def test_same_experience_is_a_dedup():
    """An episode that teaches nothing new writes no node."""
    r = root()
    placement = place(BASE, [r])
    assert (placement.action, placement.anchor) == (Action.DEDUP, "r")


def test_new_experience_is_a_delta_child_holding_the_residual():
    """A different experience becomes a child of the match holding only the difference."""
    new = Skill(BASE.activation, (*BASE.steps, "put apple on table"), BASE.termination)
    placement = place(new, [root()])
    assert placement.action is Action.DELTA and placement.anchor == "r" and placement.depth == 2
    assert len(placement.patch) == 1


def test_at_max_depth_the_delta_becomes_a_sibling():
    """A match at max depth gets a sibling (same parent) diffed against the parent's chain."""
    exps = [Skill("a", tuple("s" * i)) for i in range(1, 4)]
    r = root(exps[0])
    c = child(r, exps[0], exps[1], "c")
    new = exps[2]
    placement = place(new, [r, c], max_depth=2)
    assert (placement.action, placement.anchor, placement.depth) == (Action.DELTA, "r", 2)
    assert compose_chain([r, Node("n", Tree.TASK, NodeKind.DELTA, Outcome.SUCCESS, "k",
                                  parent_id="r", depth=2, patch=placement.patch)]) == new


@given(st.lists(st.lists(st.sampled_from("abcd"), max_size=5), min_size=2, max_size=7))
def test_chains_of_placements_compose_to_each_experience(step_lists):
    """Every node written by placement composes back to the experience that wrote it."""
    exps = [Skill("t", tuple(s)) for s in step_lists]
    chain = [root(exps[0])]
    for i, exp in enumerate(exps[1:], 1):
        placement = place(exp, chain, max_depth=5)
        if placement.action is Action.DEDUP:
            continue
        parent = next(n for n in chain if n.id == placement.anchor)
        chain = chain[: chain.index(parent) + 1]
        node = Node(f"n{i}", Tree.TASK, NodeKind.DELTA, Outcome.SUCCESS, "k",
                    parent_id=parent.id, depth=placement.depth, patch=placement.patch)
        chain.append(node)
        assert compose_chain(chain) == exp
    assert forest_problems(chain) == []


def test_success_prefix_stops_before_a_failure_leaf():
    """A failure leaf is a warning: the usable chain ends at the last success."""
    r = root()
    lesson = Lesson("heat the apple", ("look",))
    f = child(r, BASE, lesson, "f", outcome=Outcome.FAILURE)
    assert success_prefix([r, f]) == [r]
    assert compose_chain([r, f]) == lesson


def test_due_for_consolidation_rules():
    """Only unconsolidated successful deltas with enough successes are compiled."""
    r = root()
    d = child(r, BASE, Skill("x"), "d", successes=3)
    assert due_for_consolidation(d, 3)
    assert not due_for_consolidation(d, 4)
    assert not due_for_consolidation(root(), 0)
    f = child(r, BASE, Lesson("x"), "f", outcome=Outcome.FAILURE, successes=9)
    assert not due_for_consolidation(f, 3)
    done = child(r, BASE, Skill("x"), "g", successes=9, consolidated=True)
    assert not due_for_consolidation(done, 3)


def test_chain_evidence_counts_the_writer_and_every_match():
    """The root's writer, plus the hits of every node of the chain, with their outcomes."""
    written = Node("r", Tree.TASK, NodeKind.ROOT, Outcome.SUCCESS, "key", content=BASE,
                   episode_id="ep-1", hits=2, successes=1, failures=1)
    d = child(written, BASE, Skill("x"), "d", hits=3, successes=3)
    assert chain_evidence([written, d]) == Evidence(episodes=6, successes=5, failures=1)
    # A consolidated root inherits its chain's evidence and adds its own matches.
    meta = consolidation_meta([written, d])
    assert meta["consolidated_from"] == "d" and meta["evidence"] == Evidence(6, 5, 1).to_dict()
    compiled = Node("c", Tree.TASK, NodeKind.ROOT, Outcome.SUCCESS, "key", content=Skill("x"),
                    lineage=("r", "d"), meta=meta, hits=1, successes=1)
    assert chain_evidence([compiled]) == Evidence(episodes=7, successes=6, failures=1)


def test_discredited_when_a_success_record_is_mostly_failures():
    """The episode that wrote a success counts as one success; one failed use more than the
    successes discredits it, a failure is never discredited (it is penalised already)."""
    def written(**counts):
        return Node("r", Tree.TASK, NodeKind.ROOT, Outcome.SUCCESS, "key", content=BASE,
                    episode_id="ep-1", **counts)
    assert not discredited(written())
    assert not discredited(written(hits=1, failures=1))
    assert discredited(written(hits=2, failures=2))
    assert not discredited(written(hits=3, successes=1, failures=2))
    lesson = Node("f", Tree.TASK, NodeKind.ROOT, Outcome.FAILURE, "key", content=Lesson("x"),
                  episode_id="ep-2", hits=5, failures=5)
    assert not discredited(lesson)
    # A consolidated root carries the evidence of its chain: seven successes outweigh two failures.
    compiled = Node("c", Tree.TASK, NodeKind.ROOT, Outcome.SUCCESS, "key", content=BASE,
                    lineage=("r", "d"), meta={"evidence": Evidence(7, 7, 0).to_dict()}, hits=2,
                    failures=2)
    assert not discredited(compiled)


def test_chain_evidence_ignores_malformed_inherited_counts():
    """meta comes back from imports as plain JSON: a count that is not a count adds nothing
    (recall must not fail on it)."""
    for evidence in ("many", {"episodes": "5", "successes": -2, "failures": True}, None, [1]):
        node = Node("c", Tree.TASK, NodeKind.ROOT, Outcome.SUCCESS, "key", content=BASE,
                    lineage=("r",), meta={"evidence": evidence}, hits=1, successes=1)
        assert chain_evidence([node]) == Evidence(episodes=1, successes=1, failures=0)


def test_forest_problems_names_each_node_and_its_problem():
    """Integrity check names missing parents, wrong depths and env failures."""
    r = root()
    orphan = Node("o", Tree.TASK, NodeKind.DELTA, Outcome.SUCCESS, "k", parent_id="zz", depth=2,
                  patch=())
    bad_depth = Node("b", Tree.TASK, NodeKind.DELTA, Outcome.SUCCESS, "k", parent_id="r", depth=3,
                     patch=())
    env_fail = root(Knowledge("scene"), "e", outcome=Outcome.FAILURE, tree=Tree.ENV)
    problems = forest_problems([r, orphan, bad_depth, env_fail])
    assert any(node == "o" and "'zz' is missing" in p for node, p in problems)
    assert {node for node, _ in problems} == {"o", "b", "e"}


@settings(max_examples=50)
@given(st.lists(experiences, min_size=2, max_size=7), st.integers(2, 5))
def test_placements_of_real_text_compose_to_each_experience(exps, max_depth):
    """The same law for any unicode text, long lists with repeats, mixed experience types and
    any max_depth: each written node composes to its experience, and the forest is sound."""
    forest = [root(exps[0], "n0")]
    chain = forest[:1]
    for i, exp in enumerate(exps[1:], 1):
        placement = place(exp, chain, max_depth=max_depth)
        anchor = next(n for n in chain if n.id == placement.anchor)
        if placement.action is Action.DEDUP:
            assert compose_chain(chain[: chain.index(anchor) + 1]) == exp
            continue
        assert placement.depth <= max_depth
        chain = chain[: chain.index(anchor) + 1]
        node = Node(f"n{i}", Tree.TASK, NodeKind.DELTA, Outcome.SUCCESS, "k",
                    parent_id=anchor.id, depth=placement.depth, patch=placement.patch)
        chain.append(node)
        forest.append(node)
        assert compose_chain(chain) == exp
    assert forest_problems(forest, max_depth=max_depth) == []


@settings(max_examples=50)
@given(experiences, st.lists(st.lists(experiences, min_size=1, max_size=4), max_size=4))
def test_choose_placement_takes_a_dedup_else_the_cheapest_delta_else_a_root(new, chains_of):
    """Against real candidate chains: a dedup whenever some chain composes to ``new``; else the
    delta with the fewest patch characters, only when cheaper than a root; the patch always
    composes on its chain to ``new``."""
    chains = [chain_of(exps) for exps in chains_of]
    placement, index = choose_placement(new, chains, max_depth=5)
    if placement.action is Action.ROOT:
        assert index is None
        assert all(compose_chain(c) != new for c in chains)
        assert all(patch_chars(place(new, c).patch) >= experience_chars(new) for c in chains)
        return
    assert index is not None
    chain = chains[index]
    anchor = next(n for n in chain if n.id == placement.anchor)
    base = chain[: chain.index(anchor) + 1]
    if placement.action is Action.DEDUP:
        assert compose_chain(base) == new
        assert all(compose_chain(c) != new for c in chains[:index])
        return
    assert compose(compose_chain(base), [placement.patch]) == new
    assert patch_chars(placement.patch) < experience_chars(new)
    assert all(compose_chain(c) != new for c in chains)
    assert all(patch_chars(place(new, c).patch) >= patch_chars(placement.patch)
               for c in chains)


@given(experiences, st.lists(experiences, min_size=1, max_size=4), st.integers(0, 300))
def test_a_placement_past_its_budget_still_composes_to_the_new_experience(new, olds, units):
    """All the diffs of one placement share a bounded budget; the patch stays exact."""
    from deltamem.core.delta import Budget

    chains = [[root(old, node_id=f"r{i}")] for i, old in enumerate(olds)]
    placement, index = choose_placement(new, chains, budget=Budget(units))
    if placement.action is Action.ROOT:
        assert index is None
    else:
        assert index is not None
        assert compose(compose_chain(chains[index]), [placement.patch]) == new


# -- which placement is chosen (pins the rules, not only that chains compose) -----------------

def test_equally_cheap_chains_tie_to_the_earlier_better_match():
    """Two candidate chains whose deltas cost exactly the same: the delta goes under the earlier
    one (the better match, which recall follows), whichever order they come in."""
    first = root(Skill("x", ("a", "b"), "y"), "first")
    second = root(Skill("x", ("a", "c"), "y"), "second")
    new = Skill("x", ("a", "d"), "y")
    assert patch_chars(diff(first.content, new)) == patch_chars(diff(second.content, new))
    placement, index = choose_placement(new, [[first], [second]])
    assert (placement.action, placement.anchor, index) == (Action.DELTA, "first", 0)
    placement, index = choose_placement(new, [[second], [first]])
    assert (placement.action, placement.anchor, index) == (Action.DELTA, "second", 0)


def test_a_cheaper_later_chain_wins_over_an_earlier_one():
    far = root(Skill("x", ("p", "q", "r"), "z"), "far")
    near = root(Skill("x", ("a", "b"), "y"), "near")
    new = Skill("x", ("a", "b", "c"), "y")
    placement, index = choose_placement(new, [[far], [near]])
    assert (placement.action, placement.anchor, index) == (Action.DELTA, "near", 1)


def test_a_delta_as_large_as_a_root_becomes_a_root():
    """The cost boundary: a delta is kept only when it is strictly cheaper than a root holding
    the experience; at equal size the root wins (it composes without its chain)."""
    known = root(Knowledge("t", ("a",)), "k", tree=Tree.ENV)
    same_size = Knowledge("u", ("a", "f"))
    assert patch_chars(place(same_size, [known]).patch) == experience_chars(same_size)
    assert choose_placement(same_size, [[known]]) == (Placement(Action.ROOT), None)
    cheaper = Knowledge("t", ("a", "f"))
    assert patch_chars(place(cheaper, [known]).patch) < experience_chars(cheaper)
    placement, index = choose_placement(cheaper, [[known]])
    assert (placement.action, placement.anchor, index) == (Action.DELTA, "k", 0)


def test_a_dedup_on_a_later_chain_beats_a_cheap_delta_on_an_earlier_one():
    near = root(Skill("x", ("a", "b"), "y"), "near")
    twin = root(Skill("x", ("a", "b", "c"), "y"), "twin")
    placement, index = choose_placement(twin.content, [[near], [twin]])
    assert (placement.action, placement.anchor, index) == (Action.DEDUP, "twin", 1)


def test_growth_at_max_depth_extends_the_parents_chain():
    """At max depth the extractor is shown (and the delta is placed on) the parent's chain; one
    level above it, the match's own chain."""
    exps = [Skill("a", tuple("s" * i)) for i in range(1, 4)]
    r = root(exps[0])
    c = child(r, exps[0], exps[1], "c")
    assert c.depth == 2
    assert list(growth_chain([r, c], max_depth=2)) == [r]
    assert list(growth_chain([r, c], max_depth=3)) == [r, c]
    assert list(growth_chain([r], max_depth=2)) == [r]
    # The placement agrees: a sibling under the parent at max depth, a child one level above.
    assert place(exps[2], [r, c], max_depth=2).anchor == "r"
    assert place(exps[2], [r, c], max_depth=3).anchor == "c"



def _forest():
    """r -> a -> b (compiled) -> c -> d; r also has the branch x; b also has y."""
    e = [Skill("heat", tuple(f"step {i}" for i in range(n)), "hot") for n in range(1, 8)]
    r = root(e[0])
    a = child(r, e[0], e[1], "a")
    x = child(r, e[0], Skill("cool", ("step 0",), "cold"), "x")
    b = child(a, e[1], e[2], "b")
    c = child(b, e[2], e[3], "c")
    y = child(b, e[2], Skill("heat", ("step 0", "other"), "hot"), "y")
    d = child(c, e[3], e[4], "d")
    return [r, a, x, b, c, y, d]


def _compositions(nodes):
    by_id = {n.id: n for n in nodes}

    def chain(n):
        return [n] if n.parent_id is None else [*chain(by_id[n.parent_id]), n]

    return {n.id: compose_chain(chain(n)) for n in nodes}


def _apply_retirement(nodes, new_root, plan):
    gone = {n.id for n, _ in plan.retired}
    moved = {n.id: n for n in plan.moved}
    return [new_root] + [moved.get(n.id, n) for n in nodes if n.id not in gone]


def test_retirement_replaces_the_unbranched_chain_and_keeps_every_composition():
    """Consolidating r -> a -> b retires b and a (left without another child) but not r (its
    branch x stays); b's children move under the new root one level up with their subtrees;
    every live node composes to what it did, and the retired ones are kept with theirs."""
    nodes = _forest()
    before = _compositions(nodes)
    by_id = {n.id: n for n in nodes}
    chain = [by_id["r"], by_id["a"], by_id["b"]]
    new_root = root(compose_chain(chain), "R")
    plan = retirement(chain, nodes, new_root)
    assert [(n.id, exp) for n, exp in plan.retired] == [("b", before["b"]), ("a", before["a"])]
    assert {(n.id, n.parent_id, n.depth) for n in plan.moved} == {
        ("c", "R", 2), ("y", "R", 2), ("d", "c", 3)}
    after = _apply_retirement(nodes, new_root, plan)
    assert forest_problems(after) == []
    composed = _compositions(after)
    assert composed["R"] == before["b"]
    assert all(composed[i] == before[i] for i in ("r", "x", "c", "y", "d"))


def test_retirement_rediffs_the_children_of_a_rewritten_compile():
    """A compile that rewrote the chain (a model's) gets its children's patches re-diffed
    against what it holds, so they still compose to what they did."""
    nodes = _forest()
    before = _compositions(nodes)
    by_id = {n.id: n for n in nodes}
    chain = [by_id["r"], by_id["a"], by_id["b"], by_id["c"]]
    new_root = root(Skill("heat it", ("step 0", "step 3"), "hot"), "R")
    plan = retirement(chain, nodes, new_root)
    assert [n.id for n, _ in plan.retired] == ["c"]  # b keeps its other child y
    after = _apply_retirement(nodes, new_root, plan)
    assert forest_problems(after) == []
    composed = _compositions(after)
    assert composed["d"] == before["d"] and composed["y"] == before["y"]


def test_retirement_keeps_an_ancestor_the_root_does_not_replace():
    """An ancestor the new root does not replace (the engine: another user's episode
    metadata, which a filter would no longer find) stays live, and so does the chain above."""
    nodes = _forest()
    by_id = {n.id: n for n in nodes}
    chain = [by_id["r"], by_id["a"], by_id["b"]]
    plan = retirement(chain, nodes, root(compose_chain(chain), "R"),
                      replaces=lambda node: node.id != "a")
    assert [n.id for n, _ in plan.retired] == ["b"]
