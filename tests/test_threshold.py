"""The retrieval threshold is compared in one place (``core.scoring.accepts``), on both paths:
a best score exactly at the threshold is accepted by recall and by placement."""

from __future__ import annotations

import math

from deltamem.core.scoring import accepts
from deltamem.embed.hashing import HashingEmbedder
from deltamem.engine.memory import DeltaMem
from deltamem.extract.trace import TraceExtractor
from deltamem.store.sqlite import SQLiteStore
from helpers import TEST_SETTINGS, make_episode


def test_accepts_is_inclusive():
    assert accepts(0.5, 0.5)
    assert accepts(0.51, 0.5)
    assert not accepts(math.nextafter(0.5, 0.0), 0.5)


def test_a_score_exactly_at_the_threshold_is_recalled_and_placed_on(tmp_path):
    episode = make_episode()
    query = "heat the red apple"
    store = SQLiteStore(tmp_path / "m.db")
    with DeltaMem(store, HashingEmbedder(), TraceExtractor(), settings=TEST_SETTINGS) as mem:
        mem.learn(episode)
        score = mem.recall(query).task.best.score
    assert 0.0 < score < 1.0
    for tau, matched in ((score, True), (math.nextafter(score, 2.0), False)):
        settings = TEST_SETTINGS.with_(tau_task=tau)
        with DeltaMem(SQLiteStore(tmp_path / "m.db"), HashingEmbedder(), TraceExtractor(),
                      settings=settings) as mem:
            assert mem.recall(query).task.matched is matched
            assert mem.recall(query).task.explain()["candidates"][0]["clears_threshold"] \
                is matched
    # Placement: an episode keyed exactly at the threshold extends the chain it matched (its
    # skill differs only by the task text); one notch above, it starts a new root.
    for tau, action in ((score, "delta"), (math.nextafter(score, 2.0), "root")):
        path = tmp_path / f"{action}.db"
        with DeltaMem(SQLiteStore(path), HashingEmbedder(), TraceExtractor(),
                      settings=TEST_SETTINGS.with_(tau_task=tau)) as mem:
            mem.learn(episode)
            assert mem.learn(make_episode(task=query)).task.action == action
