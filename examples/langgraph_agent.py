"""A LangGraph agent whose long-term memory is deltamem (`pip install 'deltamem[langgraph]'`).

    python examples/langgraph_agent.py [--embedder static]

A StateGraph recall -> act -> learn, compiled with :class:`DeltaMemStore` as its store: the
recall node searches the user's namespace for a skill, the act node does the task, the learn
node puts the finished episode. The act node here is a scripted stand-in for a model call (so
the example runs offline): it follows a recalled skill, else it explores. The second run of the
same task follows what the first one learned. The embedder is ``static`` (shipped, fast).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore

from deltamem.integrations.langgraph import DeltaMemStore

EXPLORE = ["read the error in the CI log", "search the code for the failing function",
           "add the missing None check", "rerun the tests"]


class State(TypedDict, total=False):
    user: str
    task: str
    env: str
    plan: list[str]
    done: list[str]


def recall(state: State, *, store: BaseStore) -> dict[str, Any]:
    hits = store.search(("users", state["user"]), query=state["task"], limit=3)
    skills = [h for h in hits if h.value["tree"] == "task" and h.value["outcome"] == "success"]
    return {"plan": skills[0].value["experience"]["steps"] if skills else []}


def act(state: State) -> dict[str, Any]:
    # Replace with your model call: put the recalled plan in its prompt.
    return {"done": list(state.get("plan") or EXPLORE)}


def learn(state: State, *, store: BaseStore) -> dict[str, Any]:
    steps = [{"action": a, "observation": "ok"} for a in state["done"]]
    store.put(("users", state["user"]), f"run-{len(steps)}",
              {"task": state["task"], "env": state["env"], "success": True, "steps": steps})
    return {}


def build(store: BaseStore) -> Any:
    graph = StateGraph(State)
    for name, node in (("recall", recall), ("act", act), ("learn", learn)):
        graph.add_node(name, node)
    graph.add_edge(START, "recall")
    graph.add_edge("recall", "act")
    graph.add_edge("act", "learn")
    graph.add_edge("learn", END)
    return graph.compile(store=store)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedder", default="static")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, \
            DeltaMemStore(Path(tmp) / "graph.db", embedder=args.embedder) as store:
        app = build(store)
        state = {"user": "alice", "task": "fix the failing CI build of the api service",
                 "env": "api service repository"}
        for run in (1, 2):
            out = app.invoke(state)
            print(f"run {run}: recalled {len(out['plan'])} steps; did {out['done']}")
        print("namespaces:", store.list_namespaces())


if __name__ == "__main__":
    main()
