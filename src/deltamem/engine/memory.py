"""The :class:`DeltaMem` facade: wires a store, an embedder and an extractor to the engine.

It validates input, embeds, owns the write blocks (one per learned episode, one per
consolidation) and accounts for usage. The work is done by its collaborators in
``deltamem.engine`` -- :class:`~deltamem.engine.read.Reader` (ranking, chains),
:class:`~deltamem.engine.write.Writer` (extraction, placement, writes) and
:class:`~deltamem.engine.consolidate.Consolidator` -- over the rules of ``core``.
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from deltamem._util import jsonsafe
from deltamem._util.lazymod import module
from deltamem._util.telemetry import memory_span
from deltamem._util.threads import blas_threads
from deltamem._util.usage import Usage
from deltamem.config import Settings
from deltamem.core.model import (
    Episode,
    Experience,
    Node,
    NodeKind,
    Outcome,
    Tree,
    experience_chars,
)
from deltamem.core.ranking import FilterValue, check_filters, matches, scope_of
from deltamem.core.render import estimate_tokens, render_context
from deltamem.core.tree import Placer, compose_chain, forest_problems
from deltamem.embed.base import Embedder
from deltamem.embed.cache import EmbeddingCache
from deltamem.engine import reports
from deltamem.engine.consolidate import Consolidator, new_node_id, new_root
from deltamem.engine.read import Reader, TreeRead
from deltamem.engine.working import Learning
from deltamem.engine.write import Writer
from deltamem.errors import (
    ConfigError,
    EpisodeError,
    InvalidExport,
    NodeNotFound,
    PatchError,
    ProviderError,
    SpaceNotFound,
    StoreError,
)
from deltamem.extract import make_extractor
from deltamem.extract.base import Extractor
from deltamem.privacy.redact import redact_episode, redact_value
from deltamem.scenes import Scene, make_scene
from deltamem.scenes.base import contents_of
from deltamem.store import open_store, transfer
from deltamem.store import scrub as scrubbing
from deltamem.store.base import EpisodeRecord, Store, Vector
from deltamem.store.integrity import (
    sound_rows,
    space_info,
    space_problems,
    vector_problem,
)

# The answer models (pydantic) load when an operation first builds one: a recall's read needs
# none of them (``engine.working``), and the hook daemon's start, which the first prompt of a
# session waits for, then imports no pydantic (``_util.lazymod``).
if TYPE_CHECKING:
    from deltamem.engine import corrections, results
    from deltamem.formats import api
    from deltamem.formats import episodes as episode_json
else:
    api = module("deltamem.formats.api")
    corrections = module("deltamem.engine.corrections")
    episode_json = module("deltamem.formats.episodes")
    results = module("deltamem.engine.results")

__all__ = ["TREES", "DeltaMem", "check_space", "new_node_id"]

TREES = (Tree.TASK, Tree.ENV)
E = TypeVar("E", bound=Enum)
# Space names appear in URLs, logs and file names: keep them to a safe alphabet.
SPACE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}")


class DeltaMem:
    """An experience memory of two residual trees in one space of a store.

    Open one with :meth:`open`; use it as a context manager to close the store.

    Only writers create a space: with ``create=True`` a missing space is created by the first
    write (in that write's transaction), and reads before it see an empty memory; with
    ``create=False`` it must exist already (``SpaceNotFound`` otherwise), so that a reader's typo
    never creates anything.

    ``scene`` is the scene plug-in (``deltamem.scenes``: a name or a ``Scene``) that gives scenes
    their identity; when it is not given, the extractor's own scene is used if it has one, else
    ``settings.scene`` (``"text-games"`` by default).

    ``placer`` is the placement rule writes follow (``core.tree.choose_placement``); an
    experiment may swap it, e.g. the benchmark's flat ablation stores every episode as a root.
    """

    def __init__(self, store: Store, embedder: Embedder, extractor: Extractor, *,
                 space: str = "default", settings: Settings | None = None, create: bool = True,
                 scene: str | Scene | None = None):
        self.store = store
        self.embedder = embedder
        self._extractor = extractor
        self.space = space
        self.settings = settings or Settings.from_env()
        # The scene plug-in (``deltamem.scenes``): given, else the extractor's, else the settings'.
        self.scene: Scene = make_scene(scene if scene is not None else
                                       getattr(extractor, "scene", None) or self.settings.scene)
        self.embed_cache = EmbeddingCache(self.settings.embed_cache)
        self._batch: ContextVar[bool] = ContextVar(f"deltamem-batch-{id(self)}", default=False)
        # The scene's signature and contents of a text: where the scene is handed to ranking.
        self.reader = Reader(store, space, self.settings, self.scene.signature,
                             contents_of(self.scene),
                             embed=lambda texts: self._embed(texts, Usage()))
        self.writer = Writer(store, space, self.settings, extractor, self.reader, embedder.dim,
                             scene=self.scene)
        self.consolidator = Consolidator(store, space, self.settings, extractor, self._writing)
        self._exists = space_info(store, space) is not None
        if self._exists:
            store.ensure_space(space, embedder.name, embedder.dim)  # checks the embedder
        elif not create:
            raise self._not_found()

    @property
    def placer(self) -> Placer:
        """The placement rule writes follow (``core.tree.choose_placement`` unless swapped)."""
        return self.writer.placer

    @placer.setter
    def placer(self, placer: Placer) -> None:
        self.writer.placer = placer

    @property
    def extractor(self) -> Extractor:
        """What turns episodes into experiences (replaceable: the writer and the consolidator
        follow)."""
        return self._extractor

    @extractor.setter
    def extractor(self, extractor: Extractor) -> None:
        self._extractor = self.writer.extractor = self.consolidator.extractor = extractor

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
        scene: str | Scene | None = None,
    ) -> DeltaMem:
        """Open the memory at ``db``, creating the database and the space unless ``create=False``.

        Args:
            db: a SQLite file path, ``sqlite:PATH``, ``:memory:`` or ``postgresql://...``.
            space: namespace inside the store; spaces never see each other's nodes.
            embedder: an :class:`Embedder` or a spec such as ``"minilm"`` (the default).
            extractor: ``"trace"`` (no model), ``"llm"`` (needs ``llm``) or an Extractor.
            llm: an LLM object or spec (``"local"``, ``"openai"``, ``"anthropic:<model>"``) for
                the ``llm`` extractor.
            settings: thresholds and constants; defaults come from ``Settings.from_env()``.
            create: create a missing database or space; with False, they must exist.
            scene: the scene plug-in, ``"text-games"`` (the default, from ``Settings.scene``),
                ``"coding"``, ``"plain"`` or a :class:`~deltamem.scenes.Scene`; it gives scenes
                their identity and, to the ``trace`` extractor, their facts.

        Raises:
            SpaceNotFound: ``create=False`` and the database or the space does not exist.
        """
        from deltamem.embed import make_embedder  # resolved here: specs may name optional extras

        settings = settings or Settings.from_env()
        if not isinstance(embedder, Embedder):
            embedder = make_embedder(embedder or settings.embedder)
        resolved = make_scene(scene if scene is not None else settings.scene)
        extractor = make_extractor(extractor, llm=llm, scene=resolved)
        store = open_store(str(db), create=create)
        try:
            return cls(store, embedder, extractor, space=space, settings=settings, create=create,
                       scene=resolved)
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
        "deltamem.task.node": r.task.node or "", "deltamem.env.node": r.env.node or ""})
    def recall(self, task: str = "", env: str = "", *, top_k: int | None = None,
               budget_tokens: int | None = None,
               filters: Mapping[str, Any] | None = None, explain: bool = False
               ) -> results.Recall:
        """Recall the skill chain for ``task`` and the knowledge chain for ``env``.

        Per tree: score every node ``cos - penalty*[failure]``, take the best (in the environment
        tree: the best whose scene has the same layout, see ``core.knowledge``), accept it when it
        clears the tree's threshold, and compose its chain root -> match. ``budget_tokens`` caps
        the prompt context (see ``core.render.render_context`` for what is kept first and
        ``core.render.estimate_tokens`` for how tokens are counted).

        ``filters`` (e.g. ``{"user": "alice", "project": "shop"}``) keeps only nodes written by
        an episode whose ``meta`` has every given key with an equal value (exact JSON equality,
        ``core.ranking.matches``; the scoping keys are ``core.ranking.SCOPE_KEYS``, any other key
        works the same). The result is exactly what an unfiltered recall over only the matching
        nodes gives; the filter applies to the matched node, whose chain is composed as usual
        (its ancestors may come from other episodes: use spaces to isolate tenants).

        ``explain`` makes the answer carry every scoring term (its ``explain`` field).
        """
        if budget_tokens is not None and budget_tokens < 0:
            raise ConfigError(f"budget_tokens must be >= 0, got {budget_tokens}")
        wanted = check_filters(filters)
        started = time.perf_counter()
        usage = Usage()
        for name, text in (("task", task), ("env", env)):
            problem = jsonsafe.text_problem(text)
            if problem:
                raise EpisodeError(f"field '{name}' {problem}", field=name)
        reads = self._read(task, env, top_k or self.settings.top_k, usage, wanted)
        recalls = {tree: read.recall for tree, read in reads.items()}
        context = render_context(recalls[Tree.TASK].chain, recalls[Tree.ENV].chain,
                                 self.settings.style, budget_tokens=budget_tokens,
                                 query=f"{task}\n{env}")
        usage.wall_ms = (time.perf_counter() - started) * 1000
        return results.Recall.of(recalls[Tree.TASK], recalls[Tree.ENV], context, usage,
                                 estimate_tokens(context), explain=explain)

    def _read(self, task: str, env: str, k: int, usage: Usage,
              filters: dict[str, FilterValue] | None = None, *,
              placing: bool = False) -> dict[Tree, TreeRead]:
        """Both trees' reads for ``task`` and ``env`` (embedded in one call), nothing rendered
        (``placing``: reads for learning, see ``Reader.tree``)."""
        q_task, q_env = self._embed([task, env], usage)
        with self._intact():
            return {tree: self.reader.tree(tree, key, q, k, scene=env, filters=filters,
                                           placing=placing)
                    for tree, key, q in ((Tree.TASK, task, q_task), (Tree.ENV, env, q_env))}

    def embed(self, texts: Sequence[str]) -> list[Vector]:
        """The texts' vectors from this memory's embedder, through its cache (unit length, as
        the scans compare them)."""
        return self._embed(list(texts), Usage())

    def _embed(self, texts: list[str], usage: Usage) -> list[Vector]:
        """One embedder call for the texts not in the cache (``usage`` counts only those)."""
        with blas_threads(self.settings.embed_threads):
            vectors, computed = self.embed_cache.embed(self.embedder, texts)
        if computed:
            usage.embed_calls += 1
            usage.embed_texts += computed
        out = [vectors[i] for i in range(len(texts))]
        if sound_rows(vectors, self.embedder.dim):  # one check for the whole batch
            return out
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

    # -- write path -----------------------------------------------------------------------
    @memory_span("upsert_memory", lambda r: {
        "gen_ai.memory.record.id": r.episode, "deltamem.task.action": r.task.action,
        "deltamem.env.action": r.env.action, "deltamem.consolidated": len(r.consolidated)})
    def learn(self, episode: Episode, recall: results.Recall | None = None
              ) -> results.LearnResult:
        """Learn one finished episode; atomic (all of it is stored, or none of it).

        ``recall`` is the recall the agent made before the episode; passing it saves embedding
        the keys again, shows the extractor the chains the agent saw, and counts the episode's
        outcome on the nodes it handed the agent (``LearnResult.recalled``): a skill followed
        in more failed episodes than successful ones is then scored like a failure
        (``core.tree.discredited``). Without it, learning recalls afresh and counts the outcome
        only on the nodes the episode is placed on.

        Extraction (a model call, with an LLM extractor) and placement run before the write
        lock is taken; inside it the candidates are scanned again and the placement is kept
        only if they are unchanged (else it is redone), so concurrent writers never place
        against a stale tree and the lock is held briefly (diffs have a bounded cost, see
        ``core.delta``). Consolidation runs after the episode is stored: if it fails (the model
        is down), the result lists the chains in ``deferred`` and the learn still succeeds.
        """
        started = time.perf_counter()
        episode_json.check_episode(episode)
        episode = self._redacted(episode)
        with self._intact():
            return results.LearnResult.of(self._learn(episode, recall, Usage(), started))

    def learn_many(self, episodes: Sequence[Episode]) -> results.BatchResult:
        """Learn episodes in order, all in one transaction: every one is stored, or none is.

        Each episode sees the ones before it, exactly as with one :meth:`learn` per episode. The
        space's write lock is held for the whole batch (model calls included), so keep LLM
        batches small.

        Raises:
            EpisodeError: an episode cannot be stored (checked for all before any is learned).
        """
        for i, episode in enumerate(episodes):
            episode_json.check_episode(episode, where=f"episodes[{i}]")
        episodes = [self._redacted(episode) for episode in episodes]
        learned: list[Learning] = []
        usage = Usage()
        with self._intact(), self._writing():
            token = self._batch.set(True)
            try:
                for episode in episodes:
                    result = self._learn(episode, None, Usage(), time.perf_counter())
                    usage.add(result.usage)
                    learned.append(result)
            finally:
                self._batch.reset(token)
        return results.BatchResult.of([results.LearnResult.of(result) for result in learned],
                                      results.usage_wire(usage))

    def _learn(self, episode: Episode, recall: results.Recall | None, usage: Usage,
               started: float) -> Learning:
        """Read and extract outside the write block, then place and write inside it."""
        shown = recall is not None and (recall.task.key, recall.env.key) == (episode.task,
                                                                           episode.env)
        reads: dict[Tree, TreeRead | None] = {Tree.TASK: None, Tree.ENV: None}
        before = None if self._batch.get() else self.store.changes(self.space)
        if recall is None or not shown:
            reads = {**self._read(episode.task, episode.env, self.settings.top_k, usage,
                                  placing=not self._batch.get())}
            seen = {tree: read.recall for tree, read in reads.items() if read is not None}
        else:
            seen = {Tree.TASK: recall.task.match, Tree.ENV: recall.env.match}
        keys = {Tree.TASK: episode.task, Tree.ENV: episode.env}
        queries = {tree: seen[tree].query for tree in TREES}
        extractions = {tree: self.writer.extract(episode, seen[tree], usage, reads[tree])
                       for tree in TREES}
        batch = self._batch.get()  # inside learn_many's block everything is placed in it
        plans = {tree: None if batch else self.writer.plan(
            tree, keys[tree], queries[tree], extractions[tree].experience,
            reads[tree], scope=scope_of(episode.meta)) for tree in TREES}
        episode_id = "ep-" + secrets.token_hex(8)
        steps = episode_json.episode_to_dict(episode)["steps"]
        with self._writing():
            # No node added or deleted since before the plans' scans: the plans stand as made.
            unchanged = before is not None and self.store.changes(self.space) == before
            writes = {
                tree: self.writer.write_tree(tree, keys[tree], queries[tree], extractions[tree],
                                             episode, episode_id, plans[tree],
                                             unchanged=unchanged)
                for tree in TREES
            }
            recalled = self.writer.count_recalled(recall, writes, episode.success) \
                if shown and recall is not None else []
            self.store.add_episode(self.space, EpisodeRecord(
                id=episode_id, task=episode.task, env=episode.env, success=episode.success,
                score=episode.score, steps=steps, meta=episode.meta,
                result={t.value: w.to_dict() for t, w in writes.items()},
                flat_chars=sum(experience_chars(x.flat) for x in extractions.values()),
                created_at=time.time(),
            ))
        result = Learning(episode_id, writes[Tree.TASK], writes[Tree.ENV], usage=usage,
                          recalled=recalled)
        if self.settings.auto_consolidate:
            matched = [w.matched for w in writes.values() if w.matched is not None]
            result.consolidated, result.deferred = self.consolidator.after_write(
                matched + (recalled if episode.success else []), usage)
        usage.wall_ms = (time.perf_counter() - started) * 1000
        return result

    # -- consolidation --------------------------------------------------------------------
    def due(self) -> list[Node]:
        """The nodes whose chains are due for consolidation, oldest first; writes nothing."""
        return list(self.consolidator.due())

    def consolidate(self, *, dry_run: bool = False) -> results.Consolidations:
        """Compile every chain that is due (see ``core.tree.due_for_consolidation``).

        With ``dry_run`` nothing is written: the result lists the chains that are due, each with
        ``root=None``.
        """
        if dry_run:
            return results.Consolidations.of(
                (results.Consolidation.of(n.id, None, n.tree,
                                          (c.id for c in self.store.chain(self.space, n.id)),
                                          "due (dry run: nothing compiled)")
                 for n in self.due()),
                dry_run=True)
        usage = Usage()
        done: list[results.Consolidation] = []
        with self._intact():
            for node in self.due():
                done += self.consolidator.if_due(node.id, usage)
        return results.Consolidations.of(done)

    def record_outcome(self, nodes: api.RecallOut | Sequence[str], success: bool
                       ) -> results.OutcomeRecord:
        """Count a success or a failure on recalled nodes, without learning a new episode.

        ``nodes`` is a recall (its matched node in each tree; a client's recall too) or node
        ids. Use it when the agent followed a recalled memory but has no trajectory to hand
        over, or learns without passing the recall (over REST or MCP). :meth:`learn` given the
        recall already counts the outcome on the recalled nodes, so do not call both for one
        episode. A success can make a chain due for consolidation, which then runs as after
        ``learn``.

        An id consolidation retired counts on the root it was retired into.

        Raises:
            NodeNotFound: an id is not in this space (nothing is counted).
        """
        if isinstance(nodes, api.RecallOut):
            ids = [t.node for t in (nodes.task, nodes.env) if t.node is not None]
        else:
            ids = list(dict.fromkeys(nodes))
        with self._writing():
            ids = list(dict.fromkeys(self.get(node_id).id for node_id in ids))
            for node_id in ids:
                self.store.bump(self.space, node_id, hits=1, successes=int(success),
                                failures=int(not success))
        done: list[results.Consolidation] = []
        deferred: list[str] = []
        if success and self.settings.auto_consolidate:
            with self._intact():
                done, deferred = self.consolidator.after_write(ids, Usage())
        return results.OutcomeRecord.model_construct(
            nodes=ids, success=success, consolidated=done, deferred=deferred)

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
        return self.add_nodes([new_root(tree, key, experience, dict(meta))
                               for tree, key, experience, meta in roots])

    def add_nodes(self, nodes: Sequence[Node]) -> list[str | None]:
        """Store ready-made nodes -- roots and deltas with their own ids, counters and times,
        parents before children -- in one transaction (all or nothing): the write path of
        importers such as skill files.

        Every key, meta and composed experience is redacted first (a delta's patch recomputed
        against its redacted parent, ``store.scrub.composed_nodes``), and every key embedded
        here. A delta's parent is an earlier node or one the space holds. A node whose id the
        space holds with the same key and experience is skipped, as is a root identical to a
        stored root or an earlier one (same tree, key and experience).

        Returns:
            Per node, its id, or None where it was skipped.

        Raises:
            StoreError: an id the space holds with other content (``InvalidExport``: a parent
                that is nowhere, or nodes that would damage the trees); nothing is written.
        """
        if not nodes:
            return []
        try:
            ready = scrubbing.composed_nodes(nodes, self._stored_experience,
                                             redacting=self.settings.redact)
        except KeyError as exc:
            raise InvalidExport(f"the parent {exc.args[0]} of a node is neither among the "
                                f"nodes nor in space {self.space!r}; nothing was added") from None
        vectors = self._embed([node.key for node, _ in ready], Usage())
        ids: list[str | None] = []
        with self._writing():
            held = {n.id: n for n in self.store.nodes(self.space)}
            roots = {(n.tree, n.key, n.content) for n in held.values() if n.is_root}
            new: list[tuple[Node, Vector]] = []
            for (node, experience), vector in zip(ready, vectors, strict=True):
                if node.id in held:
                    if (held[node.id].key, self.experience(node.id)) != (node.key, experience):
                        raise StoreError(f"node {node.id} is already in space {self.space!r} "
                                         "with other content; nothing was added")
                elif not (node.is_root and (node.tree, node.key, node.content) in roots):
                    roots.add((node.tree, node.key, node.content))
                    new.append((node, vector))
                    ids.append(node.id)
                    continue
                ids.append(None)
            added = [node for node, _ in new]
            for node_id, problem in forest_problems([*held.values(), *added],
                                                    max_depth=self.settings.max_depth):
                raise InvalidExport(f"node {node_id}: {problem}; nothing was added")
            for node, vector in new:
                self.store.add_node(self.space, node, vector)
        return ids

    # -- inspection -----------------------------------------------------------------------
    def get(self, node_id: str) -> Node:
        """A node; an id consolidation retired answers as the root it was retired into (the
        node that now stands for it, ``Store.retire``)."""
        node = self.store.get_node(self.space, node_id)
        if node is None:
            node = self.store.get_node(self.space, self._successor(node_id))
        if node is None:
            raise NodeNotFound(node_id, self.space)
        return node

    def chain(self, node_id: str) -> list[Node]:
        """A node's chain, root first; a retired id answers as in :meth:`get`."""
        chain = self.store.chain(self.space, node_id) or \
            self.store.chain(self.space, self._successor(node_id))
        if not chain:
            raise NodeNotFound(node_id, self.space)
        return chain

    def _successor(self, node_id: str) -> str:
        """The root ``node_id`` was retired into, followed while that one was retired too (the
        id itself when it never was): read from the audit log's history, on a miss only."""
        into = {n.get("id"): e["detail"].get("into")
                for e in self.store.audit_log(self.space) if e["action"] == "retire"
                for n in e["detail"].get("nodes", []) if isinstance(n, dict)}
        seen = {node_id}
        while isinstance(into.get(node_id), str) and into[node_id] not in seen:
            node_id = into[node_id]
            seen.add(node_id)
        return node_id

    def experience(self, node_id: str) -> Experience:
        """The full composed experience of a node."""
        with self._intact():
            return compose_chain(self.chain(node_id))

    def nodes(self, tree: Tree | None = None) -> Iterator[Node]:
        return self.store.nodes(self.space, tree)

    def episodes(self) -> Iterator[EpisodeRecord]:
        """The space's episode log, oldest first (empty for a space nobody wrote to)."""
        return self.store.episodes(self.space) if self.exists else iter(())

    def experiences(self, node_ids: Sequence[str]) -> dict[str, tuple[Node, Experience]]:
        """Each found node with its composed experience, read in one batch (a missing id is
        left out)."""
        with self._intact():
            return {node_id: (chain[-1], compose_chain(chain))
                    for node_id, chain in self.store.chains(self.space, list(node_ids)).items()
                    if chain}

    def unlearn(self, episode_ids: Iterable[str], *,
                note: Mapping[str, Any] | None = None) -> list[str]:
        """Forget what the given episodes taught: every node learned from one of them goes,
        with its subtree (a delta means nothing without its parent), in one transaction. With
        ``note``, an empty episode holding it as its meta (redacted) is added to the log, so the
        deletion is on record. Returns the deleted ids."""
        wanted = set(episode_ids)
        if not wanted or not self.exists:
            return []
        meta = dict(note or {})
        if self.settings.redact:
            meta = redact_value(meta)
        deleted: list[str] = []
        with self._writing():
            for node in list(self.store.nodes(self.space)):
                if node.episode_id in wanted and node.id not in deleted:
                    deleted += self.store.delete_subtree(self.space, node.id)
            if note is not None:
                self.store.add_episode(self.space, EpisodeRecord(
                    id="x-" + secrets.token_hex(8), task="", env="", success=False, score=None,
                    steps=[], meta=meta, created_at=time.time()))
        return deleted

    def list_nodes(self, tree: Tree | str | None = None, *, kind: NodeKind | str | None = None,
                   outcome: Outcome | str | None = None, contains: str = "",
                   filters: Mapping[str, Any] | None = None,
                   limit: int | None = None) -> results.NodeListing:
        """One row per node (id, tree, kind, outcome, key, parent, counters), oldest first,
        filtered: at most ``limit`` rows (all when None), with the ``total`` that matched.

        ``tree``, ``kind`` and ``outcome`` take the enums or their values (``"task"``,
        ``"delta"``, ``"failure"``); ``contains`` keeps nodes whose key contains it
        (case-insensitive); ``filters`` keeps nodes whose episode meta matches every key exactly
        (as in :meth:`recall`).
        """
        want_tree = _member(Tree, tree, "tree")
        want_kind = _member(NodeKind, kind, "kind")
        want_outcome = _member(Outcome, outcome, "outcome")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)
                                  or limit < 1):
            raise ConfigError(f"limit must be a whole number >= 1, got {limit!r}")
        needle = contains.lower()
        wanted = check_filters(filters)
        rows = [results.node_row(n) for n in self.store.nodes(self.space, want_tree)
                if (want_kind is None or n.kind is want_kind)
                and (want_outcome is None or n.outcome is want_outcome)
                and needle in n.key.lower() and matches(n, wanted)]
        return results.NodeListing.of(rows, limit)

    def delete(self, node_id: str) -> api.DeleteOut:
        """Delete a node and its whole subtree in one transaction; the answer lists the
        deleted ids (``deleted``)."""
        self.get(node_id)
        with self._writing():
            return api.DeleteOut.build(deleted=self.store.delete_subtree(self.space, node_id))

    def forget(self) -> api.ForgetOut:
        """Delete everything in this space; the answer counts the nodes removed
        (``deleted_nodes``: 0 for a space nobody wrote to, which is not created)."""
        if not self.exists:
            return api.ForgetOut.build(space=self.space, deleted_nodes=0)
        with self._writing():
            count = self.store.forget_space(self.space)
        return api.ForgetOut.build(space=self.space, deleted_nodes=count)

    def stats(self) -> api.StatsOut:
        """Tree shapes, episodes, and stored vs flat characters (see ``reports.stats``)."""
        return reports.stats(self.store, self.space)

    def show(self, node_id: str) -> api.ShowOut:
        """A node's chain, composed experience, patch and counters (a retired id: the root
        it was retired into, as in :meth:`get`)."""
        with self._intact():
            shown = reports.show(self.store, self.space, node_id) or \
                reports.show(self.store, self.space, self._successor(node_id))
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

    def import_records(self, records: Iterable[dict[str, Any]]) -> api.ImportOut:
        """Verify exported records as a whole and load them in one transaction (all or nothing).

        Raises:
            StoreError: naming the first bad record; nothing was written.
        """
        if self.settings.redact:
            records = scrubbing.redact_records(records, self._stored_experience)
        counts = transfer.import_records(self.store, self.space, records,
                                         max_depth=self.settings.max_depth)
        self._exists = True
        return api.ImportOut.build(**counts)

    def import_lines(self, lines: Iterable[str | bytes], source: str = "line") -> api.ImportOut:
        """Load an export's JSON Lines (see :meth:`import_records`); a line that is not a JSON
        object is a StoreError naming ``source`` and the line number, and nothing is written."""
        return self.import_records(transfer.parse_lines(lines, source))

    def import_(self, path: str | Path) -> api.ImportOut:
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
        (``deltamem.privacy.redact``) before anything of it is stored or shown to a model."""
        return redact_episode(episode) if self.settings.redact else episode

    def _stored_experience(self, node_id: str) -> Experience | None:
        try:
            return self.experience(node_id)
        except (NodeNotFound, StoreError):
            return None

    def scrub(self, *, every_space: bool = False) -> dict[str, int]:
        """Redact every stored node and episode in place (``deltamem.privacy.redact``'s rules), then
        compact a SQLite file (``VACUUM`` and a truncated WAL) so that no old byte remains; on
        PostgreSQL the old row versions stay in the table files and the WAL until :meth:`purge`.

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
        if self.store.url.startswith("sqlite:"):  # cheap for a file; PostgreSQL: purge()
            self.store.compact()
        return total

    def purge(self) -> list[str]:
        """Drop what a rewrite such as :meth:`scrub` left behind in the store's files: on
        SQLite ``VACUUM`` and a truncated WAL (which ``scrub`` already runs), on PostgreSQL
        ``VACUUM FULL`` of the tables and WAL checkpoints (an exclusive lock on each table
        while it is rewritten, for every space). Returns what ran, one line per step, and
        what the role could not run. docs/security.md says what no command can reach (WAL
        archives, replicas, backups)."""
        return self.store.compact()

    def correct(self, node_id: str, *, success: bool | None = None,
                steps: Sequence[str] | None = None, wrong: bool = False,
                reason: str = "") -> corrections.Correction:
        """Correct a node from inside the agent; exactly one of: ``success`` (the outcome set
        right), ``steps`` (a skill's steps edited) or ``wrong`` (the experience retracted).

        The correction is a new root that supersedes the node in recall, with the corrected
        chain as its lineage and the delta in its meta; nothing is overwritten (see
        ``deltamem.engine.corrections``). To delete a node outright, use :meth:`delete`.

        Raises:
            NodeNotFound: no such node in this space.
            EpisodeError: not exactly one correction, or one the node's tree cannot take.
        """
        with self._intact():
            return corrections.correct(self, node_id, success=success, steps=steps, wrong=wrong,
                           reason=reason)

    def forget_fact(self, node_id: str, fact: str, *, reason: str = ""
                    ) -> corrections.Correction:
        """Remove one fact from the scene knowledge of ``node_id`` (an environment-tree node),
        keeping the others: ``fact`` is the fact's text, its number as :meth:`show` lists the
        composed facts (1-based), or a piece of text only it contains. Like :meth:`correct`, a
        new root supersedes the node and the history is kept.

        Raises:
            NodeNotFound: no such node in this space.
            EpisodeError: not a knowledge node, or ``fact`` names no fact or several.
        """
        with self._intact():
            return corrections.forget_fact(self, node_id, fact, reason=reason)

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


def _member(enum: type[E], value: E | str | None, name: str) -> E | None:
    """``value`` as a member of ``enum`` (given as the member or its value), or None."""
    if value is None or isinstance(value, enum):
        return value
    try:
        return enum(value)
    except ValueError:
        choices = ", ".join(repr(m.value) for m in enum)
        raise ConfigError(f"{name} must be one of {choices}, got {value!r}") from None

