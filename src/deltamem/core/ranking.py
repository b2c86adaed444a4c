"""Ranking rules of the read path: pure functions over scanned candidates and their nodes.

A store's ``scan`` ranks a tree by the penalised score of ``core.scoring`` alone. Recall then
applies the memory's own rules, each a function here over values the facade fetched (one batch
``get_nodes`` per round, never one call per candidate):

* :func:`rescored` / :func:`task_ranked` -- a successful skill whose record is mostly failures
  (``core.tree.discredited``) is re-scored like a failure, and the task tree re-sorted. Re-scoring
  only lowers scores, so a scan of the best ``k`` is exact for the best ``need`` re-scored ones
  once a scanned score falls below theirs; until then the caller widens the scan.
* :func:`started_here` -- among the exact ties of the best task candidate, skills learned in a
  scene of the agent's layout first.
* :func:`kind_first` -- when the best task candidate clears the threshold, the one whose key
  is nearest the query's *template* (the query without its slot words, ``core.slots``) first:
  templated tasks share most words ("heat some mug and put it in countertop", "cool some mug
  and put it in countertop") and a sentence embedding weighs the shared object above the one
  word that changes the procedure. What is a slot is read from the stored episodes' actions,
  never from a list of words.
* :func:`same_scene` -- environment candidates learned in a scene of the query's layout only,
  newest first among exact ties; for scenes with contents (instances of types), those whose
  contents overlap the query's, newest first.
* :func:`link` -- a chain node's similarity and score, explained.
* :func:`trace_signature` -- the fingerprint of what an extractor sees of an episode.
* :func:`check_filters` / :func:`matches` / :func:`matching` -- metadata filters: a node
  matches when the meta of the episode that wrote it has every filtered key with an equal
  value (recall and listing keep only matching nodes; the read path widens its scan until it
  has enough of them, so a filtered recall is exact).

Layouts are strings computed by the caller (a scene's ``signature``): ranking compares them and
knows no domain's phrasing. The functions that walk candidates in order take ``fetched``, the
number of leading candidates whose nodes were asked for; when a rule needs a node past that
prefix it answers ``None`` and the caller fetches the rest (:func:`first_round` says how many
to fetch first, usually all that is needed).
"""

from __future__ import annotations

import hashlib
import heapq
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from deltamem.core.knowledge import (
    SCENE_OVERLAP,
    latest_first,
    same_layout_first,
    scene_overlap,
)
from deltamem.core.model import Episode, Node, Outcome, Tree
from deltamem.core.scoring import accepts, penalised, score
from deltamem.core.tree import discredited
from deltamem.errors import ConfigError

# How many candidates a writer compares, and how many a read ranks before widening.
POOL = 32

# The scoping keys agents use (Mem0 / LangGraph style): who (``user``), which agent
# (``agent``), which session or run (``run``) and which project (``project``). They are
# ordinary keys of an episode's ``meta``; any other key filters the same way.
SCOPE_KEYS = ("user", "agent", "run", "project")
# Bounds of one filter (every face applies them through check_filters).
MAX_FILTERS = 16
MAX_FILTER_KEY = 200
MAX_FILTER_VALUE = 1_000
FilterValue = str | int | float | bool | None


@dataclass(frozen=True, slots=True)
class Candidate:
    """One scored node from a scan.

    ``discredited``: a successful node scored as a failure because its record is mostly
    failures (``core.tree.discredited``); ranking sets it, scans never do.
    """

    id: str
    similarity: float
    failure: bool
    depth: int
    score: float
    discredited: bool = False


@dataclass(frozen=True, slots=True)
class Link:
    """A chain node's similarity to the query and its score (``cos - penalty*[failure]``)."""

    similarity: float
    score: float
    failure: bool


def first_round(found: Sequence[Candidate], need: int) -> int:
    """How many leading candidates to fetch first: the best ``need`` with the ties of the last,
    and one more (the first that cannot reach them, which ends the rules' walks)."""
    if need <= 0 or len(found) <= need:
        return len(found)
    bar = found[need - 1].score
    n = need
    while n < len(found) and found[n].score == bar:
        n += 1
    return min(n + 1, len(found))


