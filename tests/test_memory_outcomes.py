"""Facade methods the agent integrations use: record_outcome, list_nodes, consolidate dry run."""

from __future__ import annotations

import pytest

from deltamem.config import Settings
from deltamem.core.model import NodeKind, Outcome, Tree
from deltamem.core.tree import Action, Placement, chain_evidence
from deltamem.embed.hashing import HashingEmbedder
from deltamem.engine.memory import DeltaMem
from deltamem.errors import NodeNotFound
from deltamem.extract.trace import TraceExtractor
from deltamem.store.sqlite import SQLiteStore
from helpers import TEST_SETTINGS, make_episode

LONGER = ("go to kitchen", "open microwave", "take apple", "heat apple")


def test_record_outcome_counts_on_the_recalled_nodes(mem):
    """A recall's matched node in each tree gets a hit and a success (or a failure)."""
    mem.learn(make_episode())
    recall = mem.recall("heat the apple", "a kitchen with a fridge, a microwave and a table")
    task_node, env_node = recall.task.node, recall.env.node
    before = mem.get(task_node)
    record = mem.record_outcome(recall, success=True)
    assert record.nodes == [task_node, env_node] and record.success
    after = mem.get(task_node)
    assert (after.hits, after.successes) == (before.hits + 1, before.successes + 1)
    mem.record_outcome([task_node], success=False)
    assert mem.get(task_node).failures == before.failures + 1
    assert record.wire() == {"nodes": [task_node, env_node], "success": True,
                                "consolidated": [], "deferred": []}


SHOES = ("open shoe cabinet", "take brown shoes", "put brown shoes in shoe cabinet")
COATS = ("take gray coat", "put gray coat in coat hanger", "look at coat hanger")
TIDY = "pick up objects, then place them in their usual locations"
HALL = "a corridor with a shoe cabinet"


def test_learn_with_the_recall_counts_the_outcome_on_the_recalled_skill(mem):
    """The skill the agent was handed carries the episode's outcome even when the episode is
    placed elsewhere; learning without the recall counts only where the episode goes."""
    shoes = mem.learn(make_episode(task=TIDY, actions=SHOES)).task.node
    recall = mem.recall(TIDY, HALL)
    assert recall.task.node == shoes
    result = mem.learn(make_episode(task=TIDY, actions=COATS, success=False, env=HALL), recall)
    assert result.recalled[0] == shoes and result.task.matched != shoes
    assert result.wire()["recalled"] == result.recalled
    assert (mem.get(shoes).hits, mem.get(shoes).failures) == (1, 1)
    mem.learn(make_episode(task=TIDY, actions=COATS, success=False))
    assert mem.get(shoes).failures == 1


def test_a_skill_followed_in_failed_episodes_loses_its_rank(mem):
    """One game's win recalled in every later game (same task text) used to be handed out
    however often it failed; once its record is mostly failures it scores like a failure, and
    the other skill wins. Explain shows why."""
    skills = {mem.learn(make_episode(task=TIDY, actions=a, env=HALL)).task.node
              for a in (COATS, SHOES)}
    first = mem.recall(TIDY, HALL).task.node
    (other,) = skills - {first}
    record = chain_evidence([mem.get(first)])  # its writer, and the other one if placed under it
    for _ in range(record.successes - record.failures + 1):
        recall = mem.recall(TIDY, HALL)
        assert recall.task.node == first
        mem.learn(make_episode(task=TIDY, actions=("inventory", "look"),
                                success=False, env=HALL), recall)
    recall = mem.recall(TIDY, HALL, top_k=4)
    assert recall.task.node == other
    rows = {r["id"]: r for r in recall.task.explain()["candidates"]}
    assert rows[first]["discredited"] and rows[first]["penalty"] == TEST_SETTINGS.penalty
    assert rows[first]["score"] < rows[other]["score"] and not rows[other]["discredited"]
    # record_outcome feeds the same record: failed uses discredit the other skill too.
    record = chain_evidence([mem.get(other)])
    for _ in range(record.successes - record.failures + 1):
        mem.record_outcome([other], success=False)
    # Both skills now tie with the lesson (same vector, scored as failures): the newer node wins.
    best = mem.recall(TIDY, HALL).task.best
    assert best is not None and best.failure and best.id not in skills


