"""The public surface: sorted, complete, importable, and the core stays pure."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import deltamem

CORE = Path(deltamem.__file__).parent / "core"
ALLOWED_IN_CORE = {"__future__", "collections", "dataclasses", "difflib", "enum", "functools",
                   "json", "re", "typing", "numpy", "hashlib", "heapq", "math"}
# The only deltamem modules the core may import: itself and the error tree.
ALLOWED_DELTAMEM_IN_CORE = ("deltamem.core", "deltamem.errors")


PUBLIC = [
    "AsyncClient", "AsyncDeltaMem", "BatchResult", "BudgetExceeded", "ChainLink", "Client",
    "ConfigError", "Consolidation", "Correction", "DeltaMem", "DeltaMemError", "Edit", "Embedder",
    "EmbedderMismatch", "Episode", "EpisodeError", "Experience", "ExtractionError", "Extractor",
    "InvalidExport", "Knowledge", "LLM", "LearnResult", "Lesson", "Node", "NodeKind",
    "NodeNotFound", "Outcome", "OutcomeRecord", "Patch", "PatchError", "ProviderError", "Put",
    "Recall", "RemoteError", "Scene", "SchemaError", "SetText", "Settings", "Skill",
    "SpaceNotFound", "Splice", "Step", "Store", "StoreError", "Tree", "TreeRecall", "TreeWrite",
    "Usage", "__version__", "apply", "compose", "diff",
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


def test_one_version_everywhere() -> None:
    """The package metadata, ``deltamem.__version__`` and the MCP server's ``serverInfo`` name
    one version (the MCP server said ``""``)."""
    import tomllib

    from deltamem_launch.handshake import SERVER_VERSION

    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    assert project["project"]["version"] == deltamem.__version__ == SERVER_VERSION
