"""Metadata filters on recall and listing (``user``, ``agent``, ``run``, ``project``, free keys),
on both stores.

A filtered recall must be exact: it equals an unfiltered recall over a memory that holds only
the matching nodes (same keys, same vectors, same counters), also when more than a scan's page
of better, non-matching candidates stands in front of the best matching one.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest

from deltamem.core.model import Knowledge, Skill, Tree
from deltamem.core.ranking import POOL, check_filters, matches
from deltamem.embed.hashing import HashingEmbedder
from deltamem.engine.memory import DeltaMem
from deltamem.errors import ConfigError
from deltamem.extract.trace import TraceExtractor
from deltamem.store import open_store
from helpers import TEST_SETTINGS, make_episode
from pg_fixture import pg_server, pg_url  # noqa: F401 - fixtures

KITCHEN = "a kitchen with a fridge, a microwave and a table"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[Any]:
    """A fresh database: a SQLite file, or a fresh schema on the real PostgreSQL server."""
    if request.param == "sqlite":
        yield str(tmp_path / "mem.db")
    else:
        yield request.getfixturevalue("pg_url")


def memory(url: str, space: str = "default") -> DeltaMem:
    return DeltaMem(open_store(url), HashingEmbedder(), TraceExtractor(), space=space,
                    settings=TEST_SETTINGS)


def test_recall_and_list_keep_only_the_matching_user(url: str) -> None:
    """Alice's and Bob's episodes share one space: each one's filter finds only their own
    nodes, in both trees; a filter nobody matches finds nothing; no filter finds the best."""
    with memory(url) as mem:
        alice = mem.learn(make_episode(actions=("go to kitchen", "take apple", "heat apple"),
                                       user="alice", project="shop", run=1))
        bob = mem.learn(make_episode(actions=("open fridge", "take apple", "use microwave",
                                              "heat apple"),
                                     env="a kitchen with a fridge and an oven",
                                     user="bob", project="shop", run=2))
        for who, learned in (("alice", alice), ("bob", bob)):
            got = mem.recall("heat the apple", KITCHEN, filters={"user": who})
            assert got.task.node is not None and got.task.node == learned.task.node
            assert got.task.matched_node.meta["episode_meta"]["user"] == who
            assert got.env.node is not None and got.env.node == learned.env.node
        both = mem.recall("heat the apple", KITCHEN, filters={"project": "shop"})
        assert both.task.matched and both.env.matched
        # Every key must match, with an equal JSON value (the number 1, not the string "1").
        assert not mem.recall("heat the apple", KITCHEN,
                              filters={"user": "alice", "run": 2}).task.matched
        assert mem.recall("heat the apple", KITCHEN, filters={"run": 1}).task.matched
        assert not mem.recall("heat the apple", KITCHEN, filters={"run": "1"}).task.matched
        nobody = mem.recall("heat the apple", KITCHEN, filters={"user": "carol"})
        assert not nobody.task.matched and not nobody.env.matched and nobody.context == ""
        assert mem.recall("heat the apple", KITCHEN, filters={}).task.matched

        rows = mem.list_nodes(filters={"user": "alice"}).nodes
        assert {r.id for r in rows} == {alice.task.node, alice.env.node}
        assert [r.id for r in mem.list_nodes(Tree.TASK, filters={"user": "bob"}).nodes] == \
            [bob.task.node]
        assert mem.list_nodes(filters={"agent": "x"}).nodes == []
        assert len(mem.list_nodes(filters={"project": "shop"}).nodes) == 4


def test_consolidated_and_corrected_roots_keep_the_episode_meta(url: str) -> None:
    """A root compiled from a user's chain, or correcting a user's node, is found by the same
    filter as the node it came from."""
    with memory(url) as mem:
        mem.learn(make_episode(user="alice"))
        delta = mem.learn(make_episode(actions=("go to kitchen", "open microwave",
                                                "take apple", "heat apple"), user="alice"))
        assert delta.task.action == "delta"
        compiled = [c for _ in range(3)
                    for c in mem.record_outcome([delta.task.node], True).consolidated]
        assert compiled and compiled[0].root is not None
        assert matches(mem.get(compiled[0].root), {"user": "alice"})
        fixed = mem.correct(delta.task.node, steps=["heat apple"], reason="shorter")
        assert matches(mem.get(fixed.node), {"user": "alice"})
        ids = {r.id for r in mem.list_nodes(Tree.TASK, filters={"user": "alice"}).nodes}
        assert {compiled[0].root, fixed.node} <= ids
        assert not mem.list_nodes(Tree.TASK, filters={"user": "bob"}).nodes


WORDS = ("heat", "cool", "apple", "milk", "kitchen", "fridge", "bread", "slice", "wash",
         "plate", "open", "drawer", "find", "knife", "put", "table")


def _roots(seed: int) -> list[tuple[Tree, str, Any, dict[str, Any]]]:
    """Task and environment roots of three users over overlapping keys (ties included)."""
    rng = random.Random(seed)
    out: list[tuple[Tree, str, Any, dict[str, Any]]] = []
    for i in range(90):
        key = " ".join(rng.sample(WORDS, 3)) if i % 5 else "heat the apple"
        meta = {"episode_meta": {"user": rng.choice("abc"), "run": rng.randrange(3)}}
        if i % 2:
            out.append((Tree.TASK, key, Skill(key, (f"step {i}", "finish")), meta))
        else:
            out.append((Tree.ENV, key, Knowledge(key, (f"fact {i}",)), meta))
    return out


def _view(mem: DeltaMem, recall: Any) -> list[Any]:
    """A recall named by content, not ids: per tree the candidates (key, score, discredited)
    and the matched experience."""
    view = []
    for tree_recall in (recall.task, recall.env):
        view.append([(mem.get(c.id).key, mem.get(c.id).content, c.score, c.discredited)
                     for c in tree_recall.candidates])
        view.append(tree_recall.experience)
    return view


@pytest.mark.parametrize("wanted", [{"user": "a"}, {"user": "b", "run": 1}, {"run": 2}])
def test_a_filtered_recall_equals_an_unfiltered_one_over_only_the_matching_nodes(
        url: str, wanted: dict[str, Any]) -> None:
    roots = _roots(7)
    kept = [r for r in roots if matches_meta(r[3], wanted)]
    assert 0 < len(kept) < len(roots)
    with memory(url, "all") as full, memory(url, "some") as some:
        ids_full = full.add_roots(roots)
        ids_some = some.add_roots(kept)
        # Discredit a few skills the same way in both memories (re-scoring, as recall does).
        pairs = {roots[i][1:3]: ids_full[i] for i in range(len(roots))}
        tasks = [j for j, r in enumerate(kept) if r[0] is Tree.TASK and r[1] == "heat the apple"]
        for j in tasks[::2]:
            node_id = ids_some[j]
            if node_id is not None:
                twin = pairs[kept[j][1:3]]
                for _ in range(2):
                    full.record_outcome([twin], False)
                    some.record_outcome([node_id], False)
        index = {id(r): i for i, r in enumerate(roots)}
        twins = {ids_full[index[id(r)]]: ids_some[j] for j, r in enumerate(kept)
                 if ids_full[index[id(r)]] is not None and ids_some[j] is not None}
        seen = {"matched": 0, "discredited": 0}
        for task, env in (("heat the apple", "heat the apple"), ("wash plate", "open fridge"),
                          ("cool milk knife", "bread kitchen slice")):
            for top_k in (1, 5):
                filtered = full.recall(task, env, top_k=top_k, filters=wanted)
                plain = some.recall(task, env, top_k=top_k)
                assert _view(full, filtered) == _view(some, plain)
                seen["matched"] += filtered.task.matched + filtered.env.matched
                seen["discredited"] += sum(c.discredited for c in filtered.task.candidates)
                # The notes name their nodes: the same root has another id in each memory.
                assert _renamed(filtered.context, twins) == plain.context
                for tree_recall in (filtered.task, filtered.env):
                    for c in tree_recall.candidates:
                        assert matches(full.get(c.id), wanted)
        # The comparison reached the threshold and the re-scoring of discredited skills.
        assert seen["matched"] and (seen["discredited"] or not tasks)


def _renamed(text: str, ids: dict[str, str]) -> str:
    """``text`` with each node id of ``ids`` replaced by its twin."""
    for old, new in ids.items():
        text = text.replace(old, new)
    return text


def matches_meta(meta: dict[str, Any], wanted: dict[str, Any]) -> bool:
    return all(meta["episode_meta"].get(k) == v for k, v in wanted.items())


def test_the_scan_widens_past_a_page_of_better_non_matching_candidates(url: str) -> None:
    """More than a scan's page (POOL) of exact, non-matching matches stand before the only
    matching node in both trees: the filtered recall still finds it."""
    key = "heat the apple in the microwave"
    crowd = [(tree, key, Skill(key, (f"bob step {i}",)) if tree is Tree.TASK else
              Knowledge(key, (f"bob fact {i}",)), {"episode_meta": {"user": "bob"}})
             for i in range(2 * POOL + 3) for tree in (Tree.TASK, Tree.ENV)]
    near = "heat the apple"
    mine = [(Tree.TASK, near, Skill(near, ("alice step",)), {"episode_meta": {"user": "alice"}}),
            (Tree.ENV, near, Knowledge(near, ("alice fact",)),
             {"episode_meta": {"user": "alice"}})]
    with memory(url) as mem:
        ids = mem.add_roots(mine + crowd)
        unfiltered = mem.recall(key, key, top_k=3)
        assert unfiltered.task.candidates[0].score > 0.99
        assert ids[0] not in {c.id for c in unfiltered.task.candidates}
        got = mem.recall(key, key, top_k=3, filters={"user": "alice"})
        assert got.task.node is not None and got.task.node == ids[0]
        assert got.env.node is not None and got.env.node == ids[1]
        assert [c.id for c in got.task.candidates] == [ids[0]]
        assert "alice step" in got.context and "bob" not in got.context


def test_bad_filters_are_one_clear_error() -> None:
    assert check_filters(None) == {}
    assert check_filters({"user": "a", "run": 3, "ok": True, "x": None}) == \
        {"user": "a", "run": 3, "ok": True, "x": None}
    for bad, words in (({"user": ["a"]}, "string, number"), ({"": "a"}, "non-empty"),
                       ({str(i): i for i in range(40)}, "at most"), ("user=a", "object")):
        with pytest.raises(ConfigError, match=words):
            check_filters(bad)  # type: ignore[arg-type]


def test_bad_filters_fail_before_anything_is_read(mem: DeltaMem) -> None:
    mem.learn(make_episode(user="alice"))
    with pytest.raises(ConfigError, match="filter 'user'"):
        mem.recall("heat the apple", filters={"user": {"id": 1}})
    with pytest.raises(ConfigError, match="filter 'user'"):
        mem.list_nodes(filters={"user": [1]})


def test_json_equality_keeps_booleans_apart_from_numbers(mem: DeltaMem) -> None:
    mem.learn(make_episode(user="alice", team=1, flag=True))
    assert mem.list_nodes(filters={"team": 1}).nodes
    assert mem.list_nodes(filters={"team": 1.0}).nodes
    assert not mem.list_nodes(filters={"team": True}).nodes
    assert mem.list_nodes(filters={"flag": True}).nodes
    assert not mem.list_nodes(filters={"flag": 1}).nodes
    assert not mem.list_nodes(filters={"missing": None}).nodes


def test_a_duplicate_from_another_scope_is_still_found_by_its_own_filter(url: str) -> None:
    """Bob repeats Alice's episode exactly: instead of vanishing into her node (a dedup that
    his filter would not find), it is written as an empty delta under it with his meta; his
    own repeats then dedup onto that node, and unfiltered recall still shows her original."""
    with memory(url) as mem:
        alice = mem.learn(make_episode(user="alice"))
        bob = mem.learn(make_episode(user="bob"))
        assert bob.task.action == "delta" and bob.task.parent == alice.task.node
        assert bob.task.patch_ops == 0
        assert mem.experience(bob.task.node) == mem.experience(alice.task.node)
        again = mem.learn(make_episode(user="bob"))
        assert again.task.action == "dedup" and again.task.node == bob.task.node
        assert again.env.action == "dedup" and again.env.node == bob.env.node
        unscoped = mem.learn(make_episode())  # no scope: an ordinary dedup on the best
        assert unscoped.task.action == "dedup"
        same = mem.learn(make_episode(user="alice", team="x"))  # free keys do not scope
        assert same.task.action == "dedup" and same.task.node == alice.task.node
        got = mem.recall("heat the apple", KITCHEN, filters={"user": "bob"})
        assert got.task.node is not None and got.task.node == bob.task.node
        assert got.env.node is not None and got.env.node == bob.env.node
        assert mem.recall("heat the apple", KITCHEN).task.node == alice.task.node
        assert mem.check() == []


def test_async_facade_takes_the_same_filters(mem: DeltaMem) -> None:
    import asyncio

    from deltamem.engine.aio import AsyncDeltaMem

    alice = mem.learn(make_episode(user="alice"))
    mem.learn(make_episode(actions=("open fridge", "heat apple"), user="bob"))

    async def run() -> tuple[Any, list[Any]]:
        amem = AsyncDeltaMem(mem)
        return (await amem.recall("heat the apple", KITCHEN, filters={"user": "alice"}),
                (await amem.list_nodes(Tree.TASK, filters={"user": "alice"})).nodes)

    recall, rows = asyncio.run(run())
    assert recall.task.node is not None and recall.task.node == alice.task.node
    assert [r.id for r in rows] == [alice.task.node]
