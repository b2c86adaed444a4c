"""The :class:`DeltaMem` facade: wires a store, an embedder and an extractor to the pure core.

It owns transactions (one per learned episode, one per consolidation) and accounts for usage.
It computes nothing itself: scoring, placement, composition and rendering live in ``core``.
"""

from __future__ import annotations

import hashlib
import heapq
import re
import secrets
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from deltamem import jsonsafe, reports, transfer
from deltamem import scrub as scrubbing
from deltamem.config import Settings
from deltamem.core.knowledge import latest_first, layout_signature, same_layout_first
from deltamem.core.model import (
    Episode,
    Experience,
    Node,
    NodeKind,
    Outcome,
    Tree,
    experience_chars,
)
from deltamem.core.render import Style, estimate_tokens, render_context
from deltamem.core.scoring import penalised
from deltamem.core.tree import (
    Action,
    Placement,
    choose_placement,
    compose_chain,
    consolidation_meta,
    discredited,
    due_for_consolidation,
    growth_chain,
)
from deltamem.corrections import Correction
from deltamem.embed.base import Embedder
from deltamem.embed.cache import EmbeddingCache
from deltamem.episodes import check_episode, episode_to_dict
from deltamem.errors import (
    ConfigError,
    EpisodeError,
    NodeNotFound,
    PatchError,
    ProviderError,
    SpaceNotFound,
    StoreError,
)
from deltamem.extract import make_extractor
from deltamem.extract.base import Extraction, Extractor, ExtractRequest
from deltamem.redact import redact, redact_episode, redact_experience, redact_value
from deltamem.results import (
    BatchResult,
    ChainLink,
    Consolidation,
    LearnResult,
    OutcomeRecord,
    Recall,
    TreeRecall,
    TreeWrite,
    cosine,
    node_row,
)
from deltamem.store import open_store
from deltamem.store.base import Candidate, EpisodeRecord, Store, Vector
from deltamem.store.integrity import space_info, space_problems, vector_problem
from deltamem.telemetry import memory_span
from deltamem.threads import blas_threads
from deltamem.usage import Usage

TREES = (Tree.TASK, Tree.ENV)
# Space names appear in URLs, logs and file names: keep them to a safe alphabet.
SPACE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}")
# How many candidates a writer compares (see DeltaMem._placement), and how many exact ties
# the dedup-before-the-model check looks through.
POOL = 32


