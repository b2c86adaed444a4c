"""SKILL.md export and import: the agent-skills layout, round trip, hand-written files."""

from __future__ import annotations

from pathlib import Path

import pytest

from deltamem.core.model import Skill, Tree
from deltamem.embed.hashing import HashingEmbedder
from deltamem.engine.memory import DeltaMem
from deltamem.errors import ConfigError
from deltamem.extract.trace import TraceExtractor
from deltamem.faces.skills import export_skills, import_skills, parse_skill_md, slugify
from deltamem.store.sqlite import SQLiteStore
from helpers import TEST_SETTINGS, make_episode

HAND_WRITTEN = """---
name: brew-coffee
description: "Make a cup of coffee with the kitchen machine"
---

# Brew coffee

Some prose that is not a step.

1. fill the tank with water
2. insert a capsule
3) press the big button
"""


def fresh(tmp_path: Path, name: str) -> DeltaMem:
    return DeltaMem(SQLiteStore(tmp_path / f"{name}.db"), HashingEmbedder(), TraceExtractor(),
                    settings=TEST_SETTINGS)


def test_export_writes_skill_folders_and_knowledge(mem: DeltaMem, tmp_path: Path) -> None:
    """Each skill root becomes <slug>/SKILL.md with front matter; env roots go to knowledge/."""
    mem.learn(make_episode())
    mem.learn(make_episode(actions=("look",), success=False, task="open the safe"))
    written = export_skills(mem, tmp_path / "out")
    assert written["skills"] == ["heat-the-apple/SKILL.md"]  # the failure lesson is not a skill
    text = (tmp_path / "out" / "heat-the-apple" / "SKILL.md").read_text()
    assert text.startswith("---\nname: heat-the-apple\ndescription: heat the apple\nmetadata:")
    assert "1. go to kitchen\n2. take apple\n3. heat apple" in text
    assert len(written["knowledge"]) == 1 and written["knowledge"][0].startswith("knowledge/")


def test_round_trip_into_a_new_memory_and_reimport_is_idempotent(mem: DeltaMem,
                                                                 tmp_path: Path) -> None:
    """Exported skills import as equal roots that recall finds; a second import adds nothing."""
    mem.learn(make_episode())
    mem.learn(make_episode(task="cool the milk", actions=("go to fridge", "cool milk")))
    export_skills(mem, tmp_path / "skills")
    other = fresh(tmp_path, "other")
    done = import_skills(other, tmp_path / "skills")
    assert len(done["imported"]) == 2 and done["skipped"] == []
    original = {n.content for n in mem.nodes(Tree.TASK)}
    assert {n.content for n in other.nodes(Tree.TASK)} == original
    assert other.recall("heat the apple").task.matched
    again = import_skills(other, tmp_path / "skills")
    assert again["imported"] == [] and len(again["skipped"]) == 2
    assert len(list(other.nodes())) == 2
    other.close()


def test_hand_written_skill_md_is_parsed(tmp_path: Path) -> None:
    """Front matter gives name and description; numbered lines (1. or 1)) give the steps."""
    path = tmp_path / "brew" / "SKILL.md"
    path.parent.mkdir()
    path.write_text(HAND_WRITTEN)
    parsed = parse_skill_md(path)
    assert parsed.name == "brew-coffee"
    assert parsed.skill == Skill("Make a cup of coffee with the kitchen machine",
                                 ("fill the tank with water", "insert a capsule",
                                  "press the big button"))


def test_bad_skill_files_fail_clearly_and_import_nothing(mem: DeltaMem, tmp_path: Path) -> None:
    """A file without front matter or steps is refused, and the batch writes nothing."""
    good = tmp_path / "s" / "good" / "SKILL.md"
    bad = tmp_path / "s" / "bad" / "SKILL.md"
    good.parent.mkdir(parents=True)
    bad.parent.mkdir(parents=True)
    good.write_text(HAND_WRITTEN)
    bad.write_text("---\nname: empty\n---\n# Empty\n\n## When to use\n\nnever\n")
    with pytest.raises(ConfigError, match="no steps found"):
        import_skills(mem, tmp_path / "s")
    assert list(mem.nodes()) == []
    with pytest.raises(ConfigError, match="front matter"):
        bad.write_text("just text")
        parse_skill_md(bad)


