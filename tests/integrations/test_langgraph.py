"""DeltaMemStore: a real LangGraph graph (StateGraph, compiled with the store) learning and
recalling through deltamem, sync and async, and the BaseStore operations on their own."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore, InvalidNamespaceError

from deltamem.embed.hashing import HashingEmbedder
from deltamem.formats.episodes import episode_to_dict
from deltamem.integrations.langgraph import DeltaMemStore, namespace_for, space_for
from helpers import TEST_SETTINGS, make_episode

KITCHEN = "a kitchen with a fridge, a microwave and a table"
EXPLORE = ("look around", "go to kitchen", "take apple", "heat apple")


class State(TypedDict, total=False):
    user: str
    task: str
    env: str
    recalled: list[str]
    steps: list[str]


def recall_node(state: State, *, store: BaseStore) -> dict[str, Any]:
    found = store.search(("agent", state["user"]), query=state["task"], limit=5)
    skills = [hit for hit in found if hit.value["tree"] == "task"
              and hit.value["outcome"] == "success" and (hit.score or 0) >= 0.6]
    steps = skills[0].value["experience"]["steps"] if skills else []
    return {"recalled": steps}


def act_node(state: State) -> dict[str, Any]:
    """A scripted agent (a test double for the model): follows the recalled skill, or
    explores when it has none."""
    return {"steps": list(state.get("recalled") or EXPLORE)}


def learn_node(state: State, *, store: BaseStore) -> dict[str, Any]:
    steps = [{"action": a, "observation": f"You {a}."} for a in state["steps"]]
    store.put(("agent", state["user"]), f"run-{len(steps)}-{state['task']}",
              {"task": state["task"], "env": state["env"], "success": True, "steps": steps})
    return {}


async def alearn_node(state: State, *, store: BaseStore) -> dict[str, Any]:
    steps = [{"action": a, "observation": f"You {a}."} for a in state["steps"]]
    await store.aput(("agent", state["user"]), "async-run",
                     {"task": state["task"], "env": state["env"], "success": True,
                      "steps": steps})
    return {}


async def arecall_node(state: State, *, store: BaseStore) -> dict[str, Any]:
    found = await store.asearch(("agent", state["user"]), query=state["task"], limit=5)
    skills = [hit for hit in found if hit.value["tree"] == "task" and (hit.score or 0) >= 0.6]
    return {"recalled": skills[0].value["experience"]["steps"] if skills else []}


def graph(store: BaseStore, *, asynchronous: bool = False) -> Any:
    builder = StateGraph(State)
    builder.add_node("recall", arecall_node if asynchronous else recall_node)
    builder.add_node("act", act_node)
    builder.add_node("learn", alearn_node if asynchronous else learn_node)
    builder.add_edge(START, "recall")
    builder.add_edge("recall", "act")
    builder.add_edge("act", "learn")
    builder.add_edge("learn", END)
    return builder.compile(store=store)


@pytest.fixture
def store(tmp_path: Path) -> Any:
    with DeltaMemStore(tmp_path / "lg.db", embedder=HashingEmbedder(),
                       settings=TEST_SETTINGS) as s:
        yield s


def test_a_langgraph_graph_learns_then_recalls_through_the_store(store: DeltaMemStore) -> None:
    app = graph(store)
    first = app.invoke({"user": "alice", "task": "heat the apple", "env": KITCHEN})
    assert first["recalled"] == [] and first["steps"] == list(EXPLORE)
    second = app.invoke({"user": "alice", "task": "heat the apple", "env": KITCHEN})
    assert second["recalled"] == list(EXPLORE)  # the skill learned by the first run
    other = app.invoke({"user": "bob", "task": "heat the apple", "env": KITCHEN})
    assert other["recalled"] == []  # namespaces are separate spaces
    assert store.list_namespaces() == [("agent", "alice"), ("agent", "bob")]
    assert store.memory(("agent", "alice")).stats().task.nodes >= 1


def test_the_async_graph_uses_abatch(store: DeltaMemStore) -> None:
    app = graph(store, asynchronous=True)

    async def run() -> tuple[dict[str, Any], dict[str, Any]]:
        first = await app.ainvoke({"user": "carol", "task": "heat the apple", "env": KITCHEN})
        second = await app.ainvoke({"user": "carol", "task": "heat the apple", "env": KITCHEN})
        return first, second

    first, second = asyncio.run(run())
    assert first["recalled"] == [] and second["recalled"] == list(EXPLORE)
    item = asyncio.run(store.aget(("agent", "carol"), "async-run"))
    assert item is not None and item.value["task"] == "heat the apple"


def test_put_get_search_delete(store: DeltaMemStore) -> None:
    ns = ("users", "u-1", "memories")
    episode = episode_to_dict(make_episode())
    store.put(ns, "first", episode)
    item = store.get(ns, "first")
    assert item is not None and item.key == "first" and item.namespace == ns
    assert item.value == {k: episode[k] for k in ("task", "env", "success", "steps", "score")}

    hits = store.search(("users",), query="heat the apple")
    assert hits and hits[0].value["kind"] == "experience"
    assert {h.value["tree"] for h in hits} == {"task", "env"}
    skill = next(h for h in hits if h.value["tree"] == "task")
    assert "take apple" in skill.value["experience"]["steps"]
    assert "take apple" in skill.value["context"] and skill.score is not None
    node = store.get(ns, skill.key)
    assert node is not None and node.value["node"] == skill.key

    listed = store.search(ns)
    assert [i.key for i in listed] == ["first"]
    assert store.search(ns, filter={"task": "heat the apple"})[0].key == "first"
    assert store.search(ns, filter={"task": "something else"}) == []

    store.delete(ns, "first")
    assert store.get(ns, "first") is None
    assert store.get(ns, skill.key) is None  # what it taught is forgotten
    assert store.search(ns) == []
    assert not [h for h in store.search(ns, query="heat the apple") if h.value["tree"] == "task"]


def test_transcript_values_and_refused_values(store: DeltaMemStore) -> None:
    ns = ("chat",)
    store.put(ns, "t1", {"success": True, "env": KITCHEN, "messages": [
        {"role": "user", "content": "heat the apple"},
        {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {
            "name": "heat", "arguments": "{\"item\": \"apple\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "The apple is hot."},
        {"role": "assistant", "content": "Done."}]})
    item = store.get(ns, "t1")
    assert item is not None and item.value["task"] == "heat the apple"
    with pytest.raises(ValueError, match="a DeltaMemStore value is an episode"):
        store.put(ns, "bad", {"text": "user likes dark mode"})
    assert store.get(ns, "bad") is None


def test_namespaces_map_to_spaces_reversibly() -> None:
    for namespace in [("a",), ("agent", "alice"), ("user@example.com", "köln", "a.b_c")]:
        space = space_for(namespace)
        assert space.startswith("lg.") and namespace_for(space) == namespace
    assert namespace_for("default") is None
    assert namespace_for("lg.bad_zz") is None  # a space named by hand, not by this store
    with pytest.raises(InvalidNamespaceError):
        space_for(("x" * 80,))
    with pytest.raises(InvalidNamespaceError):
        space_for(())


def _episode(i: int, score: float, user: str, steps: int = 2) -> dict[str, Any]:
    return {"task": f"task {i}", "env": KITCHEN, "success": True, "score": score,
            "steps": [{"action": f"step {j}", "observation": "ok"} for j in range(steps)],
            "meta": {"user": user, "run": i}}


FILTERS: list[dict[str, Any]] = [
    {"score": {"$gt": 0.5}}, {"score": {"$gte": 0.5}}, {"score": {"$lt": 0.5}},
    {"score": {"$lte": 0.5}}, {"score": {"$eq": 0.5}}, {"score": {"$ne": 0.5}},
    {"score": {"$gt": 0.2, "$lt": 0.8}}, {"meta": {"user": "alice"}},
    {"meta": {"run": {"$gte": 2}}}, {"success": True, "score": 0.5}, {"task": "task 3"},
    {"steps": [{"action": "step 0", "observation": "ok"},
               {"action": "step 1", "observation": "ok"}]},
    {"missing": {"$gt": 1}},
]


@pytest.mark.parametrize("wanted", FILTERS, ids=[str(f) for f in FILTERS])
def test_filters_follow_langgraphs_in_memory_store(store: DeltaMemStore,
                                                   wanted: dict[str, Any]) -> None:
    """The same puts, searched with the same filter (operators, nested objects, lists), find
    the same keys in DeltaMemStore as in LangGraph's own InMemoryStore ($gt and $eq found
    nothing before). A missing field fails a comparison (InMemoryStore raises instead)."""
    from langgraph.store.memory import InMemoryStore

    reference = InMemoryStore()
    ns = ("agent", "filters")
    for i, (score, user) in enumerate([(0.1, "alice"), (0.5, "bob"), (0.9, "alice"),
                                       (0.5, "carol")]):
        value = _episode(i, score, user)
        store.put(ns, f"k{i}", value)
        reference.put(ns, f"k{i}", {**value, "meta": value["meta"]})
    ours = {item.key for item in store.search(ns, filter=wanted, limit=100)}
    if "missing" in wanted:
        assert ours == set()
        return
    theirs = {item.key for item in reference.search(ns, filter=wanted, limit=100)}
    assert ours == theirs
    if wanted == {"score": {"$gt": 0.5}}:
        assert ours == {"k2"}
    with pytest.raises(ValueError, match="operator"):
        store.search(ns, filter={"score": {"$in": [0.5]}})


def test_listing_is_the_latest_put_per_key_newest_first(store: DeltaMemStore) -> None:
    """Without a query, search lists the latest value put under each key (a second put under
    a key replaces the listed one; a deleted key is gone), newest first, with offset and
    limit, as InMemoryStore does; the deletion goes through the facade (DeltaMem.unlearn) and
    its record is redacted."""
    ns = ("agent", "list")
    for i in range(5):
        store.put(ns, f"k{i}", _episode(i, 0.5, "alice"))
    store.put(ns, "k1", _episode(11, 0.7, "alice"))
    store.delete(ns, "k3")
    listed = store.search(ns, limit=10)
    assert [i.key for i in listed] == ["k1", "k4", "k2", "k0"]
    assert listed[0].value["task"] == "task 11"
    assert [i.key for i in store.search(ns, offset=1, limit=2)] == ["k4", "k2"]
    assert store.get(ns, "k3") is None and store.get(ns, "k1").value["score"] == 0.7
    mem = store.memory(ns)
    assert [r.meta for r in mem.episodes() if r.id.startswith("x-")] == [
        {"langgraph_key": "k3", "langgraph_deleted": True}]


def test_listing_and_search_read_the_store_in_batches(store: DeltaMemStore,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Listing reads the episode log once, whatever the number of items (it was quadratic:
    one log scan per key), and a query search reads its candidates' chains in one batch (it
    fetched nodes one by one). Counted as store calls, not timed."""
    ns = ("agent", "batched")
    for i in range(12):
        store.put(ns, f"k{i}", _episode(i, 0.5, "alice"))
    backing = store.memory(ns).store
    calls: dict[str, int] = {}
    for name in ("episodes", "chains", "chain", "get_node"):
        method = getattr(backing, name)

        def counted(*args: Any, _name: str = name, _method: Any = method, **kwargs: Any) -> Any:
            calls[_name] = calls.get(_name, 0) + 1
            return _method(*args, **kwargs)

        monkeypatch.setattr(backing, name, counted)
    assert len(store.search(ns, limit=100)) == 12
    assert calls == {"episodes": 1}
    reads = []
    for limit in (2, 10):
        calls.clear()
        hits = store.search(ns, query="task 3", limit=limit)
        reads.append((len(hits), dict(calls)))
    (few, few_calls), (many, many_calls) = reads
    assert few < many and few_calls == many_calls  # as many reads for 10 items as for 2
    assert many_calls.get("get_node", 0) == 0