def test_record_outcome_on_unknown_node_counts_nothing(mem):
    node = mem.learn(make_episode()).task.node
    hits = mem.get(node).hits
    with pytest.raises(NodeNotFound):
        mem.record_outcome([node, "t-missing"], success=True)
    assert mem.get(node).hits == hits


def test_record_outcome_successes_consolidate_a_chain(tmp_path):
    """Successes reported without episodes make a delta due, and it is compiled."""
    settings = Settings(tau_task=0.6, tau_env=0.6, k_cons=2)
    with DeltaMem(SQLiteStore(tmp_path / "o.db"), HashingEmbedder(), TraceExtractor(),
                  settings=settings) as mem:
        mem.learn(make_episode())
        delta = mem.learn(make_episode(actions=LONGER)).task.node
        mem.record_outcome([delta], success=True)
        record = mem.record_outcome([delta], success=True)
        assert [c.source for c in record.consolidated] == [delta]
        assert delta not in {n.id for n in mem.nodes()}  # retired into the new root
        assert mem.get(record.consolidated[0].root).lineage[-1] == delta


def test_consolidate_dry_run_lists_due_chains_and_writes_nothing(tmp_path):
    settings = Settings(tau_task=0.6, tau_env=0.6, auto_consolidate=False, k_cons=2)
    with DeltaMem(SQLiteStore(tmp_path / "d.db"), HashingEmbedder(), TraceExtractor(),
                  settings=settings) as mem:
        root = mem.learn(make_episode()).task.node
        delta = mem.learn(make_episode(actions=LONGER)).task.node
        for _ in range(2):
            mem.learn(make_episode(actions=LONGER))
        count = len(list(mem.nodes()))
        due = [c for c in mem.consolidate(dry_run=True).consolidated if c.tree == "task"]
        assert [(c.source, c.root, c.chain) for c in due] == [(delta, None, [root, delta])]
        assert len(list(mem.nodes())) == count and not mem.get(delta).consolidated
        done = [c for c in mem.consolidate().consolidated if c.tree == "task"]
        assert [c.source for c in done] == [delta] and done[0].root is not None


def test_list_nodes_filters_by_tree_kind_outcome_and_text(mem):
    mem.learn(make_episode())
    mem.learn(make_episode(actions=LONGER))
    mem.learn(make_episode(task="wash the plate", actions=("go to sink", "wash plate"),
                           success=False))
    rows = mem.list_nodes().nodes
    assert {r.tree for r in rows} == {"task", "env"}
    task_rows = mem.list_nodes(Tree.TASK).nodes
    assert len(task_rows) == 3
    assert [r.key for r in mem.list_nodes(Tree.TASK, outcome=Outcome.FAILURE).nodes] == [
        "wash the plate"]
    assert len(mem.list_nodes(Tree.TASK, kind=NodeKind.DELTA).nodes) == 1
    assert [r.key for r in mem.list_nodes(Tree.TASK, contains="PLATE").nodes] == [
        "wash the plate"]
    assert set(task_rows[0].wire()) >= {"id", "kind", "outcome", "key", "parent", "depth", "hits"}


def test_discredited_skills_beyond_the_scan_pool_give_way_to_the_next(tmp_path):
    """Re-scoring may drop every pooled candidate below one the scan left out: the scan is
    widened until the answer is exact (the rule itself: tests/core/test_ranking.py)."""
    from deltamem.core.ranking import POOL

    with DeltaMem(SQLiteStore(tmp_path / "p.db"), HashingEmbedder(), TraceExtractor(),
                  settings=TEST_SETTINGS) as mem:
        mem.placer = lambda new, chains, *, max_depth=0: (Placement(Action.ROOT), None)
        oldest, *newer = (mem.learn(make_episode(task=TIDY, actions=(f"take item {i}",),
                                                 env=HALL)).task.node for i in range(POOL + 2))
        assert mem.recall(TIDY, HALL).task.node == newer[-1]
        with mem.transaction():
            for node in newer:
                mem.store.bump(mem.space, node, hits=2, failures=2)
        recall = mem.recall(TIDY, HALL, top_k=2)
        assert recall.task.node == oldest
        assert [c.discredited for c in recall.task.candidates] == [False, True]