def test_slugify() -> None:
    """Slugs are lowercase, hyphenated and never empty."""
    assert slugify("Heat the Apple!") == "heat-the-apple"
    assert slugify("???") == "skill"


LONGER = ("go to kitchen", "open microwave", "take apple", "heat apple")


def test_memory_md_layout_index_chains_and_round_trip(mem: DeltaMem, tmp_path: Path) -> None:
    """MEMORY.md indexes roots with their variants; every chain has a file; import reads the
    skills and scene knowledge back as roots that recall finds; a second import adds nothing."""
    from deltamem.faces.skills import export_layout, import_layout

    mem.learn(make_episode())
    delta = mem.learn(make_episode(actions=LONGER)).task.node
    mem.learn(make_episode(task="wash the plate", actions=("go to sink", "wash plate"),
                           success=False))
    out = tmp_path / "md"
    written = export_layout(mem, out, "memory-md")
    index = (out / "MEMORY.md").read_text()
    assert written["index"] == "MEMORY.md" and len(written["skills"]) == 2
    assert written["lessons"] == ["lessons/wash-the-plate.md"]
    lines = index.splitlines()
    root_line = next(i for i, line in enumerate(lines) if line.startswith("- [heat-the-apple]"))
    assert lines[root_line + 1].startswith("  - [heat-the-apple-2](skills/heat-the-apple-2.md)"
                                           " variant: heat the apple")
    assert "## Warnings" in index and "wash-the-plate" in index
    variant = (out / "skills/heat-the-apple-2.md").read_text()
    assert f"node: {delta}" in variant and "2. open microwave" in variant
    assert len(written["knowledge"]) >= 1 and (out / written["knowledge"][0]).is_file()

    fresh_mem = fresh(tmp_path, "md-import")
    done = import_layout(fresh_mem, out)
    everything = [*written["skills"], *written["knowledge"], *written["lessons"]]
    assert len(done["imported"]) == len(everything)
    assert fresh_mem.get(delta).parent_id == mem.get(delta).parent_id  # the tree, not roots
    assert fresh_mem.experience(delta) == mem.experience(delta)
    assert fresh_mem.recall("heat the apple", "a kitchen with a fridge").env.matched
    again = import_layout(fresh_mem, out)
    assert again["imported"] == [] and len(again["skipped"]) == len(done["imported"])


def test_memory_md_index_stays_within_its_line_budget(mem: DeltaMem, tmp_path: Path) -> None:
    from deltamem.faces.skills import INDEX_LINES, export_memory_md

    for i in range(120):
        mem.learn(make_episode(task=f"task number {i} of many", env=f"scene {i}",
                               actions=(f"do thing {i}",)))
    written = export_memory_md(mem, tmp_path / "big")
    index = (tmp_path / "big" / "MEMORY.md").read_text().splitlines()
    assert len(index) <= INDEX_LINES
    assert any(line.startswith("- ... ") and "more in skills/" in line for line in index)
    assert len(written["skills"]) == len([n for n in mem.nodes(Tree.TASK)
                                          if n.outcome.value == "success"]) >= 120


def test_cli_exports_memory_md_layout(mem: DeltaMem, db_path: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from deltamem.faces.cli.app import app

    mem.learn(make_episode())
    mem.close()
    result = CliRunner().invoke(app, ["skills", "export", str(tmp_path / "o"), "--layout",
                                      "memory-md", "--db", str(db_path), "--embedder", "hashing",
                                      "--json"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "o" / "MEMORY.md").is_file()
