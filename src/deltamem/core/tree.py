"""Residual-tree rules: composing chains, placing new experiences, picking consolidations.

Pure functions over :class:`~deltamem.core.model.Node` values; the facade fetches the nodes and
writes the decisions back.

Placement is cost-aware (:func:`choose_placement`): the cost of a node is what it stores, in
serialised JSON characters -- ``patch_chars(patch)`` for a delta, ``experience_chars(content)``
for a root. A new experience becomes a delta only when its patch is cheaper than restating it as
a root; an exact duplicate of any candidate's composition is a dedup (cost 0). It is decided
without diffing the candidates that cannot win; :func:`exhaustive_placement` is the rule by
definition, which the pruned one must always agree with. (Compositions of chain prefixes are
memoised on their values, a cache of a pure function.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from functools import lru_cache
from typing import Any, Protocol, TypeAlias

from deltamem.core.delta import (
    Budget,
    Patch,
    PatchError,
    PatchFloor,
    apply,
    compose,
    diff,
    diff_units_ceiling,
    patch_chars,
    token_count,
)
from deltamem.core.model import Experience, Node, Outcome, experience_chars

MAX_DEPTH = 5
# The matcher work one placement may spend on all its candidates together (``core.delta``):
# ordinary episodes use a small part of it; a crafted one gets exact but larger patches past it.
PLACEMENT_BUDGET = 300_000


class Action(StrEnum):
    """What learning did in one tree for one episode."""

    ROOT = "root"  # nothing matched: a new root holds the full experience
    DELTA = "delta"  # matched: a child holds the exact residual against the chain
    DEDUP = "dedup"  # matched and nothing new: the matched node gets a hit, nothing is written


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a new experience goes. ``anchor`` is the parent (delta) or the node hit (dedup)."""

    action: Action
    anchor: str | None = None
    depth: int = 1
    patch: Patch = ()


def compose_chain(chain: Sequence[Node]) -> Experience:
    """Full experience of the last node of ``chain`` (root first).

    Raises ``PatchError`` if the chain is not root-first or a patch does not fit.
    """
    if not chain or chain[0].content is None:
        raise PatchError("a chain must start at a root that holds content")
    return compose(chain[0].content, (n.patch for n in chain[1:]))


def success_prefix(chain: Sequence[Node]) -> list[Node]:
    """The chain cut after its deepest success node: what an agent may follow as instructions."""
    for i in range(len(chain) - 1, -1, -1):
        if chain[i].outcome is Outcome.SUCCESS:
            return list(chain[: i + 1])
    return []


def place(
    new: Experience,
    chain: Sequence[Node],
    *,
    max_depth: int = MAX_DEPTH,
    budget: Budget | None = None,
) -> Placement:
    """Decide where ``new`` goes, given the chain (root first) of the node it matched.

    * no chain -> a new root;
    * the residual against the chain's composition is empty -> dedup on the matched node;
    * otherwise a delta child of the matched node -- or, when that node already sits at
      ``max_depth``, a sibling (a child of its parent, diffed against the parent's chain).
    """
    if not chain:
        return Placement(Action.ROOT)
    match = chain[-1]
    patch = diff(compose_chain(chain), new, budget=budget)
    if not patch:
        return Placement(Action.DEDUP, anchor=match.id, depth=match.depth)
    if match.depth < max_depth:
        return Placement(Action.DELTA, anchor=match.id, depth=match.depth + 1, patch=patch)
    parent_chain = chain[:-1]
    sibling_patch = diff(compose_chain(parent_chain), new, budget=budget)
    parent = parent_chain[-1]
    if not sibling_patch:
        return Placement(Action.DEDUP, anchor=parent.id, depth=parent.depth)
    return Placement(Action.DELTA, anchor=parent.id, depth=match.depth, patch=sibling_patch)


def growth_chain(chain: Sequence[Node], *, max_depth: int = MAX_DEPTH) -> Sequence[Node]:
    """The chain a new delta for a match on ``chain`` would extend: ``chain`` itself, or its
    parent's chain when the match already sits at ``max_depth`` (the sibling case of
    :func:`place`). Extractors are shown this chain's composition, so that what they write
    differs from it only by what the episode adds."""
    return chain[:-1] if len(chain) > 1 and chain[-1].depth >= max_depth else chain


@dataclass(slots=True)
class PlacementStats:
    """What placements did, summed over calls (a benchmark's or a test's probe): the candidate
    chains seen, the diffs run, the diffs the exhaustive rule would have run, and how many
    placements took the exhaustive rule because their budget might not have covered it."""

    placements: int = 0
    candidates: int = 0
    diffs: int = 0
    exhaustive_diffs: int = 0
    exhaustive_runs: int = 0

    @property
    def skipped(self) -> int:
        return self.exhaustive_diffs - self.diffs


