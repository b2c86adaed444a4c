"""How the facade composes its reader, writer and consolidator: what runs where, and what a
failure after an acknowledged write does."""

from __future__ import annotations

import numpy as np
import pytest

import deltamem.engine.memory
from deltamem.core.model import Tree
from deltamem.embed.hashing import HashingEmbedder
from deltamem.engine.memory import DeltaMem
from deltamem.errors import ProviderError
from deltamem.extract.base import Extraction, ExtractRequest
from deltamem.extract.trace import TraceExtractor
from deltamem.store.base import UNIT_TOLERANCE
from deltamem.store.integrity import sound_rows, vector_problem
from deltamem.store.sqlite import SQLiteStore
from helpers import TEST_SETTINGS, make_episode

LONGER = ("go to kitchen", "open microwave", "take apple", "heat apple")


class FailingCompiler(TraceExtractor):
    """A test double: extracts like the trace extractor, but its model 'fails' to compile."""

    def compile(self, tree: Tree, composed):  # type: ignore[no-untyped-def]
        raise ProviderError("the model endpoint is down")


def test_a_failed_consolidation_defers_instead_of_failing_the_learn(tmp_path):
    """The episode is stored once and acknowledged; the due chain is reported as deferred and
    compiled later, so a caller never resends (and duplicates) an episode that was stored."""
    settings = TEST_SETTINGS.with_(k_cons=1)
    with DeltaMem(SQLiteStore(tmp_path / "d.db"), HashingEmbedder(), FailingCompiler(),
                  settings=settings) as mem:
        mem.learn(make_episode())
        result = mem.learn(make_episode(actions=LONGER))
        delta = result.task.node
        assert result.task.action == "delta"
        again = mem.learn(make_episode(actions=LONGER))  # a success on the delta: due now
        assert again.task.matched == delta
        assert delta in again.deferred and again.consolidated == []
        assert again.wire()["deferred"] == again.deferred
        assert mem.store.count_episodes(mem.space) == 3
        assert not mem.get(delta).consolidated
        record = mem.record_outcome([delta], success=True)
        assert record.deferred == [delta] and record.nodes == [delta]
        mem.extractor = TraceExtractor()
        done = mem.consolidate()
        assert delta in [c.source for c in done.consolidated]


class LockProbe(TraceExtractor):
    """A test double that records whether the store held a write block during extraction."""

    def __init__(self, store: SQLiteStore):
        super().__init__()
        self.store = store
        self.in_block: list[bool] = []

    def extract(self, request: ExtractRequest) -> Extraction:
        self.in_block.append(self.store._block() is not None)
        return super().extract(request)


def test_extraction_runs_outside_the_write_block(tmp_path):
    """A model call never holds the space's write lock."""
    store = SQLiteStore(tmp_path / "d.db")
    probe = LockProbe(store)
    with DeltaMem(store, HashingEmbedder(), probe, settings=TEST_SETTINGS) as mem:
        mem.learn(make_episode())
        mem.learn(make_episode(actions=LONGER), mem.recall("heat the apple", "a kitchen"))
    assert probe.in_block == [False] * 4


def test_placement_is_planned_outside_the_write_block(tmp_path):
    """The diffs against the candidate chains run before the lock is taken."""
    store = SQLiteStore(tmp_path / "d.db")
    in_block: list[bool] = []
    with DeltaMem(store, HashingEmbedder(), TraceExtractor(), settings=TEST_SETTINGS) as mem:
        plan = mem.writer.plan

        def probe(*args, **kwargs):  # type: ignore[no-untyped-def]
            in_block.append(store._block() is not None)
            return plan(*args, **kwargs)

        mem.writer.plan = probe  # type: ignore[method-assign]
        mem.learn(make_episode())
        assert mem.learn(make_episode(actions=LONGER)).task.action == "delta"
    assert in_block == [False] * 4


def test_learn_renders_no_context(tmp_path, monkeypatch):
    """Learning reads the trees for the extractor but renders no prompt context."""
    def no_rendering(*args: object, **kwargs: object) -> str:
        raise AssertionError("learn rendered a context")

    with DeltaMem(SQLiteStore(tmp_path / "d.db"), HashingEmbedder(), TraceExtractor(),
                  settings=TEST_SETTINGS) as mem:
        mem.learn(make_episode())
        monkeypatch.setattr(deltamem.engine.memory, "render_context", no_rendering)
        result = mem.learn(make_episode(actions=LONGER))
        assert result.task.action == "delta"
        with pytest.raises(AssertionError):
            mem.recall("heat the apple")


