"""The facade end to end on SQLite with the trace extractor and the hashing test embedder."""

from __future__ import annotations

import pytest

from deltamem._util.usage import Usage
from deltamem.config import Settings
from deltamem.core.model import Lesson, Skill, experience_from_dict
from deltamem.embed.hashing import HashingEmbedder
from deltamem.engine.memory import DeltaMem
from deltamem.errors import EmbedderMismatch, NodeNotFound
from deltamem.extract.trace import TraceExtractor
from deltamem.store.sqlite import SQLiteStore
from helpers import TEST_SETTINGS, make_episode

LONGER = ("go to kitchen", "open microwave", "take apple", "heat apple")


def test_first_episode_writes_roots_and_recall_finds_them(mem):
    """Cold start: both trees get a root; recall composes them into the prompt context."""
    result = mem.learn(make_episode())
    assert (result.task.action, result.env.action) == ("root", "root")
    recall = mem.recall("heat the apple", "a kitchen with a fridge, a microwave and a table")
    assert recall.task.matched and recall.env.matched
    assert recall.task.experience == Skill("heat the apple",
                                           ("go to kitchen", "take apple", "heat apple"),
                                           "You heat apple.")
    assert "1. go to kitchen" in recall.context and "Scene knowledge" in recall.context
    assert result.usage.embed_calls == 1 and result.usage.llm_calls == 0


def test_repeat_is_dedup_and_variation_is_a_delta(mem):
    """The same episode again writes nothing; a variation writes the exact residual."""
    first = mem.learn(make_episode())
    again = mem.learn(make_episode())
    assert again.task.action == "dedup" and again.task.node == first.task.node
    varied = mem.learn(make_episode(actions=LONGER))
    assert varied.task.action == "delta" and varied.task.parent == first.task.node
    assert mem.experience(varied.task.node).steps == LONGER
    assert mem.get(first.task.node).hits == 2


def test_failure_is_a_penalised_lesson(mem):
    """A failed episode under a matched skill is stored as a lesson and rendered as a warning."""
    mem.learn(make_episode())
    failed = mem.learn(make_episode(task="heat the apple", actions=("look",), success=False))
    node = mem.get(failed.task.node)
    assert node.outcome == "failure"
    # The failing step keeps its reply; what the matched skill did and this attempt did not is
    # recorded as untried.
    assert mem.experience(node.id) == Lesson(
        "heat the apple", ('look (step 1) -> "You look."',),
        untried=("go to kitchen", "take apple", "heat apple"))
    recall = mem.recall("heat the apple", "")
    # The success root wins over the failure: equal similarity, but the failure is penalised.
    assert recall.task.matched_node.outcome == "success"
    explained = recall.to_dict(explain=True)["explain"]["task"]["candidates"]
    assert explained[0]["score"] >= TEST_SETTINGS.tau_task


def test_failure_match_renders_warning_not_steps(tmp_path):
    """When the best match is a lesson, the context warns and does not instruct."""
    with DeltaMem(SQLiteStore(tmp_path / "f.db"), HashingEmbedder(), TraceExtractor(),
                  settings=TEST_SETTINGS) as mem:
        mem.learn(make_episode(task="cool the mug", actions=("look", "go north"), success=False))
        recall = mem.recall("cool the mug", "")
        assert recall.task.matched and recall.task.matched_node.outcome == "failure"
        assert "FAILED" in recall.context and "1. look" not in recall.context
        assert recall.to_dict()["task"]["skill"] is None
        lesson = recall.to_dict()["task"]["lesson"]
        assert lesson["failed"] == ['go north (step 2) -> "You go north."']
        assert lesson["worked"] == ["look"]


def test_unrelated_task_does_not_match(mem):
    """Below the threshold nothing is recalled and no context is produced."""
    mem.learn(make_episode())
    recall = mem.recall("water the plant in the greenhouse", "a greenhouse with seeds")
    assert not recall.task.matched and not recall.env.matched
    assert recall.context == ""
    assert recall.task.best is not None and recall.task.best.score < TEST_SETTINGS.tau_task