def exhaustive_placement(
    new: Experience,
    chains: Sequence[Sequence[Node]],
    *,
    max_depth: int = MAX_DEPTH,
    budget: Budget | None = None,
    stats: PlacementStats | None = None,
) -> tuple[Placement, int | None]:
    """The placement rule by definition, the reference :func:`choose_placement` must agree with:
    every chain is tried with :func:`place` in order. The first one that deduplicates wins
    outright; otherwise the delta with the fewest patch characters (the earlier chain on a
    tie), but only if it is cheaper than a root holding ``new`` -- else a new root. Returns the
    placement and the index of the chain it was placed on (None for a root).

    All the diffs share one ``budget`` (:data:`PLACEMENT_BUDGET` by default), so a placement's
    cost is bounded whatever the experiences: past it, diffs are exact but not minimal.
    """
    budget = Budget(PLACEMENT_BUDGET) if budget is None else budget
    best: tuple[int, Placement, int] | None = None
    diffs = 0
    if stats is not None:
        stats.placements += 1
        stats.candidates += len(chains)
    try:
        for index, chain in enumerate(chains):
            placement = place(new, chain, max_depth=max_depth, budget=budget)
            diffs += _diffs_run(placement, chain, max_depth)
            if placement.action is Action.DEDUP:
                return placement, index
            cost = patch_chars(placement.patch)
            if best is None or cost < best[0]:
                best = (cost, placement, index)
    finally:
        if stats is not None:
            stats.diffs += diffs
            stats.exhaustive_diffs += diffs
    if best is None or best[0] >= experience_chars(new):
        return Placement(Action.ROOT), None
    return best[1], best[2]


def _diffs_run(placement: Placement, chain: Sequence[Node], max_depth: int) -> int:
    """How many diffs :func:`place` ran to find ``placement`` on ``chain``."""
    if not chain:
        return 0
    if chain[-1].depth < max_depth or placement.anchor == chain[-1].id:
        return 1
    return 2


def choose_placement(
    new: Experience,
    chains: Sequence[Sequence[Node]],
    *,
    max_depth: int = MAX_DEPTH,
    budget: Budget | None = None,
    stats: PlacementStats | None = None,
) -> tuple[Placement, int | None]:
    """The cheapest place for ``new`` among the candidate ``chains`` (best match first): the
    decision of :func:`exhaustive_placement`, found without diffing the candidates that cannot
    win.

    1. Each chain is composed, in order, and the first whose composition (or, for a match at
       ``max_depth``, its parent's) equals ``new`` is the dedup, as :func:`place` would find it.
    2. Otherwise each candidate gets a lower bound on its patch's characters
       (:func:`~deltamem.core.delta.patch_chars_floor`, no matcher), and the candidates are
       diffed in the order of (bound, index). The best so far starts as the root: (characters
       of ``new``, index -1), since a delta must be strictly cheaper than a root. A candidate
       takes it when its (characters, index) is smaller -- fewest characters, the earlier chain
       on a tie, exactly the reference's order -- and the search stops at the first candidate
       whose (bound, index) is not smaller than the best, since no later one can be either.

    The diffs share one ``budget`` in the reference, so there which diffs ran could change
    another's patch once the budget runs out. This rule therefore prunes only when the
    budget covers every diff the reference would run
    (:func:`~deltamem.core.delta.diff_units_ceiling`); then every patch is a function of its
    two experiences and skipping some changes nothing. Otherwise -- and when a chain does not
    compose -- it runs :func:`exhaustive_placement` itself. What is left of ``budget`` after a
    call is unspecified. ``stats`` counts the diffs run and skipped.
    """
    budget = Budget(PLACEMENT_BUDGET) if budget is None else budget
    if stats is not None:
        stats.placements += 1
        stats.candidates += len(chains)
    try:
        targets = _targets(new, chains, max_depth)
    except PatchError:
        targets = None
    if isinstance(targets, tuple):  # the dedup
        if stats is not None:
            placement, index = targets
            stats.exhaustive_diffs += _diffs_run(placement, chains[index], max_depth) + sum(
                1 if chain[-1].depth < max_depth else 2 for chain in chains[:index])
        return targets
    if targets is None or not _budget_covers(new, targets, budget):
        if stats is not None:
            stats.placements -= 1  # counted again there
            stats.candidates -= len(chains)
            stats.exhaustive_runs += 1
        return exhaustive_placement(new, chains, max_depth=max_depth, budget=budget,
                                    stats=stats)
    if stats is not None:
        stats.exhaustive_diffs += sum(1 + sibling for *_, sibling in targets)
    floor = PatchFloor(new)
    order = sorted((floor(base), index) for index, (_, base, _, _) in enumerate(targets))
    best: tuple[int, int] = (experience_chars(new), -1)
    best_placement = Placement(Action.ROOT)
    for bound, index in order:
        if (bound, index) >= best:
            break
        _, base, placement, _ = targets[index]
        patch = diff(base, new, budget=budget)
        if stats is not None:
            stats.diffs += 1
        cost = (patch_chars(patch), index)
        if cost < best:
            best = cost
            best_placement = Placement(Action.DELTA, anchor=placement.anchor,
                                       depth=placement.depth, patch=patch)
    return best_placement, (best[1] if best[1] >= 0 else None)


