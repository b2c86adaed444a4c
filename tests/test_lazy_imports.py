"""What a process start pays for: patterns compiled on first use (``_util.lazyre``), modules
imported on first use (``_util.lazymod``), and OpenTelemetry imported only by a process that
traces (``_util.telemetry``)."""

from __future__ import annotations

import copy
import re
import subprocess
import sys
import typing

from deltamem._util.lazymod import module
from deltamem._util.lazyre import lazy


def test_a_lazy_pattern_answers_as_the_compiled_one() -> None:
    pattern = lazy(r"(?P<verb>run|test)\s+(\w+)", re.I)
    compiled = re.compile(r"(?P<verb>run|test)\s+(\w+)", re.I)
    assert pattern.pattern == compiled.pattern  # before any compiling: patterns build others
    text = "RUN tests then test again"
    m = pattern.search(text)
    assert m is not None and m.group("verb") == "RUN"
    assert [g.span() for g in pattern.finditer(text)] == [g.span() for g in
                                                           compiled.finditer(text)]
    assert pattern.sub("x", text) == compiled.sub("x", text)
    assert pattern.findall(text) == compiled.findall(text)
    assert pattern.fullmatch("test it") and not pattern.match("a run b")
    assert (pattern.flags, pattern.groups, dict(pattern.groupindex)) == (
        compiled.flags, compiled.groups, dict(compiled.groupindex))
    assert copy.copy(pattern).search("run it")  # copying does not break it


def test_a_lazy_pattern_is_not_compiled_until_used() -> None:
    pattern = lazy(r"(unbalanced")  # would raise at re.compile
    assert pattern.pattern == "(unbalanced"
    try:
        pattern.search("x")
    except re.error:
        pass
    else:
        raise AssertionError("the bad pattern compiled")


def _modules_after(code: str) -> set[str]:
    code += "\nimport sys\nprint('\\n'.join(sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=120)
    return set(done.stdout.split())


def test_recall_does_not_import_opentelemetry_for_a_process_that_does_not_trace() -> None:
    recall = ("from deltamem import DeltaMem\n"
              "from deltamem.embed.hashing import HashingEmbedder\n"
              "with DeltaMem.open(':memory:', embedder=HashingEmbedder()) as m:\n"
              "    m.recall(task='heat the apple', env='a kitchen')\n")
    assert not any(m.startswith("opentelemetry") for m in _modules_after(recall))


def test_a_lazy_module_imports_on_the_first_name_read() -> None:
    code = ("from deltamem._util.lazymod import module\n"
            "import sys\n"
            "api = module('deltamem.formats.api')\n"
            "assert 'deltamem.formats.api' not in sys.modules\n"
            "assert api.RecallOut is sys.modules['deltamem.formats.api'].RecallOut\n")
    assert "deltamem.formats.api" in _modules_after(code)


def test_a_lazy_module_answers_as_the_module_and_its_names_resolve_in_annotations() -> None:
    from deltamem.engine import results
    from deltamem.engine.memory import DeltaMem

    lazy_results = module("deltamem.engine.results")
    assert lazy_results.Recall is results.Recall
    assert "Recall" in vars(lazy_results)  # kept: the next read is a plain attribute
    try:
        lazy_results.__wrapped__  # noqa: B018 - dunders are not looked up in the module
    except AttributeError:
        pass
    else:
        raise AssertionError("a dunder was looked up")
    try:
        lazy_results.no_such_name  # noqa: B018
    except AttributeError:
        pass
    else:
        raise AssertionError("a missing name was found")
    # The facade names its answers through stand-ins; their annotations still resolve.
    assert typing.get_type_hints(DeltaMem.recall)["return"] is results.Recall
