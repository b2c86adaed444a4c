"""Stateful property test: any sequence of learn / consolidate / delete keeps the trees sound."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from deltamem.config import Settings
from deltamem.embed.hashing import HashingEmbedder
from deltamem.extract.trace import TraceExtractor
from deltamem.memory import DeltaMem
from deltamem.store.sqlite import SQLiteStore
from helpers import make_episode

TASKS = ["heat the apple", "heat the red apple", "cool the mug", "clean the plate"]
ACTIONS = ["go to kitchen", "take apple", "open fridge", "heat apple", "look"]


class MemoryMachine(RuleBasedStateMachine):
    """Drives one in-memory DeltaMem with random operations and checks its invariants."""

    def __init__(self) -> None:
        super().__init__()
        self.mem = DeltaMem(SQLiteStore(":memory:"), HashingEmbedder(64), TraceExtractor(),
                            settings=Settings(tau_task=0.5, tau_env=0.5, k_cons=2, max_depth=3))
        self.written: dict[str, object] = {}

    @rule(task=st.sampled_from(TASKS), actions=st.lists(st.sampled_from(ACTIONS), min_size=1,
                                                         max_size=5),
          success=st.booleans(), room=st.sampled_from(["kitchen", "pantry"]))
    def learn(self, task, actions, success, room):
        result = self.mem.learn(make_episode(task=task, actions=tuple(actions), success=success,
                                             env=f"a {room} with a fridge"))
        for write in (result.task, result.env):
            if write.action != "dedup":
                self.written[write.node] = write.experience
            assert (write.action == "delta") == (write.parent is not None)

    @rule()
    def consolidate(self):
        for c in self.mem.consolidate():
            self.written[c.root] = self.mem.experience(c.root)

    @rule(data=st.data())
    def delete(self, data):
        nodes = [n.id for n in self.mem.nodes()]
        if nodes:
            for gone in self.mem.delete(data.draw(st.sampled_from(nodes))):
                self.written.pop(gone, None)

    @invariant()
    def sound(self):
        assert self.mem.check() == []
        for node_id, experience in self.written.items():
            assert self.mem.experience(node_id) == experience
        assert max((n.depth for n in self.mem.nodes()), default=0) <= 3

    def teardown(self):
        self.mem.close()


TestMemoryMachine = MemoryMachine.TestCase
TestMemoryMachine.settings = settings(max_examples=60, stateful_step_count=25, deadline=None)