def test_consolidation_after_k_successes(mem):
    """K successes on a delta compile its chain into a new root with lineage; the chain it
    replaces (the delta, and its root, left without another child) leaves the live tree for
    the audit log's history, with the experiences they composed to."""
    root = mem.learn(make_episode()).task.node
    delta = mem.learn(make_episode(actions=LONGER)).task.node
    before = {root: mem.experience(root), delta: mem.experience(delta)}
    results = [mem.learn(make_episode(actions=LONGER)) for _ in range(3)]
    consolidated = results[-1].consolidated
    assert [c.source for c in consolidated if c.tree == "task"] == [delta]
    new_root = mem.get(consolidated[0].root)
    assert new_root.is_consolidated_root and new_root.lineage == (root, delta)
    assert new_root.content == before[delta]
    assert {n.id for n in mem.nodes()}.isdisjoint({root, delta})
    # an id the agent still holds answers as the root that replaced it
    assert mem.get(delta).id == mem.get(root).id == new_root.id
    assert mem.chain(delta) == [new_root]
    assert mem.record_outcome([delta, root], success=False).nodes == [new_root.id]
    assert mem.get(new_root.id).failures == 1
    with pytest.raises(NodeNotFound):
        mem.get("t-never")
    history = [e["detail"] for e in mem.store.audit_log(mem.space) if e["action"] == "retire"]
    task = next(h for h in history if h["into"] == new_root.id)
    assert [(n["id"], experience_from_dict(n["experience"])) for n in task["nodes"]] == [
        (delta, before[delta]), (root, before[root])]
    # The consolidated root now answers recall for the chain it replaced.
    assert mem.recall("heat the apple", "").task.node == new_root.id
    assert mem.check() == []


def test_manual_consolidate_and_no_double_compilation(tmp_path):
    """consolidate() compiles what is due exactly once."""
    settings = Settings(tau_task=0.6, tau_env=0.6, auto_consolidate=False, k_cons=2)
    with DeltaMem(SQLiteStore(tmp_path / "c.db"), HashingEmbedder(), TraceExtractor(),
                  settings=settings) as mem:
        mem.learn(make_episode())
        mem.learn(make_episode(actions=LONGER))
        for _ in range(2):
            mem.learn(make_episode(actions=LONGER))
        assert len([c for c in mem.consolidate().consolidated if c.tree == "task"]) == 1
        assert [c for c in mem.consolidate().consolidated if c.tree == "task"] == []


def test_max_depth_turns_deltas_into_siblings(tmp_path):
    """A chain never grows past max_depth."""
    settings = Settings(tau_task=0.3, tau_env=0.3, max_depth=2, auto_consolidate=False)
    with DeltaMem(SQLiteStore(tmp_path / "d.db"), HashingEmbedder(), TraceExtractor(),
                  settings=settings) as mem:
        for i in range(6):
            mem.learn(make_episode(task=f"heat the apple {'again ' * i}",
                                   actions=("go to kitchen",) + ("take apple",) * (i + 1)))
        assert max(n.depth for n in mem.nodes()) == 2
        assert mem.check() == []


def test_every_node_composes_to_the_experience_that_wrote_it(mem):
    """Exactness: each node's composition equals its episode's extracted experience."""
    extractor = TraceExtractor()
    episodes = [make_episode(actions=a) for a in
                [("a", "b"), ("a", "c", "b"), ("a",), ("a", "b", "d"), ("x", "y")]]
    episodes.append(make_episode(actions=("a",), success=False))
    for ep in episodes:
        seen = mem.recall(ep.task, ep.env).task.experience
        result = mem.learn(ep)
        if result.task.action != "dedup":
            assert mem.experience(result.task.node) == result.task.experience
            # a lesson also lists the matched skill's steps the episode never played
            assert result.task.experience == (extractor.skill(ep) if ep.success
                                              else extractor.lesson(ep, seen))
        if result.env.action != "dedup":
            assert mem.experience(result.env.node) == result.env.experience
            assert set(extractor.knowledge(ep).facts) <= set(result.env.experience.facts)


