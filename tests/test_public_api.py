"""The public surface: sorted, complete, importable, and the core stays pure."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import subprocess
import sys
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import deltamem

CORE = Path(deltamem.__file__).parent / "core"
ALLOWED_IN_CORE = {"__future__", "collections", "dataclasses", "difflib", "enum", "functools",
                   "json", "re", "typing", "numpy", "hashlib", "heapq", "math"}
# The only deltamem modules the core may import: itself and the error tree.
ALLOWED_DELTAMEM_IN_CORE = ("deltamem.core", "deltamem.errors")


PUBLIC = [
    "Action", "AsyncClient", "AsyncDeltaMem", "BatchResult", "BudgetExceeded", "Candidate",
    "ChainLink", "Client", "ConfigError", "Consolidation", "Correction", "DeltaMem",
    "DeltaMemError", "Edit", "Embedder", "EmbedderMismatch", "Episode", "EpisodeError",
    "EpisodeRecord", "Experience", "ExtractionError", "Extractor", "InvalidExport", "Knowledge",
    "LLM", "LearnResult", "Lesson", "Node", "NodeKind", "NodeNotFound", "Outcome",
    "OutcomeRecord", "Patch", "PatchError", "ProviderError", "Put", "Recall", "RemoteError",
    "Scene", "SchemaError", "SetText", "Settings", "Skill", "SpaceNotFound", "Splice", "Step",
    "Store", "StoreError", "Style", "Tree", "TreeRecall", "TreeWrite", "Usage", "__version__",
    "apply", "compose", "diff",
]


def test_all_is_exactly_the_curated_surface():
    """The public names are pinned: adding or dropping one is a decision made here."""
    assert deltamem.__all__ == PUBLIC


def test_all_is_sorted_and_importable():
    """__all__ is sorted and every name resolves."""
    names = [n for n in deltamem.__all__ if n != "__version__"]
    assert names == sorted(names, key=str.lower) or names == sorted(names)
    for name in deltamem.__all__:
        assert hasattr(deltamem, name), name


def test_core_does_no_io():
    """core/ imports only the stdlib's pure modules, numpy, itself and the error tree (no
    sqlite, http, os, time; nothing of deltamem above it)."""
    for path in CORE.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                assert not node.level, f"{path.name}:{node.lineno} uses a relative import"
                names = [node.module or ""]
            else:
                continue
            for name in names:
                if name == "deltamem" or name.startswith("deltamem."):
                    assert name.startswith(ALLOWED_DELTAMEM_IN_CORE), \
                        f"{path.name}:{node.lineno} imports {name} (core may import only " \
                        f"{', '.join(ALLOWED_DELTAMEM_IN_CORE)})"
                else:
                    root = name.split(".")[0]
                    assert root in ALLOWED_IN_CORE, f"{path.name}:{node.lineno} imports {root}"


def test_import_is_light():
    """`import deltamem` pulls in neither model runtimes, database drivers nor the HTTP client."""
    code = ("import sys, deltamem; heavy = {'llama_cpp', 'psycopg', 'torch', 'fastapi', "
            "'scienceworld', 'tokenizers', 'httpx'} & set(sys.modules); print(sorted(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"


def test_import_loads_the_surface_when_used():
    """`import deltamem` loads neither numpy, pydantic nor the engine (PEP 562: a public name
    loads its module when first used), so any ``deltamem.*`` import starts cheap; the map of
    names to modules covers ``__all__`` exactly."""
    code = ("import sys, deltamem; heavy = {'numpy', 'pydantic', 'deltamem.engine.memory', "
            "'onnxruntime', 'asyncio'} & set(sys.modules); print(sorted(heavy)); "
            "from deltamem import DeltaMem; print(DeltaMem.__module__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["[]", "deltamem.engine.memory"]
    assert set(deltamem._HOME) == set(deltamem.__all__) - {"__version__"}
    assert set(dir(deltamem)) >= set(deltamem.__all__)
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = deltamem.Nope  # type: ignore[attr-defined]


def test_one_version_everywhere() -> None:
    """The package metadata, ``deltamem.__version__`` and the MCP server's ``serverInfo`` name
    one version (the MCP server said ``""``)."""
    import tomllib

    from deltamem_launch.handshake import SERVER_VERSION

    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    assert project["project"]["version"] == deltamem.__version__ == SERVER_VERSION


def _functions(obj: object) -> list[tuple[str, Any]]:
    """The public functions of a public name: itself, or a class's own methods and properties
    (written in deltamem: a protocol's generated ``__init__`` is not)."""
    if inspect.isfunction(obj):
        return [(obj.__name__, obj)]
    if not inspect.isclass(obj):
        return []
    found = []
    for name, member in vars(obj).items():
        if name.startswith("_") and name != "__init__":
            continue
        if isinstance(member, classmethod | staticmethod):
            member = member.__func__
        if isinstance(member, property):
            member = member.fget
        if inspect.isfunction(member) and member.__module__.startswith("deltamem"):
            found.append((f"{obj.__name__}.{name}", member))
    return found


def test_every_public_function_is_typed_and_its_types_resolve():
    """Every parameter and answer of the public names' functions is annotated, and
    ``typing.get_type_hints`` resolves them (pydantic, FastAPI and documentation tools read
    them so; the async facade's offloaded methods once named a class their module could not
    see)."""
    problems = []
    for name in deltamem.__all__:
        for label, function in _functions(getattr(deltamem, name)):
            try:
                hints = typing.get_type_hints(function)
            except NameError as exc:
                problems.append(f"{label}: {exc}")
                continue
            unannotated = [p.name for p in inspect.signature(function).parameters.values()
                           if p.name not in ("self", "cls") and p.name not in hints]
            if unannotated or ("return" not in hints and function.__name__ != "__init__"):
                problems.append(f"{label}: {unannotated or 'no answer type'}")
    assert problems == []


# Where the types a user meets but imports from elsewhere live, and why.
ELSEWHERE = {
    "deltamem.formats.api": "the wire models, one per shape of every face (to_wire, the clients)",
    "deltamem.engine.results.Consolidations": "consolidate's answer shape (the operation table)",
    "deltamem.engine.results.NodeListing": "list_nodes' answer shape (the operation table)",
    "deltamem.core.tree.Placer": "an experiment's placement hook (DeltaMem.placer)",
}


def _classes(annotation: Any) -> Iterator[type]:
    yield from (a for a in (annotation, *typing.get_args(annotation)) if isinstance(a, type))
    for arg in typing.get_args(annotation):
        yield from _classes(arg)


def test_every_type_the_facade_hands_a_user_is_public():
    """The classes in the facade's parameters and answers, in Settings' fields and in the
    fields of the public results are importable from ``deltamem`` (or live in the module
    ``ELSEWHERE`` names)."""
    public = {getattr(deltamem, n) for n in deltamem.__all__ if n != "__version__"}
    where: dict[str, set[str]] = {}
    holders = [deltamem.DeltaMem, deltamem.Settings, *(
        c for c in public if inspect.isclass(c) and dataclasses.is_dataclass(c))]
    for holder in holders:
        annotations = [typing.get_type_hints(f) for _, f in _functions(holder)]
        if dataclasses.is_dataclass(holder):
            annotations.append(typing.get_type_hints(holder))
        for hints in annotations:
            for annotation in hints.values():
                for cls in _classes(annotation):
                    dotted = f"{cls.__module__}.{cls.__qualname__}"
                    if cls.__module__.startswith("deltamem") and cls not in public \
                            and not dotted.startswith(tuple(ELSEWHERE)):
                        where.setdefault(dotted, set()).add(holder.__name__)
    assert where == {}