def rescored(found: Sequence[Candidate], nodes: Mapping[str, Node], need: int, penalty: float,
             *, fetched: int | None = None
             ) -> tuple[list[tuple[Candidate, float]], bool] | None:
    """``found`` in scan order, discredited ones re-scored, each with its creation time, up to
    the first candidate that cannot reach the best ``need`` (then ``True``: complete).

    A candidate absent from ``nodes`` among the first ``fetched`` was deleted since the scan and
    is dropped; ``None`` when a candidate past ``fetched`` is needed.
    """
    fetched = len(found) if fetched is None else fetched
    kept: list[tuple[Candidate, float]] = []
    best: list[float] = []  # min-heap of the best ``need`` kept scores; best[0] is the bar
    for i, candidate in enumerate(found):
        if len(best) >= need and candidate.score < best[0]:
            return kept, True  # it and every later candidate score below the kept ones
        if i >= fetched:
            return None
        node = nodes.get(candidate.id)
        if node is None:  # deleted by another writer since the scan
            continue
        if discredited(node):
            candidate = replace(candidate, failure=True, discredited=True,
                                score=penalised(candidate.similarity, penalty))
        kept.append((candidate, node.created_at))
        if len(best) < need:
            heapq.heappush(best, candidate.score)
        else:
            heapq.heappushpop(best, candidate.score)
    return kept, False


@dataclass(frozen=True, slots=True)
class Ranked:
    """The answer of :func:`task_ranked`: the candidates, or what the caller must do first."""

    candidates: list[Candidate] | None = None
    fetch_more: bool = False  # fetch the nodes of the rest of ``found``, then ask again
    widen: bool = False  # scan more candidates, then ask again


def task_ranked(found: Sequence[Candidate], nodes: Mapping[str, Node], need: int,
                penalty: float, *, exhausted: bool, fetched: int | None = None) -> Ranked:
    """Task-tree candidates best first, with discredited skills scored as failures.

    ``found`` is a scan of the best ``k``; ``exhausted`` says it holds the whole tree
    (``len(found) < k``). Without a discredited candidate among those that matter, this is the
    scan itself. Otherwise the re-scored candidates are sorted by score, then shallower, then
    newer -- once the scan is known to hold the best ``need`` of them; until then
    ``widen``.
    """
    result = rescored(found, nodes, need, penalty, fetched=fetched)
    if result is None:
        return Ranked(fetch_more=True)
    kept, complete = result
    if not any(c.discredited for c, _ in kept):
        return Ranked(list(found))
    if not complete and not exhausted:
        return Ranked(widen=True)
    kept.sort(key=lambda pair: (-pair[0].score, pair[0].depth, -pair[1]))
    return Ranked([c for c, _ in kept])


def best_ties(found: Sequence[Candidate]) -> list[Candidate]:
    """The leading run of candidates that tie exactly with the best score."""
    if not found:
        return []
    top = found[0].score
    out = []
    for candidate in found:
        if candidate.score != top:
            break
        out.append(candidate)
    return out


# How much the template similarity (0..1) weighs beside the full score in :func:`kind_first`;
# 8.0 was chosen (2-12 tried) on the dev games and dev templated tasks of the memory-quality
# probe (docs/results.md, "Memory-quality probe", turn 6); 0 turns the rule off.
KIND_WEIGHT = 8.0


def kind_first(found: Sequence[Candidate], kinds: Mapping[str, float], threshold: float,
               weight: float = KIND_WEIGHT) -> list[Candidate]:
    """``found`` (best score first) with the candidate of the best ``score + weight * kind``
    first, the others in order, when the best score clears ``threshold``; else unchanged.

    ``kinds`` holds each candidate's *template similarity*: the cosine of the query's template
    (``core.slots.template``, the query without its slot words) with the candidate's (its key
    without its stored slots; a candidate without one counts 0). Templated tasks share their
    objects and receptacles, and the full cosine weighs those above the word that sets the
    kind of task apart; the template keeps only what the task does. The threshold still
    decides whether anything matched (the best score, as without this rule); which candidate
    is shown is then chosen among those that clear it by their score *or by their template
    similarity*: a task phrased in words no stored key uses is of the kind its template says,
    whatever object the nearer keys share with it, but a candidate matched by neither is never
    shown."""
    if weight <= 0 or len(found) < 2 or not accepts(found[0].score, threshold):
        return list(found)
    eligible = [c for c in found
                if accepts(c.score, threshold) or accepts(kinds.get(c.id, 0.0), threshold)]
    best = max(eligible, key=lambda c: c.score + weight * kinds.get(c.id, 0.0))
    return [best, *(c for c in found if c is not best)]