def test_stats_reports_compression(mem):
    """stored_chars counts roots and patches; flat_chars the full experiences."""
    for actions in [("a", "b", "c", "d"), ("a", "b", "c", "d", "e"), ("a", "x", "c", "d")]:
        mem.learn(make_episode(actions=actions))
    stats = mem.stats().wire()
    assert stats["episodes"] == 3
    assert stats["task"]["roots"] == 1 and stats["task"]["deltas"] == 2
    assert 0 < stats["stored_chars"] < stats["flat_chars"]


def test_export_import_round_trip(mem, tmp_path):
    """An exported memory imported elsewhere recalls and exports identically."""
    mem.learn(make_episode())
    mem.learn(make_episode(actions=LONGER))
    path = tmp_path / "x.jsonl"
    mem.export(path)
    with DeltaMem(SQLiteStore(tmp_path / "copy.db"), HashingEmbedder(), TraceExtractor(),
                  settings=TEST_SETTINGS) as copy:
        assert copy.import_(path).wire() == {"nodes": 4, "episodes": 2}
        copy.export(tmp_path / "y.jsonl")
        assert (tmp_path / "y.jsonl").read_text() == path.read_text()
        assert copy.recall("heat the apple").to_dict()["task"] == \
            mem.recall("heat the apple").to_dict()["task"]


def test_reopening_with_another_embedder_is_refused(db_path, mem):
    """Vectors from two embedders never mix in one space."""
    mem.learn(make_episode())
    with pytest.raises(EmbedderMismatch, match="hashing-256"):
        DeltaMem(SQLiteStore(db_path), HashingEmbedder(dim=64), TraceExtractor())


def test_delete_and_forget(mem):
    """delete removes a subtree; forget empties the space; both are audited."""
    root = mem.learn(make_episode()).task.node
    child = mem.learn(make_episode(actions=LONGER)).task.node
    assert sorted(mem.delete(root).deleted) == sorted([root, child])
    with pytest.raises(NodeNotFound):
        mem.show(child)
    # Left: the two environment nodes (the same scene, the longer episode's new observation).
    assert [n.tree.value for n in mem.nodes()] == ["env", "env"]
    assert mem.forget().deleted_nodes == 2
    assert list(mem.nodes()) == []
    assert [a["action"] for a in mem.store.audit_log(mem.space)] == ["delete_subtree",
                                                                     "forget_space"]


def test_show_reports_chain_patch_and_counters(mem):
    """show() returns the CLI contract's fields."""
    mem.learn(make_episode())
    node = mem.learn(make_episode(actions=LONGER)).task.node
    shown = mem.show(node).wire()
    assert set(shown) >= {"id", "tree", "kind", "outcome", "parent", "chain", "experience",
                          "patch", "stats"}
    assert shown["kind"] == "delta" and len(shown["chain"]) == 2
    assert shown["experience"]["steps"] == list(LONGER)
    assert shown["patch"] == [["splice", "steps", 1, 1, ["open microwave"]]]


def test_a_chain_another_writer_retires_mid_compile_is_left_to_it(tmp_path):
    """Two handles compile the same due chain: the one whose node is retired between its read
    and its write (the other got there first) compiles nothing and raises nothing."""
    settings = Settings(tau_task=0.6, tau_env=0.6, auto_consolidate=False, k_cons=2)
    db = tmp_path / "race.db"

    class RetiredMidwayDouble(SQLiteStore):
        """A store whose first vector read lets the other handle consolidate first."""

        other: DeltaMem | None = None

        def vector(self, space, node_id):
            if self.other is not None:
                other, self.other = self.other, None
                other.consolidate()
            return super().vector(space, node_id)

    with DeltaMem(SQLiteStore(db), HashingEmbedder(), TraceExtractor(),
                  settings=settings) as first:
        first.learn(make_episode())
        delta = first.learn(make_episode(actions=LONGER)).task.node
        for _ in range(2):
            first.learn(make_episode(actions=LONGER))
        store = RetiredMidwayDouble(db)
        with DeltaMem(store, HashingEmbedder(), TraceExtractor(), settings=settings) as second:
            store.other = first
            assert second.consolidator.if_due(delta, Usage()) == []
            roots = [n for n in second.nodes() if n.is_consolidated_root and n.tree == "task"]
            assert [n.lineage[-1] for n in roots] == [delta]