class DeltaMem:
    """An experience memory of two residual trees in one space of a store.

    Open one with :meth:`open`; use it as a context manager to close the store.

    Only writers create a space: with ``create=True`` a missing space is created by the first
    write (in that write's transaction), and reads before it see an empty memory; with
    ``create=False`` it must exist already (``SpaceNotFound`` otherwise), so that a reader's typo
    never creates anything.
    """

    def __init__(self, store: Store, embedder: Embedder, extractor: Extractor, *,
                 space: str = "default", settings: Settings | None = None, create: bool = True):
        self.store = store
        self.embedder = embedder
        self.extractor = extractor
        self.space = space
        self.settings = settings or Settings.from_env()
        self.embed_cache = EmbeddingCache(self.settings.embed_cache)
        self._batch: ContextVar[bool] = ContextVar(f"deltamem-batch-{id(self)}", default=False)
        self._exists = space_info(store, space) is not None
        if self._exists:
            store.ensure_space(space, embedder.name, embedder.dim)  # checks the embedder
        elif not create:
            raise self._not_found()

    @property
    def exists(self) -> bool:
        """Whether the space exists in the store yet (a new one appears with its first write)."""
        if not self._exists:
            self._exists = space_info(self.store, self.space) is not None
        return self._exists

    def _not_found(self) -> SpaceNotFound:
        return SpaceNotFound(f"no space {self.space!r} in {self.store.url}; learn or import into "
                             "it first (writers create spaces)")

    @classmethod
    def open(
        cls,
        db: str | Path = "deltamem.db",
        *,
        space: str = "default",
        embedder: str | Embedder | None = None,
        extractor: str | Extractor = "trace",
        llm: Any = None,
        settings: Settings | None = None,
        create: bool = True,
    ) -> DeltaMem:
        """Open the memory at ``db``, creating the database and the space unless ``create=False``.

        Args:
            db: a SQLite file path, ``sqlite:PATH``, ``:memory:`` or ``postgresql://...``.
            space: namespace inside the store; spaces never see each other's nodes.
            embedder: an :class:`Embedder` or a spec such as ``"minilm"`` (the default).
            extractor: ``"trace"`` (no model), ``"llm"`` (needs ``llm``) or an Extractor.
            llm: an LLM object or spec (``"local"``, ``"openai"``) for the ``llm`` extractor.
            settings: thresholds and constants; defaults come from ``Settings.from_env()``.
            create: create a missing database or space; with False, they must exist.

        Raises:
            SpaceNotFound: ``create=False`` and the database or the space does not exist.
        """
        from deltamem.embed import make_embedder  # resolved here: specs may name optional extras

        settings = settings or Settings.from_env()
        if not isinstance(embedder, Embedder):
            embedder = make_embedder(embedder or settings.embedder)
        if isinstance(extractor, str):
            extractor = make_extractor(extractor, llm=llm)
        store = open_store(str(db), create=create)
        try:
            return cls(store, embedder, extractor, space=space, settings=settings, create=create)
        except BaseException:
            store.close()
            raise

    def __enter__(self) -> DeltaMem:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.store.close()

    # -- read path ------------------------------------------------------------------------
    @memory_span("search_memory", lambda r: {
        "deltamem.task.matched": r.task.matched, "deltamem.env.matched": r.env.matched,
        "deltamem.task.node": r.task.chain[-1].id if r.task.matched else "",
        "deltamem.env.node": r.env.chain[-1].id if r.env.matched else ""})
    def recall(self, task: str = "", env: str = "", *, top_k: int | None = None,
               budget_tokens: int | None = None) -> Recall:
        """Recall the skill chain for ``task`` and the knowledge chain for ``env``.

        Per tree: score every node ``cos - penalty*[failure]``, take the best (in the environment
        tree: the best whose scene has the same layout, see ``core.knowledge``), accept it when it
        clears the tree's threshold, and compose its chain root -> match. ``budget_tokens`` caps
        the prompt context (see ``core.render.render_context`` for what is kept first and
        ``core.render.estimate_tokens`` for how tokens are counted).
        """
        if budget_tokens is not None and budget_tokens < 0:
            raise ConfigError(f"budget_tokens must be >= 0, got {budget_tokens}")
        started = time.perf_counter()
        usage = Usage()
        for name, text in (("task", task), ("env", env)):
            problem = jsonsafe.text_problem(text)
            if problem:
                raise EpisodeError(f"field '{name}' {problem}", field=name)
        q_task, q_env = self._embed([task, env], usage)
        with self._intact():
            recalls = {
                tree: self._recall_tree(tree, key, q, top_k or self.settings.top_k, scene=env)
                for tree, key, q in ((Tree.TASK, task, q_task), (Tree.ENV, env, q_env))
            }
        context = render_context(recalls[Tree.TASK].chain, recalls[Tree.ENV].chain,
                                 Style(self.settings.style), budget_tokens=budget_tokens,
                                 query=f"{task}\n{env}")
        usage.wall_ms = (time.perf_counter() - started) * 1000
        return Recall(recalls[Tree.TASK], recalls[Tree.ENV], context, usage,
                      context_tokens=estimate_tokens(context))

    def _embed(self, texts: list[str], usage: Usage) -> list[Vector]:
        """One embedder call for the texts not in the cache (``usage`` counts only those)."""
        with blas_threads(self.settings.embed_threads):
            vectors, computed = self.embed_cache.embed(self.embedder, texts)
        if computed:
            usage.embed_calls += 1
            usage.embed_texts += computed
        out = [vectors[i] for i in range(len(texts))]
        for text, vector in zip(texts, out, strict=True):
            problem = vector_problem(vector, self.embedder.dim)
            if problem:
                raise ProviderError(f"embedder {self.embedder.name!r} returned a bad vector for "
                                    f"{text[:60]!r}: {problem}")
        return out

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """A write block on this space, or nothing inside :meth:`learn_many`'s own block."""
        if self._batch.get():
            yield
            return
        with self.store.write(self.space):
            if not self._exists:
                self.store.ensure_space(self.space, self.embedder.name, self.embedder.dim)
            yield
        self._exists = True

    @contextmanager
    def _intact(self) -> Iterator[None]:
        """Turn a stored chain that does not compose into a StoreError naming the space."""
        try:
            yield
        except PatchError as exc:
            raise StoreError(f"space {self.space!r} holds a chain that does not compose ({exc}); "
                             "run `deltamem check`") from exc

    def _recall_tree(self, tree: Tree, key: str, query: Vector, k: int, *,
                     scene: str = "") -> TreeRecall:
        threshold = self.settings.threshold(tree.value)
        result = TreeRecall(tree, key, threshold, self.settings.penalty, query=query)
        if not key.strip():
            return result
        if tree is Tree.ENV:
            found = self._scan(tree, query, max(k, POOL))
            ranked = self._same_scene(tree, key, found, limit=max(k, 1))
        else:
            ranked = self._started_here(self._task_ranked(query, max(k, 1)),
                                        layout_signature(scene))
        result.candidates = ranked[: max(k, 1)]
        result.best = result.candidates[0] if result.candidates else None
        if result.best is None or result.best.score < threshold:
            return result
        result.chain = self.store.chain(self.space, result.best.id)
        if not result.chain:  # deleted by another writer since the scan: nothing matched
            result.best = None
            return result
        result.experience = compose_chain(result.chain)
        vectors = self.store.vectors(self.space, [n.id for n in result.chain])
        result.links = [self._link(node, query, vectors.get(node.id)) for node in result.chain]
        return result

    def _scan(self, tree: Tree, query: Vector, k: int) -> list[Candidate]:
        return self.store.scan(self.space, tree, query, penalty=self.settings.penalty, k=k,
                               approximate_from=self.settings.ann_from)

    def _task_ranked(self, query: Vector, need: int) -> list[Candidate]:
        """Task-tree candidates best first, with discredited skills scored as failures.

        A success whose record is mostly failures (``core.tree.discredited``) is re-scored
        ``cos - penalty`` and the candidates re-sorted (score, then shallower, then newer).
        Without one among the best, this is the scan itself. Re-scoring only lowers scores, so
        the first ``need`` re-scored candidates (and the ties of the last) are exact once a
        scanned score falls below theirs; until then the scan is widened.
        """
        k = max(need, POOL)
        while True:
            found = self._scan(Tree.TASK, query, k)
            kept, complete = self._rescored(found, need)
            if not any(c.discredited for c, _ in kept):
                return found
            if complete or len(found) < k:
                break
            k *= 4
        kept.sort(key=lambda pair: (-pair[0].score, pair[0].depth, -pair[1]))
        return [c for c, _ in kept]

    def _rescored(self, found: list[Candidate],
                  need: int) -> tuple[list[tuple[Candidate, float]], bool]:
        """``found`` in scan order, discredited ones re-scored, each with its creation time, up
        to the first candidate that cannot reach the best ``need`` (then ``True``: complete)."""
        kept: list[tuple[Candidate, float]] = []
        best: list[float] = []  # min-heap of the best ``need`` kept scores; best[0] is the bar
        for candidate in found:
            if len(best) >= need and candidate.score < best[0]:
                return kept, True  # it and every later candidate score below the kept ones
            node = self.store.get_node(self.space, candidate.id)
            if node is None:  # deleted by another writer since the scan
                continue
            if discredited(node):
                candidate = replace(candidate, failure=True, discredited=True,
                                    score=penalised(candidate.similarity, self.settings.penalty))
            kept.append((candidate, node.created_at))
            if len(best) < need:
                heapq.heappush(best, candidate.score)
            else:
                heapq.heappushpop(best, candidate.score)
        return kept, False

    def _started_here(self, found: list[Candidate], layout: str) -> list[Candidate]:
        """Task-tree candidates with the best score's exact ties learned in a scene of
        ``layout`` first (``core.knowledge.same_layout_first``): variations of a task often share
        one task text, and the skill that started where the agent stands has the right route."""
        if not layout or len(found) < 2 or found[1].score != found[0].score:
            return found
        layouts = {}
        for candidate in found:
            if candidate.score != found[0].score:
                break
            node = self.store.get_node(self.space, candidate.id)
            layouts[candidate.id] = str(node.meta.get("layout", "")) if node else ""
        return same_layout_first(found, layouts, layout)

    def _same_scene(self, tree: Tree, key: str, found: list[Candidate],
                    limit: int | None = None) -> list[Candidate]:
        """``found`` for the environment tree: only nodes learned in a scene of the same layout,
        and among exact ties the newest first (``core.knowledge.latest_first``).

        Nodes of one scene text share a vector and tie exactly; the newest of them holds the
        latest word about the scene (its chain has every later fact superseding the older ones),
        so recall shows it and learning extends it. A consolidated root still wins over the node
        it was compiled from (it is newer).

        With ``limit``, only the first ``limit`` are needed: candidates are fetched in order until
        ``limit`` are kept and the run of ties of the last one is complete (``latest_first`` only
        reorders within such runs), instead of fetching every candidate."""
        if tree is Tree.TASK:
            return found
        layout = layout_signature(key)
        kept: list[Candidate] = []
        created: dict[str, float] = {}
        for candidate in found:
            if limit is not None and len(kept) >= limit and candidate.score != kept[-1].score:
                break
            node = self.store.get_node(self.space, candidate.id)
            if node is not None and layout_signature(node.key) == layout:
                kept.append(candidate)
                created[candidate.id] = node.created_at
        return latest_first(kept, created)

    def _link(self, node: Node, query: Vector, vector: Vector | None) -> ChainLink:
        sim = cosine(query, vector) if vector is not None else 0.0
        failure = node.outcome is Outcome.FAILURE or (node.tree is Tree.TASK and discredited(node))
        penalty = self.settings.penalty if failure else 0.0
        return ChainLink(node.id, node.kind.value, node.outcome.value, sim, sim - penalty)

    # -- write path -----------------------------------------------------------------------
    @memory_span("upsert_memory", lambda r: {
        "gen_ai.memory.record.id": r.episode_id, "deltamem.task.action": r.task.action.value,
        "deltamem.env.action": r.env.action.value, "deltamem.consolidated": len(r.consolidated)})
    def learn(self, episode: Episode, recall: Recall | None = None) -> LearnResult:
        """Learn one finished episode; atomic (all of it is stored, or none of it).

        ``recall`` is the recall the agent made before the episode; passing it saves embedding
        the keys again, shows the extractor the chains the agent saw, and counts the episode's
        outcome on the nodes it handed the agent (``LearnResult.recalled``): a skill followed
        in more failed episodes than successful ones is then scored like a failure
        (``core.tree.discredited``). Without it, learning recalls afresh and counts the outcome
        only on the nodes the episode is placed on. Placement itself is
        decided inside the write transaction, against the memory as it is then, so concurrent
        writers never place against a stale tree.
        """
        started = time.perf_counter()
        usage = Usage()
        check_episode(episode)
        episode = self._redacted(episode)
        with self._intact():
            return self._learn(episode, recall, usage, started)

    def learn_many(self, episodes: Sequence[Episode]) -> BatchResult:
        """Learn episodes in order, all in one transaction: every one is stored, or none is.

        Each episode sees the ones before it, exactly as with one :meth:`learn` per episode. The
        space's write lock is held for the whole batch (model calls included), so keep LLM
        batches small.

        Raises:
            EpisodeError: an episode cannot be stored (checked for all before any is learned).
        """
        for i, episode in enumerate(episodes):
            check_episode(episode, where=f"episodes[{i}]")
        episodes = [self._redacted(episode) for episode in episodes]
        batch = BatchResult([])
        with self._intact(), self._writing():
            token = self._batch.set(True)
            try:
                for episode in episodes:
                    result = self._learn(episode, None, Usage(), time.perf_counter())
                    batch.usage.add(result.usage)
                    batch.results.append(result)
            finally:
                self._batch.reset(token)
        return batch

    def _learn(self, episode: Episode, recall: Recall | None, usage: Usage,
               started: float) -> LearnResult:
        shown = recall is not None and (recall.task.key, recall.env.key) == (episode.task,
                                                                           episode.env)
        if recall is None or not shown:
            recall = self.recall(episode.task, episode.env)
            usage.add(recall.usage)  # a recall the caller made was already reported to it
        extractions = {
            tree: self._extract(episode, tree_recall, usage)
            for tree, tree_recall in ((Tree.TASK, recall.task), (Tree.ENV, recall.env))
        }
        episode_id = "ep-" + secrets.token_hex(8)
        queries = {Tree.TASK: recall.task.query, Tree.ENV: recall.env.query}
        keys = {Tree.TASK: episode.task, Tree.ENV: episode.env}
        with self._writing():
            writes = {
                tree: self._write_tree(tree, keys[tree], queries[tree], extractions[tree],
                                       episode, episode_id)
                for tree in TREES
            }
            recalled = self._count_recalled(recall, writes, episode.success) if shown else []
            self.store.add_episode(self.space, EpisodeRecord(
                id=episode_id, task=episode.task, env=episode.env, success=episode.success,
                score=episode.score, steps=episode_to_dict(episode)["steps"], meta=episode.meta,
                result={t.value: w.to_dict() for t, w in writes.items()},
                flat_chars=sum(experience_chars(x.flat) for x in extractions.values()),
                created_at=time.time(),
            ))
        result = LearnResult(episode_id, writes[Tree.TASK], writes[Tree.ENV], usage=usage,
                             recalled=recalled)
        if self.settings.auto_consolidate:
            matched = [w.matched for w in writes.values() if w.matched is not None]
            for node_id in matched + (recalled if episode.success else []):
                result.consolidated += self._consolidate_if_due(node_id, usage)
        usage.wall_ms = (time.perf_counter() - started) * 1000
        return result

    def _count_recalled(self, recall: Recall, writes: dict[Tree, TreeWrite],
                        success: bool) -> list[str]:
        """Count the episode's outcome on the nodes the agent was handed (the match of each tree)
        unless the episode was placed on that same node (``_write_tree`` counted it there), so
        that a skill followed in failed episodes carries them in its record. Returns the ids."""
        counted = []
        for tree, tree_recall in ((Tree.TASK, recall.task), (Tree.ENV, recall.env)):
            node = tree_recall.node
            if node is None or node.id == writes[tree].matched:
                continue
            if self.store.get_node(self.space, node.id) is None:  # deleted since the recall
                continue
            self.store.bump(self.space, node.id, hits=1, successes=int(success),
                            failures=int(not success))
            counted.append(node.id)
        return counted

    def _extract(self, episode: Episode, recall: TreeRecall, usage: Usage) -> Extraction:
        if self.extractor.uses_llm and recall.matched:
            twin = self._same_trace(recall, trace_signature(episode, recall.tree))
            if twin is not None:
                # The same trajectory already produced this node: asking the model again would
                # at best reproduce it. Reuse its experience (an exact dedup) and save the call.
                usage.llm_calls_saved += 1
                return Extraction(self.experience(twin.id),
                                  note="trace already stored; model call skipped")
        base = growth_chain(recall.chain, max_depth=self.settings.max_depth)
        chain = tuple(compose_chain(base[: i + 1]) for i in range(len(base)))
        extraction = self.extractor.extract(
            ExtractRequest(episode, recall.tree, chain[-1] if chain else None, chain)
        )
        usage.add(extraction.usage)
        return extraction

    def _same_trace(self, recall: TreeRecall, signature: str) -> Node | None:
        """A node written by an identical trajectory, among the exact ties of the best match."""
        if recall.query is None or recall.best is None:
            return None
        found = self._task_ranked(recall.query, 1) if recall.tree is Tree.TASK else \
            self._scan(recall.tree, recall.query, POOL)
        for candidate in found:
            if candidate.score != recall.best.score:
                break
            node = self.store.get_node(self.space, candidate.id)
            if node is not None and node.meta.get("trace") == signature:
                return node
        return None

    def _write_tree(self, tree: Tree, key: str, query: Vector | None, extraction: Extraction,
                    episode: Episode, episode_id: str) -> TreeWrite:
        outcome = episode.outcome if tree is Tree.TASK else Outcome.SUCCESS
        chain, placement = self._placement(tree, key, query, extraction.experience)
        hit = None
        if placement.action is not Action.ROOT:
            # The node the episode was placed on: the one it duplicates, or the end of the chain
            # it extends (the matched node, also when the delta went in as its sibling).
            hit = placement.anchor if placement.action is Action.DEDUP else chain[-1].id
            assert hit is not None
            self.store.bump(self.space, hit, hits=1, successes=int(episode.success),
                            failures=int(not episode.success))
        if placement.action is Action.DEDUP:
            return TreeWrite(Action.DEDUP, placement.anchor, None, note=extraction.note,
                             experience=extraction.experience, matched=hit)
        node = self._new_node(tree, key, outcome, placement, extraction.experience, episode,
                              episode_id)
        self.store.add_node(self.space, node, query if query is not None else self._zero())
        return TreeWrite(placement.action, node.id, node.parent_id, len(placement.patch),
                         extraction.note, extraction.experience, matched=hit)

    def _placement(self, tree: Tree, key: str, query: Vector | None,
                   experience: Experience) -> tuple[list[Node], Placement]:
        """Fetch the candidate chains and let ``core.tree.choose_placement`` decide.

        Candidates are the best :data:`POOL` nodes that clear the tree's threshold (in the
        environment tree, only scenes of the same layout), best first.
        """
        if self.settings.flat or not key.strip() or query is None:
            return [], Placement(Action.ROOT)
        threshold = self.settings.threshold(tree.value)
        found = self._scan(tree, query, POOL)
        chains = [self.store.chain(self.space, c.id)
                  for c in self._same_scene(tree, key, found) if c.score >= threshold]
        placement, index = choose_placement(experience, chains, max_depth=self.settings.max_depth)
        return (chains[index] if index is not None else []), placement

    def _new_node(self, tree: Tree, key: str, outcome: Outcome, placement: Placement,
                  experience: Experience, episode: Episode, episode_id: str) -> Node:
        is_root = placement.action is Action.ROOT
        return Node(
            id=new_node_id(tree), tree=tree,
            kind=NodeKind.ROOT if is_root else NodeKind.DELTA, outcome=outcome, key=key,
            parent_id=placement.anchor, depth=placement.depth,
            content=experience if is_root else None,
            patch=None if is_root else placement.patch,
            episode_id=episode_id, created_at=time.time(),
            meta={"trace": trace_signature(episode, tree), **_layout_meta(tree, episode.env),
                  **_user_meta(episode)},
        )

    def _zero(self) -> Vector:
        return np.zeros(self.embedder.dim, dtype=np.float32)

    # -- consolidation --------------------------------------------------------------------
    def due(self) -> list[Node]:
        """The nodes whose chains are due for consolidation, oldest first; writes nothing."""
        return [node for node in self.store.nodes(self.space)
                if due_for_consolidation(node, self.settings.k_cons)]

    def consolidate(self, *, dry_run: bool = False) -> list[Consolidation]:
        """Compile every chain that is due (see ``core.tree.due_for_consolidation``).

        With ``dry_run`` nothing is written: the result lists the chains that are due, each with
        ``root=None``.
        """
        if dry_run:
            return [Consolidation(n.id, None, n.tree,
                                  tuple(c.id for c in self.store.chain(self.space, n.id)),
                                  "due (dry run: nothing compiled)")
                    for n in self.due()]
        usage = Usage()
        done: list[Consolidation] = []
        with self._intact():
            for node in self.due():
                done += self._consolidate_if_due(node.id, usage)
        return done

    def record_outcome(self, nodes: Recall | Sequence[str], success: bool) -> OutcomeRecord:
        """Count a success or a failure on recalled nodes, without learning a new episode.

        ``nodes`` is a :class:`Recall` (its matched node in each tree) or node ids. Use it when
        the agent followed a recalled memory but has no trajectory to hand over, or learns
        without passing the recall (over REST or MCP). :meth:`learn` given the recall already
        counts the outcome on the recalled nodes, so do not call both for one episode.
        A success can make a chain due for consolidation, which then runs as after ``learn``.

        Raises:
            NodeNotFound: an id is not in this space (nothing is counted).
        """
        if isinstance(nodes, Recall):
            ids = [t.node.id for t in (nodes.task, nodes.env) if t.node is not None]
        else:
            ids = list(dict.fromkeys(nodes))
        with self._writing():
            for node_id in ids:
                self.get(node_id)
            for node_id in ids:
                self.store.bump(self.space, node_id, hits=1, successes=int(success),
                                failures=int(not success))
        record = OutcomeRecord(ids, success)
        if success and self.settings.auto_consolidate:
            usage = Usage()
            for node_id in ids:
                record.consolidated += self._consolidate_if_due(node_id, usage)
        return record

    def _consolidate_if_due(self, node_id: str, usage: Usage) -> list[Consolidation]:
        node = self.store.get_node(self.space, node_id)
        if node is None or not due_for_consolidation(node, self.settings.k_cons):
            return []
        chain = self.store.chain(self.space, node.id)
        compiled = self.extractor.compile(node.tree, compose_chain(chain))
        usage.add(compiled.usage)
        vector = self.store.vector(self.space, node.id)
        assert vector is not None
        root = _new_root(node.tree, node.key, compiled.experience,
                         {**consolidation_meta(chain), "note": compiled.note},
                         lineage=tuple(n.id for n in chain))
        with self._writing():
            fresh = self.store.get_node(self.space, node.id)
            if fresh is None or fresh.consolidated:  # another writer got there first
                return []
            self.store.add_node(self.space, root, vector)
            self.store.mark_consolidated(self.space, node.id)
        return [Consolidation(node.id, root.id, node.tree, root.lineage, compiled.note)]

    def add_roots(self, roots: Sequence[tuple[Tree, str, Experience, dict[str, Any]]]
                  ) -> list[str | None]:
        """Store ready-made experiences as roots, all in one transaction (all or nothing).

        Each item is ``(tree, key, experience, meta)``: a skill for the task tree or scene
        knowledge for the environment tree, recalled by ``key`` (which is embedded). A root
        identical to one already stored, or to an earlier item (same tree, key and
        experience), is skipped, so adding the same roots again changes nothing.

        Returns:
            Per item, the new node's id, or None where it was skipped.
        """
        if not roots:
            return []
        if self.settings.redact:
            roots = [(tree, redact(key), redact_experience(experience), redact_value(dict(meta)))
                     for tree, key, experience, meta in roots]
        vectors = self._embed([key for _, key, _, _ in roots], Usage())
        ids: list[str | None] = []
        with self._writing():
            stored = {(n.tree, n.key, n.content) for n in self.store.nodes(self.space)
                      if n.is_root}
            for (tree, key, experience, meta), vector in zip(roots, vectors, strict=True):
                if (tree, key, experience) in stored:
                    ids.append(None)
                    continue
                stored.add((tree, key, experience))
                node = _new_root(tree, key, experience, meta)
                self.store.add_node(self.space, node, vector)
                ids.append(node.id)
        return ids

    # -- inspection -----------------------------------------------------------------------
    def get(self, node_id: str) -> Node:
        node = self.store.get_node(self.space, node_id)
        if node is None:
            raise NodeNotFound(node_id, self.space)
        return node

    def chain(self, node_id: str) -> list[Node]:
        chain = self.store.chain(self.space, node_id)
        if not chain:
            raise NodeNotFound(node_id, self.space)
        return chain

    def experience(self, node_id: str) -> Experience:
        """The full composed experience of a node."""
        with self._intact():
            return compose_chain(self.chain(node_id))

    def nodes(self, tree: Tree | None = None) -> Iterator[Node]:
        return self.store.nodes(self.space, tree)

    def list_nodes(self, tree: Tree | None = None, *, kind: NodeKind | None = None,
                   outcome: Outcome | None = None, contains: str = "") -> list[dict[str, Any]]:
        """One row per node (id, tree, kind, outcome, key, parent, counters), filtered.

        ``contains`` keeps nodes whose key contains it (case-insensitive).
        """
        needle = contains.lower()
        return [node_row(n) for n in self.store.nodes(self.space, tree)
                if (kind is None or n.kind is kind) and (outcome is None or n.outcome is outcome)
                and needle in n.key.lower()]

    def delete(self, node_id: str) -> list[str]:
        """Delete a node and its whole subtree in one transaction; return the deleted ids."""
        self.get(node_id)
        with self._writing():
            return self.store.delete_subtree(self.space, node_id)

    def forget(self) -> int:
        """Delete everything in this space; return the number of nodes removed."""
        with self._writing():
            return self.store.forget_space(self.space)

    def stats(self) -> dict[str, Any]:
        """Tree shapes, episodes, and stored vs flat characters (see ``reports.stats``)."""
        return reports.stats(self.store, self.space)

    def show(self, node_id: str) -> dict[str, Any]:
        """A node's chain, composed experience, patch and counters."""
        with self._intact():
            shown = reports.show(self.store, self.space, node_id)
        if shown is None:
            raise NodeNotFound(node_id, self.space)
        return shown

    def check(self) -> list[str]:
        """Integrity problems of both trees and their vectors (empty list when sound).

        Finds missing or foreign parents, wrong depths and cycles, roots without content, chains
        that do not compose, and vectors that are not finite, of unit norm and the space's width.
        """
        return space_problems(self.store, self.space, max_depth=self.settings.max_depth)

    def iter_export(self) -> Iterator[str]:
        """This space as JSON Lines, one line per record (header, nodes, episodes)."""
        return transfer.export_lines(self.store, self.space)

    def export(self, path: str | Path) -> int:
        """Write this space as JSON Lines to ``path``; return the number of records."""
        lines = self.iter_export()
        first = next(lines)  # a missing space fails before the file is touched
        count = 1
        with Path(path).open("w", encoding="utf-8") as handle:
            handle.write(first)
            for line in lines:
                handle.write(line)
                count += 1
        return count

    def import_records(self, records: Iterable[dict[str, Any]]) -> dict[str, int]:
        """Verify exported records as a whole and load them in one transaction (all or nothing).

        Raises:
            StoreError: naming the first bad record; nothing was written.
        """
        if self.settings.redact:
            records = scrubbing.redact_records(records, self._stored_experience)
        counts = transfer.import_records(self.store, self.space, records,
                                         max_depth=self.settings.max_depth)
        self._exists = True
        return counts

    def import_lines(self, lines: Iterable[str | bytes], source: str = "line") -> dict[str, int]:
        """Load an export's JSON Lines (see :meth:`import_records`); a line that is not a JSON
        object is a StoreError naming ``source`` and the line number, and nothing is written."""
        return self.import_records(transfer.parse_lines(lines, source))

    def import_(self, path: str | Path) -> dict[str, int]:
        """Load an export file into this space (see :meth:`import_lines`).

        Raises:
            StoreError: a line is not a JSON object (named by file and line), or a record is
                malformed or would damage the trees; nothing was written.
            OSError: the file cannot be opened.
        """
        with Path(path).open(encoding="utf-8") as handle:
            return self.import_lines(handle, str(path))

    # -- privacy ---------------------------------------------------------------------------
    def _redacted(self, episode: Episode) -> Episode:
        """The one choke point of the write path: every text of an episode is redacted
        (``deltamem.redact``) before anything of it is stored or shown to a model."""
        return redact_episode(episode) if self.settings.redact else episode

    def _stored_experience(self, node_id: str) -> Experience | None:
        try:
            return self.experience(node_id)
        except (NodeNotFound, StoreError):
            return None

    def scrub(self, *, every_space: bool = False) -> dict[str, int]:
        """Redact every stored node and episode in place (``deltamem.redact``'s rules), then
        compact a SQLite file (``VACUUM`` and a truncated WAL) so that no old byte remains.

        Each space is rewritten in one write transaction: ids, counters and tree shape are
        kept, chains compose as before, minus secrets. ``every_space`` scrubs every space of
        the store, not only this one. Returns the number of nodes and episodes that changed.
        """
        names = [info.space for info in self.store.spaces()] if every_space else [self.space]
        total = {"nodes": 0, "episodes": 0, "spaces": 0}
        with self._intact():
            for name in names:
                info = space_info(self.store, name)
                if info is None:
                    continue
                same = (info.embedder, info.dim) == (self.embedder.name, self.embedder.dim)
                counts = scrubbing.scrub_space(  # another embedder's space keeps its vectors
                    self.store, name, (lambda texts: self._embed(texts, Usage())) if same else None)
                total["nodes"] += counts["nodes"]
                total["episodes"] += counts["episodes"]
                total["spaces"] += 1
        self.embed_cache = EmbeddingCache(self.settings.embed_cache)
        path = getattr(self.store, "path", None)
        if isinstance(path, str) and path != ":memory:" and self.store.url.startswith("sqlite:"):
            scrubbing.compact(path)
        return total

    def correct(self, node_id: str, *, success: bool | None = None,
                steps: Sequence[str] | None = None, wrong: bool = False,
                reason: str = "") -> Correction:
        """Correct a node from inside the agent; exactly one of: ``success`` (the outcome set
        right), ``steps`` (a skill's steps edited) or ``wrong`` (the experience retracted).

        The correction is a new root that supersedes the node in recall, with the corrected
        chain as its lineage and the delta in its meta; nothing is overwritten (see
        ``deltamem.corrections``). To delete a node outright, use :meth:`delete`.

        Raises:
            NodeNotFound: no such node in this space.
            EpisodeError: not exactly one correction, or one the node's tree cannot take.
        """
        from deltamem.corrections import correct

        with self._intact():
            return correct(self, node_id, success=success, steps=steps, wrong=wrong,
                           reason=reason)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """A write block on this space, for callers composing several store operations."""
        with self._writing():
            yield


def check_space(space: str) -> str:
    """Return ``space`` if it is a valid name (the whole string), else raise ConfigError."""
    if not isinstance(space, str) or not SPACE_NAME.fullmatch(space):
        raise ConfigError(
            f"invalid space name {space!r}: use 1-64 letters, digits, '_', '.' or '-', "
            "starting with a letter or digit"
        )
    return space


def new_node_id(tree: Tree) -> str:
    return ("t-" if tree is Tree.TASK else "e-") + secrets.token_hex(8)


def _new_root(tree: Tree, key: str, content: Experience, meta: dict[str, Any], *,
              lineage: tuple[str, ...] = ()) -> Node:
    return Node(id=new_node_id(tree), tree=tree, kind=NodeKind.ROOT, outcome=Outcome.SUCCESS,
                key=key, content=content, lineage=lineage, created_at=time.time(), meta=meta)


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


def _layout_meta(tree: Tree, env: str) -> dict[str, Any]:
    """A skill remembers the layout of the scene it was learned in (see ``_started_here``)."""
    layout = layout_signature(env) if tree is Tree.TASK else ""
    return {"layout": layout} if layout else {}


def _user_meta(episode: Episode) -> dict[str, Any]:
    return {"episode_meta": episode.meta} if episode.meta else {}
