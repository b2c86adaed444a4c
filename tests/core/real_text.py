"""Hypothesis strategies of real text for the core's property tests.

Any unicode (``st.text()``: lone surrogates, NUL, every kind of whitespace), empty strings, long
lists and duplicated items. A small pool is mixed in so that equal items, and therefore real
alignments between lists, stay likely.
"""

from __future__ import annotations

from hypothesis import strategies as st

from deltamem.core.delta import diff
from deltamem.core.model import Experience, Knowledge, Lesson, Node, NodeKind, Outcome, Skill, Tree

POOL = ("open door", "go to kitchen", "take apple", "heat apple", "", " ", "x")
text = st.one_of(st.sampled_from(POOL), st.text(max_size=40))
# Several words with odd whitespace between them, so word-level edits happen too.
words = st.lists(st.one_of(st.sampled_from(("the", "apple", "é", "数字", "\t", "\n")),
                           st.text(min_size=1, max_size=6)), max_size=10).map(" ".join)
item = st.one_of(text, words)
items = st.one_of(st.lists(item, max_size=6),
                  st.lists(st.sampled_from(POOL), min_size=20, max_size=60),  # long, repeats
                  st.lists(item, min_size=20, max_size=40)).map(tuple)
skills = st.builds(Skill, activation=item, steps=items, termination=item)
knowledge = st.builds(Knowledge, trigger=item, facts=items)
lessons = st.builds(Lesson, situation=item, failed=items, untried=items, worked=items)
experiences = st.one_of(skills, knowledge, lessons)


def chain_of(exps: list[Experience], tree: Tree = Tree.TASK,
             outcomes: list[Outcome] | None = None) -> list[Node]:
    """A root holding ``exps[0]`` and one delta per later experience, each the exact residual."""
    outcomes = outcomes or [Outcome.SUCCESS] * len(exps)
    nodes = [Node("n0", tree, NodeKind.ROOT, outcomes[0], "key", content=exps[0])]
    for i, (before, after) in enumerate(zip(exps, exps[1:], strict=False), 1):
        nodes.append(Node(f"n{i}", tree, NodeKind.DELTA, outcomes[i], "key",
                          parent_id=f"n{i - 1}", depth=i + 1, patch=diff(before, after)))
    return nodes