def test_a_plan_made_outside_the_lock_is_redone_when_the_memory_changed(tmp_path):
    """Placement is planned before the write block and kept only if the scan inside the block
    still sees the same candidates: a node another writer added in between is placed against."""
    store = SQLiteStore(tmp_path / "d.db")
    with DeltaMem(store, HashingEmbedder(), TraceExtractor(), settings=TEST_SETTINGS) as mem:
        first = mem.learn(make_episode()).task.node
        episode = make_episode(actions=LONGER)
        reads = mem._read(episode.task, episode.env, 1, deltamem.engine.memory.Usage())
        extraction = mem.writer.extract(episode, reads[Tree.TASK].recall,
                                        deltamem.engine.memory.Usage())
        stale = mem.writer.plan(Tree.TASK, episode.task, reads[Tree.TASK].recall.query,
                                extraction.experience, reads[Tree.TASK])
        assert stale is not None and stale.placement.anchor == first
        mem.delete(first)
        with mem.transaction():
            write = mem.writer.write_tree(Tree.TASK, episode.task,
                                          reads[Tree.TASK].recall.query, extraction, episode,
                                          "ep-x", stale)
        assert write.action == "root" and write.parent is None


class CountingStore(SQLiteStore):
    """A test double over a real SQLite store that counts the store calls made."""

    CALLS = ("get_node", "get_nodes", "chain", "chains", "scan", "vectors", "children")

    def __init__(self, path):  # type: ignore[no-untyped-def]
        super().__init__(path)
        self.calls: dict[str, int] = dict.fromkeys(self.CALLS, 0)

    def __getattribute__(self, name: str):  # type: ignore[no-untyped-def]
        if name in CountingStore.CALLS:
            calls = object.__getattribute__(self, "calls")
            calls[name] += 1
        return object.__getattribute__(self, name)


def _recall_calls(tmp_path, episodes: int) -> dict[str, int]:  # type: ignore[no-untyped-def]
    store = CountingStore(tmp_path / f"c{episodes}.db")
    scene = "You are in the kitchen. To the north you see the hallway."
    with DeltaMem(store, HashingEmbedder(), TraceExtractor(), settings=TEST_SETTINGS) as mem:
        for i in range(episodes):
            mem.learn(make_episode(actions=(f"take mug {i}", "clean mug"), env=scene))
        store.calls = dict.fromkeys(CountingStore.CALLS, 0)
        recall = mem.recall("heat the apple", scene)
        assert recall.task.matched and recall.env.matched
    return store.calls


def test_a_recall_makes_a_bounded_number_of_store_calls(tmp_path):
    """Ranking fetches candidates in batches: no call per candidate, however many tie."""
    few, many = _recall_calls(tmp_path, 3), _recall_calls(tmp_path, 40)
    assert many["get_node"] == 0
    assert many == few
    assert sum(many.values()) <= 10


def test_a_learn_on_an_unchanged_memory_scans_nothing_inside_the_write_block(tmp_path):
    """The plans stand when no node was added or deleted since before their scans: the block
    holds no scan (``Store.changes``), and the writes are those a fresh placement makes."""
    store = CountingStore(tmp_path / "d.db")
    scans_in_block: list[bool] = []
    scan = store.scan

    def probe(*args, **kwargs):  # type: ignore[no-untyped-def]
        scans_in_block.append(store._block() is not None)
        return scan(*args, **kwargs)

    with DeltaMem(store, HashingEmbedder(), TraceExtractor(), settings=TEST_SETTINGS) as mem:
        first = mem.learn(make_episode()).task.node
        store.scan = probe  # type: ignore[method-assign]
        result = mem.learn(make_episode(actions=LONGER))
    assert result.task.action == "delta" and result.task.parent == first
    assert scans_in_block and not any(scans_in_block)


def test_a_write_between_the_plan_and_the_block_is_placed_against(tmp_path):
    """Another writer's node committed after the plan's scan changes ``Store.changes``: the
    block scans again and places the episode against the memory as it is (a dedup here)."""
    store = SQLiteStore(tmp_path / "d.db")
    other = SQLiteStore(tmp_path / "d.db")
    with DeltaMem(store, HashingEmbedder(), TraceExtractor(), settings=TEST_SETTINGS) as mem, \
            DeltaMem(other, HashingEmbedder(), TraceExtractor(), settings=TEST_SETTINGS) as rival:
        mem.learn(make_episode())
        plan = mem.writer.plan
        written: list[str | None] = []

        def late(*args, **kwargs):  # type: ignore[no-untyped-def]
            made = plan(*args, **kwargs)
            if not written:  # the rival commits the same episode after this learn's plan
                written.append(rival.learn(make_episode(actions=LONGER)).task.node)
            return made

        mem.writer.plan = late  # type: ignore[method-assign]
        result = mem.learn(make_episode(actions=LONGER))
    assert result.task.action == "dedup" and result.task.node == written[0]


def _kind_episode(verb: str, obj: str, dest: str, appliance: str):  # type: ignore[no-untyped-def]
    return make_episode(
        task=f"{verb} some {obj} and put it in {dest}",
        actions=("go to cabinet 1", f"take {obj} 1 from cabinet 1", f"go to {appliance} 1",
                 f"{verb} {obj} 1 with {appliance} 1", f"go to {dest} 1",
                 f"move {obj} 1 to {dest} 1"), kind=verb)