def started_here(found: Sequence[Candidate], nodes: Mapping[str, Node],
                 layout: str) -> list[Candidate]:
    """Task-tree candidates with the best score's exact ties learned in a scene of ``layout``
    first (a node remembers its scene's layout in ``meta["layout"]``): variations of a task
    often share one task text, and the skill that started where the agent stands has the right
    route. ``nodes`` must hold the ties (:func:`best_ties`); a missing one counts as another
    layout."""
    if not layout or len(found) < 2 or found[1].score != found[0].score:
        return list(found)
    layouts = {}
    for candidate in best_ties(found):
        node = nodes.get(candidate.id)
        layouts[candidate.id] = str(node.meta.get("layout", "")) if node else ""
    return same_layout_first(found, layouts, layout)


def same_scene(found: Sequence[Candidate], nodes: Mapping[str, Node], layout: str,
               signature: Callable[[str], str], *, limit: int | None = None,
               fetched: int | None = None,
               contents: Callable[[str], frozenset[str]] | None = None,
               mine: frozenset[str] = frozenset(),
               overlap: float = SCENE_OVERLAP,
               threshold: float | None = None) -> list[Candidate] | None:
    """``found`` for the environment tree: only nodes learned in a scene whose key has the
    ``layout`` of the query (``signature(node.key) == layout``), and among exact ties the newest
    first (``core.knowledge.latest_first``).

    Nodes of one scene text share a vector and tie exactly; the newest of them holds the
    latest word about the scene (its chain has every later fact superseding the older ones),
    so recall shows it and learning extends it. A consolidated root still wins over the node
    it was compiled from (it is newer).

    With ``limit``, only the first ``limit`` are needed: the walk stops once ``limit`` are kept
    and the run of ties of the last one is complete (``latest_first`` only reorders within such
    runs). A candidate absent from ``nodes`` among the first ``fetched`` was deleted and is
    dropped; ``None`` when a candidate past ``fetched`` is needed.

    **By contents.** When the query's scene has contents (``mine``: the entity types a scene
    plug-in's ``contents`` finds in it, e.g. a floor plan's receptacle types), a node also
    matches when its scene's ``contents`` overlap ``mine`` by at least ``overlap``
    (``core.knowledge.scene_overlap``), whatever its exact layout: such scenes are random
    draws of their types and their knowledge is type-level tendencies. Then every matching
    candidate is walked and, among those that clear ``threshold``, the newest comes first (the
    others follow): each episode extends the newest knowledge of its kind of scene, so the
    newest holds the tallies of all before it.
    """
    fetched = len(found) if fetched is None else fetched
    by_contents = contents is not None and bool(mine)
    kept: list[Candidate] = []
    created: dict[str, float] = {}
    for i, candidate in enumerate(found):
        if not by_contents and limit is not None and len(kept) >= limit \
                and candidate.score != kept[-1].score:
            break
        if i >= fetched:
            return None
        node = nodes.get(candidate.id)
        if node is not None and (signature(node.key) == layout or (
                contents is not None and by_contents
                and scene_overlap(contents(node.key), mine) >= overlap)):
            kept.append(candidate)
            created[candidate.id] = node.created_at
    if by_contents:
        return sorted(kept, key=lambda c: (threshold is not None and not accepts(c.score,
                                                                             threshold),
                                           -created[c.id]))
    return latest_first(kept, created)


def link(node: Node, similarity: float | None, penalty: float) -> Link:
    """A chain node's similarity to the query (0 without a vector) and its score: a failure, or
    a discredited skill, is penalised exactly as the scan and re-scoring penalise it."""
    sim = 0.0 if similarity is None else similarity
    failure = node.outcome is Outcome.FAILURE or (node.tree is Tree.TASK and discredited(node))
    return Link(sim, score(sim, failure, penalty), failure)


def trace_signature(episode: Episode, tree: Tree) -> str:
    """Fingerprint of what an extractor sees of an episode for one tree.

    Task tree: the actions and the outcome; environment tree: actions and observations.
    """
    h = hashlib.blake2b(digest_size=12)
    h.update(tree.value.encode())
    if tree is Tree.TASK:
        h.update(episode.task.encode() + b"\x00" + str(episode.success).encode())
    else:
        h.update(episode.env.encode())
    for step in episode.steps:
        h.update(b"\x01" + step.action.encode())
        if tree is Tree.ENV:
            h.update(b"\x02" + step.observation.encode())
    return h.hexdigest()


