"""Stateful property test: any sequence of learn / consolidate / delete / reopen / export and
import keeps the trees sound, every node composing to the experience that wrote it."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from deltamem.config import Settings
from deltamem.core.model import experience_from_dict
from deltamem.embed.hashing import HashingEmbedder
from deltamem.engine.memory import DeltaMem
from deltamem.engine.results import Consolidation
from deltamem.errors import SpaceNotFound
from deltamem.extract.trace import TraceExtractor
from deltamem.store.sqlite import SQLiteStore
from helpers import make_episode

TASKS = ["heat the apple", "heat the red apple", "cool the mug", "clean the plate"]
ACTIONS = ["go to kitchen", "take apple", "open fridge", "heat apple", "look"]
SETTINGS = Settings(tau_task=0.5, tau_env=0.5, k_cons=2, max_depth=3)


def _shape(stats: dict) -> dict:
    return {k: _shape(v) if isinstance(v, dict) else v for k, v in stats.items()
            if k not in ("stored_chars", "compression")}


class MemoryMachine(RuleBasedStateMachine):
    """Drives one in-memory DeltaMem with random operations and checks its invariants."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="deltamem-stateful-"))
        self.mem = self.open()
        self.written: dict[str, object] = {}
        self.episodes = 0
        self.copies = 0

    def open(self, file: str = "m.db") -> DeltaMem:
        return DeltaMem(SQLiteStore(self.dir / file), HashingEmbedder(64), TraceExtractor(),
                        settings=SETTINGS)

    def compiled(self, done: list[Consolidation]) -> None:
        """A new root holds exactly its source's composition (the trace extractor compiles
        nothing away) and keeps the chain it came from as its lineage; the source, and the
        ancestors it left without a child, are retired into it: gone from the live tree, kept
        in the history with the experience that wrote them."""
        history = {n["id"]: (e["detail"]["into"], experience_from_dict(n["experience"]))
                   for e in self.mem.store.audit_log(self.mem.space) if e["action"] == "retire"
                   for n in e["detail"]["nodes"]}
        for c in done:
            assert c.root is not None
            experience = self.written[c.source]
            assert self.mem.experience(c.root) == experience
            lineage = self.mem.get(c.root).lineage
            assert lineage[-1] == c.source
            retired = [i for i in lineage if history.get(i, ("",))[0] == c.root]
            assert retired[-1] == c.source
            for node_id in retired:
                assert history[node_id][1] == self.written.pop(node_id)
            self.written[c.root] = experience

    @rule(task=st.sampled_from(TASKS), actions=st.lists(st.sampled_from(ACTIONS), min_size=1,
                                                         max_size=5),
          success=st.booleans(), room=st.sampled_from(["kitchen", "pantry"]))
    def learn(self, task, actions, success, room):
        result = self.mem.learn(make_episode(task=task, actions=tuple(actions), success=success,
                                             env=f"a {room} with a fridge"))
        self.episodes += 1
        for write in (result.task, result.env):
            if write.action != "dedup":
                self.written[write.node] = write.experience
            assert (write.action == "delta") == (write.parent is not None)
        self.compiled(result.consolidated)

    @rule()
    def consolidate(self):
        self.compiled(self.mem.consolidate().consolidated)

    @rule()
    def reopen(self):
        """A new handle on the file (indexes rebuilt from the database) sees the same trees."""
        self.mem.close()
        self.mem = self.open()

    @rule()
    def export_import(self):
        """An export imported into a new space is the same memory, node for node."""
        path = self.dir / "x.jsonl"
        if not self.mem.exists:  # nothing learned yet: no space, and no file written
            with pytest.raises(SpaceNotFound):
                self.mem.export(path)
            assert not path.exists()
            return
        self.mem.export(path)
        self.copies += 1
        copy = self.open(f"copy{self.copies}.db")
        try:
            copy.import_(path)
            assert copy.check() == []
            # the same trees and texts; the characters may differ by the digits of the text
            # numbers, which the copy assigns afresh
            assert _shape(copy.stats().wire()) == _shape(self.mem.stats().wire())
            for node_id, experience in self.written.items():
                assert copy.experience(node_id) == experience
        finally:
            copy.close()

    @rule(data=st.data())
    def delete(self, data):
        nodes = [n.id for n in self.mem.nodes()]
        if nodes:
            for gone in self.mem.delete(data.draw(st.sampled_from(nodes))).deleted:
                self.written.pop(gone, None)

    @invariant()
    def sound(self):
        assert self.mem.check() == []
        for node_id, experience in self.written.items():
            assert self.mem.experience(node_id) == experience
        nodes = list(self.mem.nodes())
        assert max((n.depth for n in nodes), default=0) <= 3
        stats = self.mem.stats().wire()
        assert stats["episodes"] == self.episodes
        for tree in ("task", "env"):
            mine = [n for n in nodes if n.tree.value == tree]
            assert stats[tree]["nodes"] == len(mine)
            assert stats[tree]["roots"] == sum(n.is_root for n in mine)
        # Every episode counts once on the node it matched in each tree, so no node has more
        # hits than there were episodes, and hits add up from successes and failures.
        assert all(n.hits == n.successes + n.failures <= self.episodes for n in nodes)

    def teardown(self):
        self.mem.close()
        shutil.rmtree(self.dir, ignore_errors=True)


TestMemoryMachine = MemoryMachine.TestCase
TestMemoryMachine.settings = settings(max_examples=30, stateful_step_count=20)