_Target: TypeAlias = tuple[Experience, Experience, Placement, bool]


def _targets(new: Experience, chains: Sequence[Sequence[Node]], max_depth: int
             ) -> tuple[Placement, int] | list[_Target] | None:
    """Step 1 of :func:`choose_placement`: the first dedup, as (placement, index); else, per
    chain, (its composition, the composition a delta would be diffed against, the delta's
    anchor and depth as a patchless placement, whether it is a sibling: :func:`place` then
    diffs twice). Raises ``PatchError`` where :func:`place` could raise; None where the
    reference's behaviour is left to the reference."""
    out: list[_Target] = []
    compose_prefix = _composer()
    for index, chain in enumerate(chains):
        if not chain:
            return None  # place() reads this as a root: left to the reference
        match = chain[-1]
        composed = compose_prefix(chain, len(chain))
        if _same(composed, new):
            return Placement(Action.DEDUP, anchor=match.id, depth=match.depth), index
        if match.depth < max_depth:
            out.append((composed, composed,
                        Placement(Action.DELTA, anchor=match.id, depth=match.depth + 1), False))
            continue
        if len(chain) < 2:
            return None  # no parent to take a sibling: place() raises there
        base = compose_prefix(chain, len(chain) - 1)
        parent = chain[-2]
        if _same(base, new):
            return Placement(Action.DEDUP, anchor=parent.id, depth=parent.depth), index
        out.append((composed, base, Placement(Action.DELTA, anchor=parent.id,
                                              depth=match.depth), True))
    return out


# Compositions of chain prefixes kept between placements (a pure function of the root's content
# and the patches, memoised on their values; learning composes the same popular chains again
# and again). Entries are small experiences; the oldest go first.
COMPOSED_MEMO = 4096


@lru_cache(maxsize=COMPOSED_MEMO)
def _composed(prefix: tuple[Any, ...]) -> Experience:
    """``compose(prefix[0], prefix[1:])``, memoised on every shorter prefix too."""
    if len(prefix) == 1:
        first: Experience = prefix[0]
        return first
    return apply(_composed(prefix[:-1]), prefix[-1])


def _composer() -> Callable[[Sequence[Node], int], Experience]:
    """``compose_chain(chain[:length])``, memoised (:data:`COMPOSED_MEMO`) on the values of the
    root's content and the patches, so that chains sharing a prefix -- in one placement and
    between placements -- compose it once."""
    def compose_prefix(chain: Sequence[Node], length: int) -> Experience:
        nodes = chain[:length]
        if not nodes or nodes[0].content is None:
            raise PatchError("a chain must start at a root that holds content")
        key = (nodes[0].content, *(n.patch for n in nodes[1:]))
        try:
            return _composed(key)
        except TypeError:  # something unhashable: compose without the memo
            return compose_chain(nodes)

    return compose_prefix


def _budget_covers(new: Experience, targets: list[_Target], budget: Budget) -> bool:
    """Whether ``budget`` covers every diff the exhaustive rule runs on ``targets``
    (:func:`~deltamem.core.delta.diff_units_ceiling`: first the coarse bound in characters,
    then, if that is too coarse, the one in tokens)."""
    def ceiling(count: Callable[[str], int]) -> int:
        return sum(diff_units_ceiling(composed, new, count)
                   + (diff_units_ceiling(base, new, count) if sibling else 0)
                   for composed, base, _, sibling in targets)

    if ceiling(len) <= budget.left:
        return True
    counts: dict[str, int] = {}

    def tokens(text: str) -> int:
        known = counts.get(text)
        if known is None:
            known = counts[text] = token_count(text)
        return known

    return ceiling(tokens) <= budget.left