def check_filters(filters: Mapping[str, Any] | None) -> dict[str, FilterValue]:
    """``filters`` as a plain dict, checked: at most :data:`MAX_FILTERS` keys, each a
    non-empty string, each value a JSON scalar (string, number, boolean or null); else a
    ``ConfigError`` naming the culprit."""
    if filters is None:
        return {}
    if not isinstance(filters, Mapping):
        raise ConfigError(f"filters must be an object of key: value, got {type(filters).__name__}")
    if len(filters) > MAX_FILTERS:
        raise ConfigError(f"at most {MAX_FILTERS} filters, got {len(filters)}")
    out: dict[str, FilterValue] = {}
    for key, value in filters.items():
        if not isinstance(key, str) or not key or len(key) > MAX_FILTER_KEY:
            raise ConfigError(f"filter key {key!r} must be a non-empty string of at most "
                              f"{MAX_FILTER_KEY} characters")
        if value is not None and not isinstance(value, str | int | float | bool):
            raise ConfigError(f"filter {key!r} must be a string, number, boolean or null, got "
                              f"{type(value).__name__}")
        if isinstance(value, str) and len(value) > MAX_FILTER_VALUE:
            raise ConfigError(f"filter {key!r} is longer than {MAX_FILTER_VALUE} characters")
        out[key] = value
    return out


def filters_from_pairs(pairs: Sequence[str] | None) -> dict[str, FilterValue]:
    """Filters from ``key=value`` texts (the CLI's ``--filter``, the REST listing's ``filters``
    query parameter): split at the first ``=``; the values are strings. A repeated key is an
    error, as is a text without ``=`` or with an empty key."""
    out: dict[str, FilterValue] = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"filter {pair!r} must be key=value, e.g. user=alice")
        if key in out:
            raise ConfigError(f"filter {key!r} is given twice; give each key once")
        out[key] = value
    return check_filters(out)


def scope_of(meta: Mapping[str, Any]) -> dict[str, Any]:
    """The :data:`SCOPE_KEYS` an episode's ``meta`` carries, with their values."""
    return {key: meta[key] for key in SCOPE_KEYS if key in meta}


def user_meta(node: Node) -> Mapping[str, Any]:
    """The metadata a node is filtered on: the ``meta`` of the episode that wrote it (kept in
    ``node.meta["episode_meta"]``; consolidation and corrections carry it to the roots they
    write). Empty for a node written without one."""
    return _episode_meta(node.meta)


def _episode_meta(meta: Mapping[str, Any]) -> Mapping[str, Any]:
    found = meta.get("episode_meta")
    return found if isinstance(found, Mapping) else {}


def carried_meta(node: Node) -> dict[str, Any]:
    """What a root written from ``node`` (a consolidation, a correction) keeps of its meta so
    that filters find it where they found ``node``: its episode meta, if any; and its key's
    slots (``core.slots``), if any, so that recall reads its template as ``node``'s."""
    meta = user_meta(node)
    found = node.meta.get("slots")
    return {**({"episode_meta": dict(meta)} if meta else {}),
            **({"slots": list(found)} if isinstance(found, list) and found else {})}


def _equal(stored: Any, wanted: FilterValue) -> bool:
    # JSON equality: true is not 1 (Python's True == 1 is not what a filter means).
    if isinstance(stored, bool) or isinstance(wanted, bool):
        return stored is wanted
    return bool(stored == wanted) and (stored is None) == (wanted is None)


def matches(node: Node, filters: Mapping[str, Any]) -> bool:
    """Whether ``node``'s :func:`user_meta` has every key of ``filters`` with an equal value
    (exact: ``"alice"`` is not ``"Alice"``, the string ``"1"`` is not the number ``1``; a key
    the node lacks never matches, not even ``None``). No filter matches every node."""
    return meta_matches(node.meta, filters)


def meta_matches(meta: Mapping[str, Any], filters: Mapping[str, Any]) -> bool:
    """:func:`matches` on a node's stored ``meta`` (``Store.metas``), without the node."""
    user = _episode_meta(meta)
    return all(key in user and _equal(user[key], value) for key, value in filters.items())


def matching(found: Sequence[Candidate], metas: Mapping[str, Mapping[str, Any]],
             filters: Mapping[str, FilterValue]) -> list[Candidate]:
    """The candidates of ``found`` whose node's stored meta (in ``metas``) matches
    ``filters``, in order; a candidate absent from ``metas`` was deleted since the scan and is
    dropped."""
    return [c for c in found
            if (meta := metas.get(c.id)) is not None and meta_matches(meta, filters)]
