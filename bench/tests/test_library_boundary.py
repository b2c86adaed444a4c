"""The harness uses the library through public names only, and keeps its own switches: the
flat ablation's placement rule, the baselines' nested answer schema, the text-game scene."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import deltamem_bench
from deltamem.embed.hashing import HashingEmbedder
from deltamem.scenes.text_games import TextGames
from deltamem_bench.baselines import items_schema
from deltamem_bench.factory import make_memory
from deltamem_bench.memories import DeltaMemMemory
from support import TEST_SETTINGS, make_episode

BENCH = Path(deltamem_bench.__file__).parent


def test_bench_imports_no_private_library_name():
    """No ``deltamem._x`` module and no ``_name`` from a deltamem module (``deltamem_bench``'s
    own private names are its business)."""
    private = []
    for path in sorted(BENCH.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("deltamem."):
                names = [node.module or "", *(a.name for a in node.names)]
            elif isinstance(node, ast.ImportFrom) and node.module == "deltamem":
                names = [a.name for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names if a.name.startswith("deltamem.")]
            else:
                continue
            bad = [n for n in names
                   if any(part.startswith("_") and part != "__version__" for part in n.split("."))]
            private += [f"{path.name}:{node.lineno} {n}" for n in bad]
    assert private == []


def test_the_flat_arm_stores_every_episode_as_a_root(tmp_path: Path) -> None:
    """deltamem-flat: the same episode twice is two roots per tree (no dedup, no delta); the full
    memory deduplicates it."""
    writes = {}
    for kind in ("deltamem", "deltamem-flat"):
        memory = make_memory(kind, tmp_path / kind, embedder=HashingEmbedder(), llm=None,
                             extractor="trace", settings=TEST_SETTINGS)
        assert isinstance(memory, DeltaMemMemory)
        assert isinstance(memory.mem.scene, TextGames)
        ep = make_episode()
        for _ in range(2):
            text, info = memory.context(ep.task, ep.env)
            update = memory.update(ep, info)
        writes[kind] = (update.written["task"]["action"], update.written["env"]["action"],
                        memory.size()["entries"])
        assert not memory.mem.settings.auto_consolidate or kind == "deltamem"
        memory.close()
    assert writes == {"deltamem": ("dedup", "dedup", 2), "deltamem-flat": ("root", "root", 4)}


def test_the_reasoningbank_schema_lists_objects_built_in_the_harness():
    """Pinned: the schema the library built for ReasoningBank's items before the branch moved
    here, byte for byte."""
    assert json.dumps(items_schema()) == (
        '{"type": "object", "properties": {"items": {"type": "array", "items": {"type": '
        '"object", "properties": {"title": {"type": "string", "maxLength": 120, "minLength": 1}, '
        '"description": {"type": "string", "maxLength": 300, "minLength": 1}, "content": '
        '{"type": "string", "maxLength": 600, "minLength": 1}}, "required": ["title", '
        '"description", "content"], "additionalProperties": false}, "maxItems": 3, '
        '"minItems": 1}}, "required": ["items"], "additionalProperties": false}')


def test_a_run_written_with_settings_flat_false_still_resumes(tmp_path: Path) -> None:
    """Runs written while ``flat`` was a library setting recorded ``"flat": false`` (and no
    ``scene``); they resume, while a recorded ``"flat": true`` would be another run."""
    from dataclasses import fields

    import pytest

    from deltamem.config import Settings
    from deltamem.errors import ConfigError
    from deltamem_bench.runner import RunOptions, check_config

    config = json.loads(json.dumps(RunOptions(settings=TEST_SETTINGS).to_dict(), default=str))
    old = json.loads(json.dumps(config))
    del old["settings"]["scene"]
    old["settings"]["flat"] = False
    (tmp_path / "config.json").write_text(json.dumps(old))
    check_config(tmp_path, config)
    old["settings"]["flat"] = True
    (tmp_path / "config.json").write_text(json.dumps(old))
    with pytest.raises(ConfigError, match="changed: settings"):
        check_config(tmp_path, config)
    assert "flat" not in {f.name for f in fields(Settings)}
