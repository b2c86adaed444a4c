"""Corrections from inside the agent: an outcome set right, a skill's steps edited, a node marked
wrong. A correction is itself a write to the residual tree, with its history kept.

Each correction writes a **correction root**: a new root in the corrected node's tree, with its
key (and so its vector), the corrected experience as content, ``lineage`` naming the corrected
chain (root to node), and ``meta["correction"]`` recording what was corrected: the kind, the
node, the reason, and the delta -- the patch from the chain's composed experience to the new
one (``core.delta`` JSON). Nothing is overwritten: the corrected chain stays, so ``show`` and
``export`` keep the history, and a later correction of the correction root chains on.

Recall prefers the correction root: it has the corrected node's vector, so it ties with it
exactly, and exact ties go to the shallower node, then the newer one (``core.scoring``). Where
the correction scores as a failure (an outcome set to failure, a skill marked wrong), the
corrected task-tree node's record is given the failures that make it discredited
(``core.tree.discredited``: recall then scores it as a failure too), as
:meth:`DeltaMem.record_outcome` would; so the correction still wins the tie.

Kinds:

* ``outcome`` (``success=True/False``, task tree): a lesson that was in fact a success becomes a
  skill (activation: the lesson's situation; steps: what it recorded as failed and as worked);
  a skill that in fact failed becomes a failure lesson (its steps recorded as failed).
* ``steps`` (task tree): the skill's steps replaced (a lesson becomes a skill with them).
* ``wrong`` (either tree): the experience is retracted: a skill or lesson becomes an empty
  failure skill (recall shows nothing of it), scene knowledge becomes knowledge without facts
  (shown as nothing).
* ``fact`` (environment tree, :func:`forget_fact`): one fact removed from the scene's
  knowledge, the others kept.

To delete a node and its subtree outright (no history), use :meth:`DeltaMem.delete`.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Protocol

from deltamem.config import Settings
from deltamem.core.delta import diff, patch_to_json
from deltamem.core.model import Experience, Knowledge, Lesson, Node, NodeKind, Outcome, Skill, Tree
from deltamem.core.ranking import carried_meta
from deltamem.core.tree import chain_evidence, compose_chain
from deltamem.errors import EpisodeError
from deltamem.formats import api
from deltamem.privacy.redact import redact
from deltamem.store.base import Store


class Memory(Protocol):
    """What a correction needs of the memory (``DeltaMem`` is one)."""

    store: Store
    space: str
    settings: Settings

    def transaction(self) -> AbstractContextManager[None]: ...

    def chain(self, node_id: str) -> list[Node]: ...


MAX_STEPS = api.MAX_SKILL_STEPS  # the bounds of every face (deltamem.formats.api)
MAX_TEXT = api.MAX_REASON


class Correction(api.CorrectionOut):
    """What a correction wrote: the correction root (``node``), the node it corrects (``of``),
    and the nodes whose record was given failures (``discredited``); the answer model every
    face returns."""


def corrected(node_tree: Tree, current: Experience, *, success: bool | None,
              steps: Sequence[str] | None, wrong: bool) -> tuple[str, Experience, Outcome]:
    """The kind, new experience and outcome of a correction (see the module docstring).

    Raises:
        EpisodeError: not exactly one correction asked for, or one the tree cannot take.
    """
    asked = [name for name, on in (("outcome", success is not None),
                                   ("steps", steps is not None), ("wrong", wrong)) if on]
    if len(asked) != 1:
        raise EpisodeError("give exactly one correction: success (true/false), steps, or wrong",
                           field="correction")
    kind = asked[0]
    if kind != "wrong" and node_tree is not Tree.TASK:
        raise EpisodeError(f"a {kind} correction applies to the task tree (skills and lessons); "
                           "scene knowledge can only be marked wrong", field=kind)
    head = _head(current)
    if kind == "wrong":
        if isinstance(current, Knowledge):
            return kind, Knowledge(current.trigger), Outcome.SUCCESS
        return kind, Skill(head), Outcome.FAILURE
    if kind == "steps":
        assert steps is not None
        items = _steps(steps)
        termination = current.termination if isinstance(current, Skill) else ""
        return kind, Skill(head, items, termination), Outcome.SUCCESS
    if success:
        if isinstance(current, Lesson):
            return kind, Skill(head, (*current.failed, *current.worked)), Outcome.SUCCESS
        return kind, current, Outcome.SUCCESS
    if isinstance(current, Skill):
        return kind, Lesson(head, failed=current.steps), Outcome.FAILURE
    return kind, current, Outcome.FAILURE


def _head(exp: Experience) -> str:
    if isinstance(exp, Skill):
        return exp.activation
    if isinstance(exp, Lesson):
        return exp.situation
    return exp.trigger


def _steps(steps: Sequence[str]) -> tuple[str, ...]:
    if isinstance(steps, str) or not all(isinstance(s, str) for s in steps):
        raise EpisodeError("steps must be a list of strings", field="steps")
    items = tuple(s.strip() for s in steps if s.strip())
    if not items or len(items) > MAX_STEPS or any(len(s) > MAX_TEXT for s in items):
        raise EpisodeError(f"steps must hold 1 to {MAX_STEPS} non-empty steps of at most "
                           f"{MAX_TEXT} characters", field="steps")
    return items


def the_fact(facts: Sequence[str], fact: str) -> str:
    """The one fact of ``facts`` that ``fact`` names: the fact itself, its number as ``show``
    lists them (1-based), or a piece of text only it contains.

    Raises:
        EpisodeError: no fact, or several, match.
    """
    wanted = fact.strip() if isinstance(fact, str) else ""
    if not wanted:
        raise EpisodeError("name the fact to forget: its text or its number", field="fact")
    if wanted in facts:
        return wanted
    if wanted.isdigit() and 1 <= int(wanted) <= len(facts):
        return facts[int(wanted) - 1]
    found = [f for f in facts if wanted.lower() in f.lower()]
    if len(found) != 1:
        raise EpisodeError(f"{len(found) or 'no'} facts of the {len(facts)} match {wanted!r}; "
                           "give the fact's whole text or its number", field="fact")
    return found[0]


def forget_fact(mem: Memory, node_id: str, fact: str, *, reason: str = "") -> Correction:
    """Remove one fact from the scene knowledge ``node_id`` holds (composed along its chain): a
    correction root without it (see the module docstring); one transaction.

    Raises:
        NodeNotFound: no such node in the space.
        EpisodeError: not a knowledge node, or ``fact`` matches no fact or several.
    """
    return correct(mem, node_id, reason=reason, _fact=fact)


def correct(mem: Memory, node_id: str, *, success: bool | None = None,
            steps: Sequence[str] | None = None, wrong: bool = False,
            reason: str = "", _fact: str | None = None) -> Correction:
    """Write a correction of ``node_id`` (see the module docstring); one transaction.

    Raises:
        NodeNotFound: no such node in the space.
        EpisodeError: not exactly one correction, or one the node's tree cannot take.
    """
    if not isinstance(reason, str) or len(reason) > MAX_TEXT:
        raise EpisodeError(f"reason must be text of at most {MAX_TEXT} characters",
                           field="reason")
    reason = redact(reason) if mem.settings.redact else reason
    if steps is not None and mem.settings.redact:
        steps = [redact(s) if isinstance(s, str) else s for s in steps]
    with mem.transaction():
        chain = mem.chain(node_id)
        node = chain[-1]
        current = compose_chain(chain)
        if _fact is not None:
            if not isinstance(current, Knowledge):
                raise EpisodeError("forget-fact applies to scene knowledge (an environment-tree "
                                   "node)", field="fact")
            gone = the_fact(current.facts, _fact)
            kind, outcome = "fact", Outcome.SUCCESS
            experience: Experience = Knowledge(current.trigger,
                                               tuple(f for f in current.facts if f != gone))
        else:
            kind, experience, outcome = corrected(node.tree, current, success=success,
                                                  steps=steps, wrong=wrong)
        vector = mem.store.vector(mem.space, node.id)
        assert vector is not None
        record = {"kind": kind, "of": node.id, "reason": reason,
                  "patch": patch_to_json(diff(current, experience))}  # when: the root's time
        root = Node(id=("t-" if node.tree is Tree.TASK else "e-") + secrets.token_hex(8),
                    tree=node.tree, kind=NodeKind.ROOT, outcome=outcome, key=node.key,
                    content=experience, lineage=tuple(n.id for n in chain),
                    created_at=time.time(), meta={"correction": record, **carried_meta(node)})
        mem.store.add_node(mem.space, root, vector)
        discredited = []
        if outcome is Outcome.FAILURE and node.tree is Tree.TASK:
            for old in mem.store.nodes(mem.space, Tree.TASK):
                if old.key == node.key and old.id != root.id and old.outcome is Outcome.SUCCESS:
                    evidence = chain_evidence([old])
                    need = evidence.successes - evidence.failures + 1
                    if need > 0:
                        mem.store.bump(mem.space, old.id, failures=need)
                        discredited.append(old.id)
    return Correction.build(node=root.id, of=node.id, kind=kind, tree=node.tree.value,
                            reason=reason, discredited=list(discredited))


def withdrawn(nodes: Sequence[Node]) -> set[str]:
    """The ids of the nodes a correction took back, which no export may hand out as guidance:
    every node a correction root names (``meta["correction"]["of"]``) with its whole subtree
    (its deltas compose on what was corrected), and every root a ``wrong`` correction wrote
    (the retracted, empty experience)."""
    out: set[str] = set()
    for node in nodes:
        record = node.meta.get("correction")
        if isinstance(record, dict):
            if isinstance(record.get("of"), str):
                out.add(record["of"])
            if record.get("kind") == "wrong":
                out.add(node.id)
    children: dict[str, list[str]] = {}
    for node in nodes:
        if node.parent_id is not None:
            children.setdefault(node.parent_id, []).append(node.id)
    stack = list(out)
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in out:
                out.add(child)
                stack.append(child)
    return out
