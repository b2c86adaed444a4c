"""A coding agent's memory: learn from two past sessions' transcripts, recall for a new one.

    python examples/coding_agent.py [--db coding-agent.db] [--embedder static]

The transcripts are OpenAI-style chat messages, as any tool-calling agent records them (here
written out by hand, so the example runs without a model). The embedder is ``static`` (the
static MiniLM distillation shipped in the package: fast, and close to MiniLM on short texts);
drop ``--embedder`` to use the default MiniLM.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from deltamem import DeltaMem
from deltamem.formats.transcripts import episode_from_messages

REPO = "Python package 'shop' with a src/ layout and pytest tests under tests/"


def call(call_id: str, name: str, argument: str) -> dict[str, object]:
    return {"role": "assistant", "tool_calls": [{"id": call_id, "type": "function", "function": {
        "name": name, "arguments": f'{{"command": "{argument}"}}'}}]}


def result(call_id: str, text: str) -> dict[str, object]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


SESSIONS = [
    [{"role": "user", "content": "Fix the failing test tests/test_cart.py::test_total"},
     call("1", "bash", "pytest tests/test_cart.py -x -q"),
     result("1", "FAILED tests/test_cart.py::test_total - assert 90 == 100"),
     call("2", "bash", "grep -n 'def total' src/shop/cart.py"),
     result("2", "12:    def total(self):"),
     call("3", "edit", "src/shop/cart.py: apply the discount after the sum, not per item"),
     result("3", "edited"),
     call("4", "bash", "pytest tests/test_cart.py -x -q"),
     result("4", "3 passed"),
     {"role": "assistant", "content": "Fixed: the discount was applied per item."}],
    [{"role": "user", "content": "Fix the failing test tests/test_orders.py::test_refund"},
     call("1", "bash", "pytest tests/test_orders.py -x -q"),
     result("1", "FAILED tests/test_orders.py::test_refund - KeyError: 'amount'"),
     call("2", "bash", "grep -n 'def refund' src/shop/orders.py"),
     result("2", "40:    def refund(self, order):"),
     call("3", "edit", "src/shop/orders.py: read order['total'] instead of order['amount']"),
     result("3", "edited"),
     call("4", "bash", "pytest tests/test_orders.py -x -q"),
     result("4", "5 passed"),
     {"role": "assistant", "content": "Fixed the key name."}],
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default=None, help="database file (default: a temporary one)")
    parser.add_argument("--embedder", default="static")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or str(Path(tmp) / "coding-agent.db")
        with DeltaMem.open(db, embedder=args.embedder) as mem:
            for messages in SESSIONS:
                learned = mem.learn(episode_from_messages(messages, success=True, env=REPO))
                print(f"learned {learned.task.action} {learned.task.node}")
            goal = "Fix the failing test tests/test_invoice.py::test_tax"
            recall = mem.recall(task=goal, env=REPO)
            print(f"\nrecall for {goal!r}: skill {recall.task.node}, "
                  f"knowledge {recall.env.node}\n")
            print(recall.context)


if __name__ == "__main__":
    main()
