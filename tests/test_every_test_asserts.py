"""Every test checks something: an ``assert``, ``pytest.raises``/``warns``, an ``assert_*``
function (numpy's, the suite's own), or a helper of its module that does one of these. A test
that only runs code passes whatever the code answers."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUITES = (ROOT / "tests", ROOT / "bench" / "tests", ROOT / "src" / "deltamem" / "testing")
Function = ast.FunctionDef | ast.AsyncFunctionDef


def _called(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _checks(fn: Function, helpers: set[str]) -> bool:
    for node in ast.walk(fn):
        if isinstance(node, ast.Assert):
            return True
        if isinstance(node, ast.With | ast.AsyncWith) and any(
                isinstance(i.context_expr, ast.Call) and _called(i.context_expr) in
                ("raises", "warns") for i in node.items):
            return True
        if isinstance(node, ast.Call) and (_called(node).startswith("assert")
                                           or _called(node) in helpers):
            return True
    return False


def unchecked(path: Path) -> list[str]:
    """The tests of ``path`` that check nothing, as ``name:line``."""
    functions = [n for n in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                 if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    helpers: set[str] = set()
    while True:  # helpers that check, also through other helpers
        found = {f.name for f in functions
                 if not f.name.startswith("test") and _checks(f, helpers)}
        if found <= helpers:
            break
        helpers |= found
    return [f"{f.name}:{f.lineno}" for f in functions
            if f.name.startswith("test") and not _checks(f, helpers)]


def test_every_test_of_every_suite_checks_something():
    found = {str(p.relative_to(ROOT)): names for suite in SUITES
             for p in sorted(suite.rglob("*.py")) if (names := unchecked(p))}
    assert found == {}


def test_the_scan_finds_a_test_that_only_runs_code(tmp_path):
    sample = tmp_path / "test_sample.py"
    sample.write_text(
        "import pytest\n"
        "def _agree(x):\n    assert x\n"
        "def _via(x):\n    _agree(x)\n"
        "def test_runs():\n    sorted([2, 1])\n"
        "def test_asserts():\n    assert sorted([2, 1]) == [1, 2]\n"
        "def test_raises():\n    with pytest.raises(TypeError):\n        sorted(1)\n"
        "def test_helper():\n    _via(1)\n"
        "def test_numpy():\n    assert_array_equal([1], [1])\n")
    assert unchecked(sample) == ["test_runs:6"]
