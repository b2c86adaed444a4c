"""The store contract is narrow and written once (issue 32 item 4).

A backend implements the abstract operations of :class:`~deltamem.store.base.Store`; the
conveniences are written once in the base over the batch operations; and the rest of the library
talks to a store only through the contract (an AST scan of every module outside ``store/``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import deltamem
from deltamem.store.base import Store
from deltamem.store.memory import InMemoryStore
from deltamem.store.postgres import PostgresStore
from deltamem.store.sqlite import SQLiteStore
from deltamem.testing.conformance import DIM, make_root, vec

OPERATIONS = {
    "ensure_space", "spaces", "write", "add_node", "get_nodes", "metas", "chains", "children",
    "nodes", "vectors", "bump", "mark_consolidated", "delete_subtree", "retire", "forget_space",
    "footprint", "scan",
    "add_episode", "episodes", "count_episodes", "audit_log", "compact", "close",
}
CONVENIENCES = ("get_node", "chain", "vector")
OPTIONAL = ("changes",)  # a store may answer None: callers then assume a change
# Written once in the base over ``scan`` + ``vectors``; a backend that scans rows it holds may
# answer in one pass (SQL stores do; tests/store/test_scan_vectors.py checks both answer alike).
ONE_PASS = ("scan_vectors",)
BACKENDS = (SQLiteStore, PostgresStore, InMemoryStore)


def test_the_abstract_operations_are_the_documented_ones() -> None:
    assert Store.__abstractmethods__ == OPERATIONS


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.__name__)
def test_backends_inherit_the_conveniences(backend: type[Store]) -> None:
    assert issubclass(backend, Store)
    for name in CONVENIENCES:
        assert getattr(backend, name) is getattr(Store, name), f"{backend.__name__}.{name}"


def test_the_one_pass_operations_are_written_once_and_overridden_only_by_sql_stores() -> None:
    assert InMemoryStore.scan_vectors is Store.scan_vectors
    assert SQLiteStore.scan_vectors is PostgresStore.scan_vectors is not Store.scan_vectors


def test_a_store_missing_an_operation_cannot_be_made() -> None:
    incomplete = type("Incomplete", (Store,), {
        name: getattr(InMemoryStore, name) for name in OPERATIONS - {"chains"}})
    with pytest.raises(TypeError, match="chains"):
        incomplete()


def test_the_conveniences_answer_like_the_batch_operations() -> None:
    store = InMemoryStore()
    store.ensure_space("s", "e", DIM)
    root = make_root("r")
    with store.write("s"):
        store.add_node("s", root, vec(1))
    assert store.get_node("s", "r") == store.get_nodes("s", ["r"])["r"]
    assert store.chain("s", "r") == store.chains("s", ["r"])["r"] == [root]
    assert store.get_node("s", "missing") is None and store.chain("s", "missing") == []
    assert store.vector("s", "missing") is None
    assert np.array_equal(store.vector("s", "r"), store.vectors("s", ["r"])["r"])


def _store_calls(path: Path) -> set[tuple[str, str, int]]:
    """``(file, attribute, line)`` of every ``<...>.store.X`` / ``store.X`` attribute access."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Attribute):
            continue
        target = node.value
        named = (isinstance(target, ast.Name) and target.id == "store") or (
            isinstance(target, ast.Attribute) and target.attr == "store")
        if named:
            found.add((path.name, node.attr, node.lineno))
    return found


def test_the_library_calls_a_store_only_through_the_contract() -> None:
    src = Path(deltamem.__file__).parent
    allowed = OPERATIONS | set(CONVENIENCES) | set(OPTIONAL) | set(ONE_PASS) | {"url"}
    outside = [(name, attr, line)
               for path in sorted(src.rglob("*.py")) if "store" not in path.relative_to(src).parts
               for name, attr, line in _store_calls(path) if attr not in allowed]
    assert outside == []


def test_nothing_reaches_around_the_contract_with_getattr() -> None:
    """``getattr(<a store>, ...)`` outside ``store/`` (the scrub's ``path`` and the MCP server's
    once were) is a call beyond the contract the AST check above cannot see. The conformance
    suite's own recording proxy (``testing/``) forwards every attribute on purpose."""
    import re

    src = Path(deltamem.__file__).parent
    reach = re.compile(r"getattr\(\s*[\w.]*store\b")
    found = [str(path.relative_to(src)) for path in sorted(src.rglob("*.py"))
             if not {"store", "testing"} & set(path.relative_to(src).parts)
             and reach.search(path.read_text())]
    assert found == []