def test_recall_returns_the_kind_of_task_its_template_names(tmp_path):
    """Templated tasks share their slots: "cool some mug and put it in countertop" is nearer
    "heat some mug and put it in countertop" by the full cosine (seven shared words), but its
    template ("cool some and put it in": the words the stored episodes acted on dropped) is
    that of the cool skills, and the threshold was cleared: the cool skill is recalled."""
    with DeltaMem(SQLiteStore(tmp_path / "k.db"), HashingEmbedder(), TraceExtractor(),
                  settings=TEST_SETTINGS) as mem:
        mem.learn(_kind_episode("heat", "mug", "countertop", "microwave"))
        mem.learn(_kind_episode("cool", "apple", "shelf", "fridge"))
        mem.learn(_kind_episode("cool", "bread", "drawer", "fridge"))
        recall = mem.recall("cool some mug and put it in countertop", "", top_k=3)
        assert recall.task.matched
        assert recall.task.candidates[0].similarity < max(
            c.similarity for c in recall.task.candidates)  # not the nearest by the cosine
        node = recall.task.matched_node
        assert node is not None and node.meta["episode_meta"]["kind"] == "cool"
        assert {"apple", "shelf"} <= set(node.meta["slots"]) and "cool" not in node.meta["slots"]
        mem.reader.kind_weight = 0.0  # by the cosine alone: the heat skill
        node = mem.recall("cool some mug and put it in countertop", "").task.matched_node
        assert node is not None and node.meta["episode_meta"]["kind"] == "heat"


def test_a_recalled_skill_is_adapted_to_the_new_task_by_role(tmp_path):
    """The matched key's slots map onto the words of the query that take their places: the
    steps name the new object and destination, the rest (numbers, the appliance) stays."""
    with DeltaMem(SQLiteStore(tmp_path / "a.db"), HashingEmbedder(), TraceExtractor(),
                  settings=TEST_SETTINGS) as mem:
        mem.learn(_kind_episode("heat", "mug", "shelf", "microwave"))
        recall = mem.recall("heat some egg and put it in shelf", "").task
        assert recall.skill is not None and recall.adapted is not None
        assert "take mug 1 from cabinet 1" in recall.skill.steps
        assert "take egg 1 from cabinet 1" in recall.adapted.steps
        assert "heat egg 1 with microwave 1" in recall.adapted.steps
        assert "move egg 1 to shelf 1" in recall.adapted.steps
        assert not any("mug" in step for step in recall.adapted.steps)
        same = mem.recall("heat some mug and put it in shelf", "").task
        assert same.adapted == same.experience  # nothing to carry over


def test_a_task_recalls_its_own_skill_when_one_episode_acted_on_a_frame_word(tmp_path):
    """An episode's action "go to the plant" makes "the" one of its key's stored slots; the
    query's template keeps "the" (the pool does not vote it a slot), so the stored key's
    template must keep it too, or another task of a different kind wins the template rule over
    the exact key (it did: "water the plant in the garden" recalled the heat skill)."""
    from deltamem.core.model import Episode, Step

    def episode(task: str, actions: list[str]) -> Episode:
        return Episode(task=task, env="", success=True,
                       steps=tuple(Step(a, "Done.") for a in actions))

    with DeltaMem(SQLiteStore(tmp_path / "a.db"), HashingEmbedder(), TraceExtractor(),
                  settings=TEST_SETTINGS) as mem:
        mem.learn(episode("heat the apple in the kitchen", ["heat apple with microwave"]))
        mem.learn(episode("water the plant in the garden",
                          ["take watering can", "go to the plant", "water plant with can"]))
        water = mem.recall("water the plant in the garden", "", top_k=5).task
        assert water.matched_node is not None
        assert water.matched_node.key == "water the plant in the garden"
        assert "the" in water.matched_node.meta["slots"]  # the case this guards


class _BadEmbedder(HashingEmbedder):
    """A test double: the hashing embedder, but a text holding ``bad`` embeds to a vector of
    norm 2 and one holding ``nan`` to NaNs."""

    def embed(self, texts):  # type: ignore[no-untyped-def]
        out = super().embed(texts)
        for i, text in enumerate(texts):
            if "bad" in text:
                out[i] = 2 * out[i]
            if "nan" in text:
                out[i] = np.nan
        return out


def test_a_bad_embedding_is_refused_whether_computed_or_cached(tmp_path):
    """The facade checks a batch of embeddings at once and, when one may be bad, each in turn:
    the text whose vector is bad is named, also when its vector comes from the cache."""
    with DeltaMem(SQLiteStore(tmp_path / "b.db"), _BadEmbedder(), TraceExtractor(),
                  settings=TEST_SETTINGS) as mem:
        mem.learn(make_episode())
        for _ in range(2):  # the second time the vector is the cache's
            with pytest.raises(ProviderError, match="'a bad task'.*norm is 2"):
                mem.recall("a bad task", "kitchen")
        with pytest.raises(ProviderError, match="'nan soup'.*NaN"):
            mem.recall("heat the apple", "nan soup")
        assert mem.recall("heat the apple", "kitchen").task.matched
    rows = np.eye(3)
    assert sound_rows(rows, 3) and sound_rows(np.zeros((2, 3), np.float32), 3)
    rows[1] *= 1 + UNIT_TOLERANCE - 5e-10  # within the margin: vector_problem's to judge
    assert not sound_rows(rows, 3) and vector_problem(rows[1], 3) is None
    assert not sound_rows(rows[:, :2], 3)
