"""The read path: scan -> batch fetch -> ``core.ranking`` -> chain -> compose (no rendering).

:class:`Reader` answers what one tree holds for one key, for :meth:`DeltaMem.recall` (which
renders the answer) and for learning (which keeps the candidates and chains and renders
nothing). It makes a bounded number of store calls per tree: one scan per round, one or two
``get_nodes`` per round, one ``chain`` and one ``vectors`` for the match.

With metadata ``filters`` (``core.ranking.matches``) a read ranks only the matching nodes, and
exactly: each round scans ``k``, reads the stored meta of the candidates it has not seen
(``Store.metas``, one call), keeps the matching ones (whose nodes it fetches), and widens the
scan ×4 until it holds enough of them (as many as an unfiltered read of a tree
holding only those nodes would scan) or the tree is exhausted. The filter applies to the
matched node; its chain is composed as usual, whatever episodes wrote the ancestors.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache, partial
from typing import Any, TypeVar

from deltamem.config import Settings
from deltamem.core import ranking, slots
from deltamem.core.knowledge import SCENE_OVERLAP
from deltamem.core.model import Node, Tree
from deltamem.core.ranking import POOL, Candidate, FilterValue
from deltamem.core.scoring import accepts, score
from deltamem.core.tree import compose_chain, discredited
from deltamem.engine.working import ChainLink, TreeMatch, cosine
from deltamem.scenes.base import contents_of
from deltamem.store.base import Store, Vector

_R = TypeVar("_R")
SIGNATURES = 8192  # scene signatures remembered per reader


@dataclass(frozen=True, slots=True)
class Scanned:
    """What :meth:`Reader.task_ranked` read beside its ranking: the last scan's nodes' vectors
    (``Store.scan_vectors``) and the nodes it fetched ahead for the template rule but did not
    need (``spare``)."""

    vectors: dict[str, Vector]
    spare: dict[str, Node]


@dataclass(slots=True)
class TreeRead:
    """One tree's recall plus what learning reuses: the scan of the best :data:`POOL` nodes
    (``None`` when the recall scanned another number) and the nodes fetched for ranking."""

    recall: TreeMatch
    scanned: list[Candidate] | None = None
    nodes: dict[str, Node] = field(default_factory=dict)
    ranked: list[Candidate] | None = None  # the task tree's ranking, before the top k
    # A read for learning: the chains of the scan's placement candidates (``placing``), fetched
    # with the match's own chain in one call.
    chains: dict[str, list[Node]] | None = None


class Reader:
    """Ranks one space's trees for a query (see the module docstring).

    ``signature`` maps a scene text to its layout (knowledge of one layout is never recalled
    for another; skills learned in the agent's layout win exact ties). ``contents`` maps it to
    the entity types it shows (``scenes.base.contents_of``): knowledge of scenes whose contents
    overlap by ``scene_overlap`` is shared across layouts (``core.ranking.same_scene``).
    """

    def __init__(self, store: Store, space: str, settings: Settings,
                 signature: Callable[[str], str],
                 contents: Callable[[str], frozenset[str]] | None = None,
                 embed: Callable[[list[str]], list[Vector]] | None = None):
        self.store = store
        self.space = space
        self.settings = settings
        # A scene's signature is a function of its text: each node key's is computed once per
        # process, not once per candidate per read (a learn reads both trees twice).
        self.signature = lru_cache(maxsize=SIGNATURES)(signature)
        self.contents = lru_cache(maxsize=SIGNATURES)(contents or contents_of(None))
        self.scene_overlap = SCENE_OVERLAP
        self.kind_weight = ranking.KIND_WEIGHT
        # Embeds templates (``kind_first``, through the facade's cache); without it, recall is
        # by the score alone.
        self.embed = embed

    def tree(self, tree: Tree, key: str, query: Vector, k: int, *, scene: str = "",
             filters: dict[str, FilterValue] | None = None, placing: bool = False) -> TreeRead:
        """What ``tree`` recalls for ``key`` (``scene``: the agent's scene, for task ties;
        ``filters``: only nodes whose episode meta matches, see the module docstring).

        ``placing``: a read for learning, which places the episode against the same scan: the
        placement candidates' chains (:meth:`placement_candidates`) come with the match's in one
        call (``TreeRead.chains``), and no link similarities are computed."""
        threshold = self.settings.threshold(tree)
        result = TreeMatch(tree, key, threshold, self.settings.penalty, query=query)
        read = TreeRead(result)
        if not key.strip():
            return read
        if filters:
            ranked, read.nodes = self.filtered(tree, key, query, max(k, 1), filters, scene)
        elif tree is Tree.ENV:
            found = self.scan(tree, query, max(k, POOL))
            read.scanned = found if len(found) < POOL or max(k, POOL) == POOL else None
            ranked, read.nodes = self.same_scene(key, found, limit=max(k, 1))
        else:
            ranked, read.nodes, read.scanned, scanned = self.task_ranked(
                query, max(k, 1), pool=self.kind_weight > 0 and self.embed is not None)
            read.ranked = ranked
            ranked, read.nodes, result.slots = self.kind_first(
                key, query, ranked, read.nodes, threshold, vectors=scanned.vectors,
                spare=scanned.spare)
            ties = ranking.best_ties(ranked)
            read.nodes = self.nodes_of(ties, read.nodes)
            ranked = ranking.started_here(ranked, read.nodes, self.signature(scene))
        result.candidates = ranked[: max(k, 1)]
        result.best = result.candidates[0] if result.candidates else None
        # The threshold decides whether anything matched: the best score (``kind_first`` may
        # put a candidate of a lower score first, as the one shown).
        accepted = bool(ranked) and accepts(max(c.score for c in ranked), threshold)
        if placing and read.scanned is not None:
            ids, read.nodes = self.placement_candidates(tree, key, read.scanned, read.nodes)
            read.chains = self.store.chains(self.space, ids + (
                [result.best.id] if result.best is not None and accepted else []))
        if result.best is None or not accepted:
            return read
        result.chain = read.chains.get(result.best.id, []) if read.chains is not None else \
            self.store.chain(self.space, result.best.id)
        if not result.chain:  # deleted by another writer since the scan: nothing matched
            result.best = None
            return read
        result.experience = compose_chain(result.chain)
        if placing:
            return read
        vectors = self.store.vectors(self.space, [n.id for n in result.chain])
        result.links = [self.link(node, query, vectors.get(node.id)) for node in result.chain]
        return read

    def placement_candidates(self, tree: Tree, key: str, found: list[Candidate],
                             have: dict[str, Node] | None = None
                             ) -> tuple[list[str], dict[str, Node]]:
        """The ids of the scanned nodes an episode keyed ``key`` is placed against, best first:
        those that clear the tree's threshold (in the environment tree, only scenes of the same
        layout), with the nodes fetched for the layout (``have``: fetched already).

        The threshold comes first: the layout filter keeps the order of what it keeps (it
        reorders only exact ties, which the threshold keeps or drops together), so only the
        nodes of candidates that clear it are fetched."""
        threshold = self.settings.threshold(tree)
        found = [c for c in found if accepts(c.score, threshold)]
        nodes = dict(have or {})
        if tree is Tree.ENV:
            found, nodes = self.same_scene(key, found, have=nodes)
        return [c.id for c in found], nodes

    def kind_first(self, key: str, query: Vector, ranked: list[Candidate],
                   nodes: dict[str, Node], threshold: float, *, widen: bool = True,
                   vectors: dict[str, Vector] | None = None,
                   spare: dict[str, Node] | None = None
                   ) -> tuple[list[Candidate], dict[str, Node], frozenset[str]]:
        """``core.ranking.kind_first`` over the first :data:`POOL` ranked task candidates (the
        scan, discredited skills re-scored; a filtered read: of the matching ones), by the
        template similarity of each: the cosine of the query's template (``core.slots``: the
        key without the words the pool's keys hold as slots) with the candidate's template (its
        key without its stored slots; a key without slots is its own template, whose vector is
        the stored one).

        The rule runs only where the best score rests on a shared slot (the best candidate's
        key holds one of the query's slots): then its cosine may come from the object and
        receptacle it shares with the query, not from what the task does. A free-text request
        whose nearest key shares none of its slots keeps the order of the scores.

        ``widen``: the query template's own scan of the best :data:`POOL` adds its candidates
        (scored by the query like the others), so that a key of the query's kind that shares no
        slot with it is among them. ``vectors``: the stored vectors of ``ranked``'s
        candidates, as the query's scan returned them (``Store.scan_vectors``; the missing
        ones are read); ``spare``: nodes fetched ahead for the pool (:meth:`task_ranked`).

        Cost: one ``get_nodes`` for the pool when :meth:`task_ranked` did not fetch it, one
        template scan that returns its rows' vectors (``Store.scan_vectors``) and one
        ``get_nodes`` for its new candidates; one embedding call for the query's template and
        the pool's templates together (all cached by text), and one more only for templates
        the template scan's candidates bring. Also returns the query's slots.

        ``tests/test_kind_fold.py`` checks this against the rule as first written (template
        scan, then one ``vectors`` call for every candidate, then the templates embedded)."""
        pool = ranked[:POOL]
        if self.kind_weight <= 0 or self.embed is None or not pool or not accepts(
                max(c.score for c in pool), threshold):
            return ranked, nodes, frozenset()
        nodes = self.nodes_of(pool, nodes, spare)
        known = [(node.key, _slots(node)) for c in pool if (node := nodes.get(c.id)) is not None]
        votes = slots.slot_votes(known)
        mine = frozenset(w for w in slots.key_words(key) if votes.get(w, 0) > 0)
        shape = slots.template(key, mine)
        if shape == key or not slots.tokens(shape):
            return ranked, nodes, mine  # no slot known: the template is the key
        top = nodes.get(pool[0].id)
        if top is None or not mine.intersection(_slots(top)):
            return ranked, nodes, mine  # the best score does not rest on a shared slot
        have = {c.id for c in pool}
        found = dict(vectors or {})
        missing = [c.id for c in pool if c.id not in found]
        if missing:
            found.update(self.store.vectors(self.space, missing))
        # A key's slots are those the first node keyed so and stored with slots holds (a
        # consolidated root or a node stored before slots were kept shares its key, so it ties
        # as it did); its template is cut by the pool's votes (``core.slots.pool_template``).
        stored = _stored_slots(nodes.values(), {})
        cut: dict[str, str] = {}

        def template_of(node: Node | None) -> str | None:
            if node is None or node.key not in stored:
                return None
            if node.key not in cut:
                cut[node.key] = slots.pool_template(node.key, stored[node.key], votes)
            return cut[node.key]

        # The query's template and the pool's templates in one embedding call.
        first = sorted({t for c in pool if (t := template_of(nodes.get(c.id))) is not None}
                       - {shape})
        shaped, *rest = self.embed([shape, *first])
        embedded = {shape: shaped, **dict(zip(first, rest, strict=True))}
        extra: list[Candidate] = []
        if widen:
            scanned, rows = self.scan_vectors(Tree.TASK, shaped, POOL)
            extra = [c for c in scanned if c.id not in have]
            found.update((c.id, rows[c.id]) for c in extra)
            before = nodes
            nodes = self.nodes_of(extra, nodes)
            # The new nodes come last: they lend their slots only to keys no node before had
            # slots for, whose templates were not cut yet.
            _stored_slots((n for i, n in nodes.items() if i not in before), stored)
        pool_vectors = {c.id: v for c in (*pool, *extra) if (v := found.get(c.id)) is not None}
        added = []
        for candidate in extra:
            node, vector = nodes.get(candidate.id), pool_vectors.get(candidate.id)
            if node is None or vector is None:  # deleted since the scan
                continue
            sim = cosine(query, vector)
            failure = candidate.failure or discredited(node)
            added.append(Candidate(candidate.id, sim, failure, candidate.depth,
                                   score(sim, failure, self.settings.penalty),
                                   discredited=failure and not candidate.failure))
        shapes = {i: t for i in pool_vectors if (t := template_of(nodes.get(i))) is not None}
        late = sorted(set(shapes.values()) - embedded.keys())
        if late:
            embedded.update(zip(late, self.embed(late), strict=True))
        kinds = {i: cosine(shaped, embedded[shapes[i]] if i in shapes else v)
                 for i, v in pool_vectors.items()}
        merged = sorted([*ranked, *added], key=lambda c: -c.score)  # stable: ties keep order
        order = ranking.kind_first(merged[: len(pool) + len(added)], kinds, threshold,
                                   self.kind_weight)
        return [*order, *merged[len(pool) + len(added):]], nodes, mine

    def filtered(self, tree: Tree, key: str, query: Vector, need: int,
                 filters: dict[str, FilterValue], scene: str
                 ) -> tuple[list[Candidate], dict[str, Node]]:
        """The ranking of the nodes that match ``filters``, exactly as an unfiltered read of
        a tree holding only them would rank them, with the matching nodes fetched.

        Both trees gather the best ``max(need, POOL)`` matching candidates (what that read
        scans). Environment tree: then ``core.ranking.same_scene``. Task tree:
        ``core.ranking.task_ranked`` over the matching candidates, widening while it asks to,
        then the template rule (``kind_first``, among the matching candidates: the template's
        own scan is not filtered, so it adds none) and the layout's ties first."""
        # Both trees rank the best POOL matching candidates, as an unfiltered read of those
        # nodes scans POOL: the environment tree keeps its layout's, the task tree learns its
        # query's slots from them (``kind_first``).
        want = k = max(need, POOL)
        metas: dict[str, dict[str, Any]] = {}
        nodes: dict[str, Node] = {}
        while True:
            found, vectors = self.scan_vectors(tree, query, k) if tree is Tree.TASK \
                else (self.scan(tree, query, k), {})
            unseen = [c.id for c in found if c.id not in metas]
            if unseen:
                metas.update(self.store.metas(self.space, unseen))
            kept = ranking.matching(found, metas, filters)
            exhausted = len(found) < k
            if len(kept) >= want or exhausted:
                if tree is Tree.ENV:
                    kept = kept[:want]
                    nodes = self.nodes_of(kept, nodes)
                    scene_kept = ranking.same_scene(kept, nodes, self.signature(key),
                                                    self.signature, limit=need,
                                                    **self._by_contents(key))
                    assert scene_kept is not None  # every node was fetched
                    return scene_kept, nodes
                nodes = self.nodes_of(kept, nodes)
                ranked = ranking.task_ranked(kept, nodes, need, self.settings.penalty,
                                             exhausted=exhausted)
                if ranked.candidates is not None:
                    order, nodes, _ = self.kind_first(key, query, ranked.candidates, nodes,
                                                      self.settings.threshold(tree),
                                                      widen=False, vectors=vectors)
                    return ranking.started_here(order, nodes, self.signature(scene)), nodes
            k *= 4

    def scan(self, tree: Tree, query: Vector, k: int) -> list[Candidate]:
        return self.store.scan(self.space, tree, query, penalty=self.settings.penalty, k=k,
                               approximate_from=self.settings.ann_from)

    def scan_vectors(self, tree: Tree, query: Vector, k: int
                     ) -> tuple[list[Candidate], dict[str, Vector]]:
        """:meth:`scan` with the returned nodes' vectors (``Store.scan_vectors``)."""
        return self.store.scan_vectors(self.space, tree, query, penalty=self.settings.penalty,
                                       k=k, approximate_from=self.settings.ann_from)

    def task_ranked(self, query: Vector, need: int, *, pool: bool = False
                    ) -> tuple[list[Candidate], dict[str, Node], list[Candidate] | None,
                               Scanned]:
        """Task-tree candidates best first, discredited skills scored as failures
        (``core.ranking.task_ranked``), with the nodes fetched for them, the first scan when
        it was of :data:`POOL` nodes, and the last scan's vectors: per round one scan and at
        most two batch fetches, the scan widened ×4 until the answer is exact.

        ``pool``: the template rule (:meth:`kind_first`) follows, and reads the nodes of the
        first :data:`POOL` candidates when the best score clears the threshold; then the first
        fetch reads them all in the same call, and those the ranking did not need come back
        as ``Scanned.spare`` (so the nodes enter ``nodes`` in the order they would have been
        fetched in)."""
        k = max(need, POOL)
        first: list[Candidate] | None = None
        threshold = self.settings.threshold(Tree.TASK)
        while True:
            found, vectors = self.scan_vectors(Tree.TASK, query, k)
            if k == POOL:
                first = found
            rule = partial(ranking.task_ranked, found, need=need, penalty=self.settings.penalty,
                           exhausted=len(found) < k)
            fetch = ranking.first_round(found, need)
            ahead: dict[str, Node] = {}
            if pool and found and accepts(found[0].score, threshold):
                ahead = self.store.get_nodes(self.space, [c.id for c in found[:POOL]])
            ranked, nodes = self.fetching(found, fetch, rule, spare=ahead)
            if ranked.candidates is not None:
                spare = {i: n for i, n in ahead.items() if i not in nodes}
                return ranked.candidates, nodes, first, Scanned(vectors, spare)
            k *= 4

    def same_scene(self, key: str, found: list[Candidate], limit: int | None = None, *,
                   have: dict[str, Node] | None = None
                   ) -> tuple[list[Candidate], dict[str, Node]]:
        """Environment candidates of ``key``'s layout, newest first among ties
        (``core.ranking.same_scene``), with the nodes fetched in one or two batch calls
        (``have``: nodes fetched already, not fetched again)."""
        layout = self.signature(key)
        first = len(found) if limit is None else ranking.first_round(found, limit)
        kept, nodes = self.fetching(found, first, partial(
            ranking.same_scene, found, layout=layout, signature=self.signature, limit=limit,
            **self._by_contents(key)), have)
        assert kept is not None  # every node was fetched by the second call
        return kept, nodes

    def _by_contents(self, key: str) -> dict[str, Any]:
        """``core.ranking.same_scene``'s arguments for matching ``key``'s scene by contents."""
        return {"contents": self.contents, "mine": self.contents(key),
                "overlap": self.scene_overlap, "threshold": self.settings.threshold(Tree.ENV)}

    def fetching(self, found: Sequence[Candidate], first: int,
                 rule: Callable[..., _R], have: dict[str, Node] | None = None, *,
                 spare: dict[str, Node] | None = None) -> tuple[_R, dict[str, Node]]:
        """Run a ranking ``rule(nodes, fetched=n)`` over ``found`` with the nodes of its first
        ``first`` candidates fetched in one call, then (if it asks for more) the rest in one
        more call; nodes in ``have`` are not fetched again, nor those in ``spare``."""
        nodes = self.nodes_of(found[:first], dict(have or {}), spare)
        answer = rule(nodes, fetched=first)
        if _asks_more(answer) and first < len(found):
            nodes = self.nodes_of(found[first:], nodes, spare)
            answer = rule(nodes, fetched=len(found))
        return answer, nodes

    def nodes_of(self, candidates: Sequence[Candidate], have: dict[str, Node],
                 spare: dict[str, Node] | None = None) -> dict[str, Node]:
        """``have`` completed with the nodes of ``candidates`` it lacks, in their order: from
        ``spare`` (nodes fetched ahead) where it holds them, the others in one call (or
        none)."""
        missing = [c.id for c in candidates if c.id not in have]
        if not missing:
            return have
        fetch = [i for i in missing if spare is None or i not in spare]
        fetched = self.store.get_nodes(self.space, fetch) if fetch else {}
        if not spare:
            return {**have, **fetched}
        out = dict(have)
        for i in missing:
            node = spare.get(i)
            if node is None:
                node = fetched.get(i)
            if node is not None:
                out[i] = node
        return out

    def same_trace(self, recall: TreeMatch, signature: str,
                   read: TreeRead | None = None) -> Node | None:
        """A node written by an identical trajectory, among the exact ties of the best match
        (in the task tree's ranking; in the environment tree's scan). ``read``: the read that
        produced ``recall``, whose ranking or scan saves scanning again."""
        if recall.query is None or recall.best is None:
            return None
        if recall.tree is Tree.TASK:
            if read is not None and read.ranked is not None:
                found, nodes = read.ranked, read.nodes
            else:
                found, nodes, _, _ = self.task_ranked(recall.query, 1)
        elif read is not None and read.scanned is not None:
            found, nodes = read.scanned, read.nodes
        else:
            found, nodes = self.scan(recall.tree, recall.query, POOL), {}
        ties = [c for c in ranking.best_ties(found) if c.score == recall.best.score]
        nodes = self.nodes_of(ties, nodes)
        for candidate in ties:
            node = nodes.get(candidate.id)
            if node is not None and node.meta.get("trace") == signature:
                return node
        return None

    def link(self, node: Node, query: Vector, vector: Vector | None) -> ChainLink:
        link = ranking.link(node, cosine(query, vector) if vector is not None else None,
                            self.settings.penalty)
        return ChainLink(node.id, node.kind.value, node.outcome.value, link.similarity,
                         link.score)


def _stored_slots(nodes: Iterable[Node], into: dict[str, tuple[str, ...]]
                  ) -> dict[str, tuple[str, ...]]:
    """``into`` with, for each key it lacks, the stored slots of the first of ``nodes`` keyed
    so that has any."""
    for node in nodes:
        if node.key not in into and (held := _slots(node)):
            into[node.key] = held
    return into


def _slots(node: Node) -> tuple[str, ...]:
    """The slot words a task node's key was stored with (``core.slots.slots_of``), if any."""
    found = node.meta.get("slots")
    return tuple(str(w) for w in found) if isinstance(found, list | tuple) else ()


def _asks_more(answer: object) -> bool:
    """Whether a ranking rule's answer asks for the nodes of more candidates."""
    return answer is None or (isinstance(answer, ranking.Ranked) and answer.fetch_more)