def _same(old: Experience, new: Experience) -> bool:
    """Whether :func:`~deltamem.core.delta.diff` from ``old`` to ``new`` is empty."""
    return type(old) is type(new) and all(
        getattr(old, n) == getattr(new, n) for n in new.SCALARS) and all(
        tuple(getattr(old, n)) == tuple(getattr(new, n)) for n in new.LISTS)


class Placer(Protocol):
    """A placement rule: where ``new`` goes among the candidate ``chains`` (best match first),
    and the index of the chain it was placed on (None for a root). :func:`choose_placement` is
    the memory's rule; an experiment may swap in another (``DeltaMem.placer``)."""

    def __call__(self, new: Experience, chains: Sequence[Sequence[Node]], *,
                 max_depth: int = ...) -> tuple[Placement, int | None]: ...


@dataclass(frozen=True, slots=True)
class Retirement:
    """What consolidating a chain into a new root changes in the live tree
    (:func:`retirement`): the nodes that leave it, each with the experience it composed to
    (the source first, then up the chain), and the live nodes that move (new parent, depth or
    patch)."""

    retired: tuple[tuple[Node, Experience], ...]
    moved: tuple[Node, ...]


def retirement(chain: Sequence[Node], tree: Iterable[Node], root: Node, *,
               replaces: Callable[[Node], bool] = lambda node: True) -> Retirement:
    """The chain ``chain`` (root first) was compiled into ``root``; what it retires.

    The compiled node (``chain[-1]``) leaves the live tree, and so does every ancestor left
    without a live child that ``root`` ``replaces`` (the caller's test: the engine's is that
    ``root`` carries the ancestor's episode metadata, so that a filter finds ``root`` wherever
    it found the ancestor): ``root`` replaces that part of the chain. The compiled node's
    children become children of ``root`` -- their patches unchanged when ``root`` holds
    exactly the chain's composition (a compile that did not rewrite), re-diffed against
    ``root``'s content otherwise -- and their descendants move up with them. An ancestor
    that still has another child stays, with its branch. Every live node composes to exactly
    what it composed to before. ``tree`` is every live node of the chain's tree.
    """
    source = chain[-1]
    composed = compose_chain(chain)
    assert root.content is not None
    rewritten = not _same(composed, root.content)
    children: dict[str | None, list[Node]] = {}
    for node in tree:
        children.setdefault(node.parent_id, []).append(node)
    shift = source.depth - root.depth
    moved: list[Node] = []
    for child in children.get(source.id, []):
        patch = diff(root.content, apply(composed, child.patch)) if rewritten else child.patch
        moved.append(replace(child, parent_id=root.id, depth=child.depth - shift, patch=patch))
    for node in moved:  # grows while walking: the moved subtrees, breadth first
        moved += [replace(c, depth=c.depth - shift) for c in children.get(node.id, [])]
    gone = {source.id}
    for node in reversed(chain[:-1]):
        if any(c.id not in gone for c in children.get(node.id, [])) or not replaces(node):
            break
        gone.add(node.id)
    retired = tuple((node, compose_chain(chain[: i + 1])) for i, node in enumerate(chain)
                    if node.id in gone)
    return Retirement(retired[::-1], tuple(moved))


def due_for_consolidation(node: Node, threshold: int) -> bool:
    """Whether ``node``'s chain should be compiled into a new root.

    Only successful deltas qualify: a root is already self-contained, a failure lesson must never
    become instructions (the authors' reference code lets it), and a node is
    compiled at most once.
    """
    return (
        not node.is_root
        and node.outcome is Outcome.SUCCESS
        and not node.consolidated
        and node.successes >= threshold
    )


def discredited(node: Node) -> bool:
    """Whether a successful experience's record is mostly failures.

    A node's record is the episode that wrote it plus every episode that matched it or was
    handed it at recall and then ended (:func:`chain_evidence` of the node alone). A skill
    that more episodes failed with than succeeded with no longer earns its success: recall
    scores it like a failure (``cos - penalty``), so an untried or better-kept alternative wins,
    and a skill that only ever worked in the game it was learned in stops being handed out.
    Failure nodes are already penalised; the rule has no threshold of its own.
    """
    if node.outcome is Outcome.FAILURE:
        return False
    record = chain_evidence([node])
    return record.failures > record.successes


@dataclass(frozen=True, slots=True)
class Evidence:
    """The episodes behind a chain: how many, and how they ended."""

    episodes: int = 0
    successes: int = 0
    failures: int = 0

    def to_dict(self) -> dict[str, int]:
        return {"episodes": self.episodes, "successes": self.successes,
                "failures": self.failures}


