"""SIGKILL in the middle of learning leaves a sound database holding only whole episodes."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from deltamem.embed.hashing import HashingEmbedder
from deltamem.engine.memory import DeltaMem
from deltamem.extract.trace import TraceExtractor
from deltamem.store.sqlite import SQLiteStore

WRITER = """
import sys
sys.path.insert(0, {tests!r})
from helpers import TEST_SETTINGS, make_episode
from deltamem.embed.hashing import HashingEmbedder
from deltamem.extract.trace import TraceExtractor
from deltamem.engine.memory import DeltaMem
from deltamem.store.sqlite import SQLiteStore
mem = DeltaMem(SQLiteStore({db!r}), HashingEmbedder(), TraceExtractor(), settings=TEST_SETTINGS)
i = 0
while True:
    acts = tuple(f"step {{j}}" for j in range(i % 7 + 1))
    mem.learn(make_episode(task=f"task {{i % 13}}", actions=acts, success=i % 3 != 0,
                           env=f"room {{i % 5}}"))
    print(i, flush=True)
    i += 1
"""


def test_sigkill_mid_learn_keeps_only_whole_episodes(tmp_path):
    """Repeated SIGKILLs at random moments never leave half an episode behind."""
    db = tmp_path / "crash.db"
    script = WRITER.format(tests=str(Path(__file__).resolve().parent.parent), db=str(db))
    learned = 0
    for delay in (0.05, 0.3, 0.15, 0.4, 0.2):
        proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        # Kill while it writes: once its first episode is in (however slow the start-up on a
        # loaded machine), then after a delay that lands at some moment of a later write.
        first = proc.stdout.readline()
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        out, err = proc.communicate(timeout=30)
        assert "Traceback" not in err, err
        learned += len((first + out).split())
        _assert_consistent(db)
    assert learned >= 5  # the writer really did work between the kills


def _assert_consistent(db) -> None:
    store = SQLiteStore(db)
    assert store.integrity_check() == ["ok"]
    mem = DeltaMem(store, HashingEmbedder(), TraceExtractor())
    try:
        assert mem.check() == []
        episodes = {e.id: e for e in store.episodes(mem.space)}
        nodes = {n.id: n for n in mem.nodes()}
        retired = {n["id"] for e in store.audit_log(mem.space) if e["action"] == "retire"
                   for n in e["detail"]["nodes"]}
        for node in nodes.values():
            # Every learned node belongs to a committed episode (consolidated roots have none).
            assert node.episode_id is None or node.episode_id in episodes
        for episode in episodes.values():
            for tree in ("task", "env"):
                write = episode.result[tree]
                if write["action"] in ("root", "delta"):  # live, or retired by consolidation
                    assert write["node"] in nodes.keys() | retired, json.dumps(episode.result)
    finally:
        mem.close()
