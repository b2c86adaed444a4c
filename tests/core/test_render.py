"""Rendering recalled chains as prompt text, property-tested on real text."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from real_text import chain_of, knowledge, lessons, skills, text

from deltamem.core.model import Knowledge, Outcome, Skill, Tree
from deltamem.core.render import (
    ENV_HEADER,
    TASK_HEADER,
    Style,
    estimate_tokens,
    render_chain,
    render_context,
    render_experience,
)
from deltamem.core.tree import compose_chain

task_chains = st.one_of(
    st.just([]),
    st.lists(skills, min_size=1, max_size=3).map(chain_of),
    # A skill chain that ends in a failure lesson.
    st.tuples(st.lists(skills, min_size=1, max_size=2), lessons).map(
        lambda p: chain_of([*p[0], p[1]],
                           outcomes=[Outcome.SUCCESS] * len(p[0]) + [Outcome.FAILURE])),
)
env_chains = st.one_of(st.just([]), st.lists(knowledge, min_size=1, max_size=3).map(
    lambda exps: chain_of(exps, tree=Tree.ENV)))
styles = st.sampled_from(list(Style))


@settings(max_examples=40)
@given(task_chains, env_chains, styles, st.integers(0, 300), text)
def test_a_budget_is_never_exceeded(task, env, style, budget, query):
    """Whatever the chains hold, the context fits in ``budget_tokens``: any budget, and every
    budget just under the whole block (where a miscounted header or separator would show)."""
    full = estimate_tokens(render_context(task, env, style, query=query))
    for cap in {budget, *range(max(full - 8, 0), full + 1)}:
        context = render_context(task, env, style, budget_tokens=cap, query=query)
        assert estimate_tokens(context) <= cap


@settings(max_examples=40)
@given(task_chains, env_chains, styles, text)
def test_a_budget_that_fits_everything_changes_nothing(task, env, style, query):
    """With room for the whole block, the budgeted context is the unbudgeted one."""
    full = render_context(task, env, style, query=query)
    assert render_context(task, env, style, budget_tokens=estimate_tokens(full),
                          query=query) == full


@settings(max_examples=40)
@given(task_chains, env_chains)
def test_the_context_holds_what_was_recalled(task, env):
    """Unbudgeted, the composed skill's steps (or the lesson's failed steps) and every fact
    appear, each on its own line; nothing matched gives an empty block."""
    context = render_context(task, env)
    if not task and not env:
        assert context == ""
        return
    lines = context.split("\n")
    if task:
        composed = compose_chain(task)
        if task[-1].outcome is Outcome.FAILURE:
            assert all(f"- Failed: {item}" in context for item in composed.failed)
        else:
            assert all(f"{i}. {s}" in lines or "\n" in s
                       for i, s in enumerate(composed.steps, 1))
    if env:
        facts = compose_chain(env).facts
        assert all(f"- {fact}" in lines or "\n" in fact for fact in facts)


@settings(max_examples=40)
@given(st.one_of(skills, knowledge, lessons))
def test_render_experience_shows_every_item(exp):
    """Every item of every list of an experience is in its rendering."""
    rendered = render_experience(exp)
    for name in exp.LISTS:
        assert all(item in rendered for item in getattr(exp, name))


@settings(max_examples=40)
@given(task_chains.filter(bool), styles)
def test_a_chain_renders_as_its_context_body(chain, style):
    """One tree's rendering is the body of that tree's section of the context."""
    assert render_chain(chain, style) in render_context(chain, [], style)


def test_scene_knowledge_without_facts_is_left_out():
    """A matched scene whose composed knowledge holds no fact adds nothing to the block (no
    header, no trigger); the skill beside it is still shown. A fact added by a delta shows."""
    skill = chain_of([Skill("find a living thing", ("go to kitchen",))])
    empty = chain_of([Knowledge("This room is called the workshop.")], tree=Tree.ENV)
    style = Style.COMPOSED
    context = render_context(skill, empty, style)
    assert TASK_HEADER in context and "go to kitchen" in context
    assert ENV_HEADER not in context and "workshop" not in context
    assert render_context([], empty, style) == render_chain(empty, style) == ""
    grown = chain_of([Knowledge("This room is called the workshop."),
                      Knowledge("This room is called the workshop.", ("red wire: on the table",))],
                     tree=Tree.ENV)
    assert "- red wire: on the table" in render_context([], grown, style)