def chain_evidence(chain: Sequence[Node]) -> Evidence:
    """The episodes behind ``chain``: the episode that wrote its root plus every episode that
    matched one of its nodes since (deduplicated into it or extended it).

    A consolidated root was written by consolidation, not by an episode; it carries the evidence
    of the chain it was compiled from in ``meta["evidence"]`` (see :func:`consolidation_meta`),
    so that a skill compiled from seven successes does not read as backed by none.
    """
    root = chain[0]
    wrote = 1 if root.episode_id else 0
    inherited = root.meta.get("evidence") if root.lineage else None
    base = inherited if isinstance(inherited, dict) else {}
    return Evidence(
        episodes=_count(base, "episodes") + wrote + sum(n.hits for n in chain),
        successes=(_count(base, "successes") + sum(n.successes for n in chain)
                   + int(wrote and root.outcome is Outcome.SUCCESS)),
        failures=(_count(base, "failures") + sum(n.failures for n in chain)
                  + int(wrote and root.outcome is Outcome.FAILURE)),
    )


def _count(counts: dict[str, object], name: str) -> int:
    # meta comes back from imports and other writers as plain JSON: anything but a count is 0.
    value = counts.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def consolidation_meta(chain: Sequence[Node]) -> dict[str, object]:
    """The metadata of the root compiled from ``chain``: where it came from and its evidence
    (the layout of the compiled node's scene is kept, so that same-layout ordering still
    applies to it)."""
    last = chain[-1]
    meta: dict[str, object] = {"consolidated_from": last.id,
                               "evidence": chain_evidence(chain).to_dict()}
    if "layout" in last.meta:
        meta["layout"] = last.meta["layout"]
    return meta


def forest_problems(nodes: Iterable[Node], *, max_depth: int = MAX_DEPTH) -> list[tuple[str, str]]:
    """Integrity problems of a forest as ``(node id, problem)`` pairs (empty list when sound).

    Checks: ids are unique, every parent exists and lives in the same tree, depths agree with
    parents (so no parent cycle can exist), roots hold content and deltas a patch, depth never
    exceeds ``max_depth``, env nodes are successes, and every chain composes.
    """
    by_id: dict[str, Node] = {}
    problems: list[tuple[str, str]] = []
    for node in nodes:
        if node.id in by_id:
            problems.append((node.id, "duplicate id"))
        by_id[node.id] = node
    for node in by_id.values():
        problems.extend((node.id, p) for p in _node_problems(node, by_id, max_depth))
    if problems:
        return problems
    # Depths now strictly increase from a root along every parent link, so every walk ends.
    for node in by_id.values():
        try:
            compose_chain(_chain_of(node, by_id))
        except PatchError as exc:
            problems.append((node.id, f"chain does not compose: {exc}"))
    return problems


def _node_problems(node: Node, by_id: dict[str, Node], max_depth: int) -> list[str]:
    out: list[str] = []
    if node.is_root:
        if node.parent_id is not None or node.depth != 1 or node.content is None:
            out.append("root must have no parent, depth 1 and content")
    else:
        parent = by_id.get(node.parent_id or "")
        if parent is None:
            out.append(f"parent {node.parent_id!r} is missing")
        elif parent.tree is not node.tree:
            out.append(f"parent {parent.id} is in the other tree")
        elif node.depth != parent.depth + 1:
            out.append(f"depth {node.depth} disagrees with parent {parent.id} "
                       f"(depth {parent.depth}; a cycle, or a broken link)")
        if node.patch is None:
            out.append("delta without a patch")
    if node.depth > max_depth:
        out.append(f"depth {node.depth} exceeds {max_depth}")
    if node.tree == "env" and node.outcome is not Outcome.SUCCESS:
        out.append("environment nodes are always successes")
    return out


def _chain_of(node: Node, by_id: dict[str, Node]) -> list[Node]:
    chain = [node]
    while chain[-1].parent_id is not None:
        chain.append(by_id[chain[-1].parent_id])
    return chain[::-1]


def chains_from(nodes: Iterable[Node], node_ids: Sequence[str]) -> dict[str, list[Node]]:
    """The path root -> each of ``node_ids`` through ``nodes`` (ids not among them are absent),
    walked as ``chain`` walks: to the parent while its depth is smaller, so a damaged parent
    cycle ends."""
    by_id = {n.id: n for n in nodes}
    out: dict[str, list[Node]] = {}
    for node_id in node_ids:
        node = by_id.get(node_id)
        if node is None:
            continue
        path = [node]
        while node.parent_id is not None:
            parent = by_id.get(node.parent_id)
            if parent is None or parent.depth >= node.depth:
                break
            path.append(parent)
            node = parent
        out[node_id] = path[::-1]
    return out
