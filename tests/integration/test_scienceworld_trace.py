"""Issue-2 acceptance on real recorded ScienceWorld gold episodes, with the default embedder.

The fixture (tests/fixtures/scienceworld_gold.jsonl, made by scripts/record_scienceworld.py with
the real `scienceworld` package) holds train and test variations of six tasks. We learn the train
variations with the trace extractor and the real MiniLM embedder at the default thresholds.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from deltamem.config import Settings
from deltamem.engine.memory import DeltaMem
from deltamem.extract.trace import TraceExtractor
from deltamem.formats.episodes import read_episodes

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "scienceworld_gold.jsonl"


@pytest.fixture(scope="module")
def episodes():
    eps = [e for _, e in read_episodes(FIXTURE)]
    assert all(not isinstance(e, Exception) for e in eps)
    return eps


@pytest.fixture(scope="module")
def learned(episodes, tmp_path_factory):
    db = tmp_path_factory.mktemp("sw") / "mem.db"
    mem = DeltaMem.open(db, embedder="minilm", settings=Settings(auto_consolidate=False))
    train = [e for e in episodes if e.meta["split"] == "train"]
    results = [(e, mem.learn(e)) for e in train]
    yield mem, results
    mem.close()


def test_learning_produces_deltas(learned):
    """Variations of one task become deltas under a shared root, not new roots."""
    mem, results = learned
    stats = mem.stats().wire()
    assert stats["task"]["deltas"] > 0 and stats["env"]["deltas"] > 0
    assert stats["task"]["roots"] <= 6 + 2  # about one root per task family
    assert mem.check() == []


def test_every_node_composes_to_its_episode(learned):
    """Each written node's composition equals the experience extracted from its episode."""
    mem, results = learned
    extractor = TraceExtractor()
    for episode, result in results:
        if result.task.action != "dedup":
            assert mem.experience(result.task.node) == extractor.skill(episode)
        if result.env.action != "dedup":
            composed = mem.experience(result.env.node)
            assert composed == result.env.experience
            # Knowledge accumulates: the episode's own facts are all there.
            assert set(extractor.knowledge(episode).facts) <= set(composed.facts)


def test_storage_is_below_flat(learned):
    """Residual storage is smaller than a one-record-per-episode memory.

    On this fixture (6 tasks x 4 train variations) it is about 0.79 (0.87 before cost-aware
    placement and scene facts): newly explored rooms are genuinely new content. See
    docs/results.md for the breakdown and the larger fixture.
    """
    stats = learned[0].stats().wire()
    assert stats["stored_chars"] / stats["flat_chars"] < 0.82


def test_held_out_variation_recalls_its_own_task(learned, episodes):
    """A test-split variation recalls a chain learned from the same task, with one known
    exception of the template rule (``core.ranking.kind_first``, docs/results.md, "Memory-quality
    probe", turn 6): the two find-plant variations move the plant to a box in the living room,
    a destination no train variation used, so "living room" stays in the query's template and
    meets the kind word of "find a(n) living thing" -- they recall find-living-thing. Pinned
    here so that a fix shows (this test then fails and loses its exception) and so that any
    other wrong kind fails at once."""
    mem, _ = learned
    wrong = []
    for episode in [e for e in episodes if e.meta["split"] == "test"]:
        recall = mem.recall(episode.task, episode.env)
        assert recall.task.matched, episode.meta
        # The matched node (the chain's end, whose composition the agent gets) is the same task;
        # its chain may start at a related task's root (find-plant is a delta of
        # find-living-thing), which is the residual tree working as intended.
        node = recall.task.matched_node
        assert node is not None
        got = node.meta["episode_meta"]["task_name"]
        if got != episode.meta["task_name"]:
            wrong.append((episode.meta["task_name"], episode.meta["variation"], got))
    assert wrong == [("find-plant", 225, "find-living-thing"),
                     ("find-plant", 226, "find-living-thing")]
