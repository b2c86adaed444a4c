"""SKILL.md / MEMORY.md files as users write them and as they round-trip: YAML front matter
read by a real parser, prose skills, and export -> import -> export giving the same bytes."""

from __future__ import annotations

from pathlib import Path

import pytest

from deltamem.core.model import NodeKind, Outcome, Skill, Tree
from deltamem.embed.hashing import HashingEmbedder
from deltamem.engine.memory import DeltaMem
from deltamem.errors import ConfigError
from deltamem.extract.trace import TraceExtractor
from deltamem.faces.skills import (
    export_layout,
    export_skills,
    import_layout,
    import_skills,
    parse_skill_md,
)
from deltamem.store.sqlite import SQLiteStore
from helpers import TEST_SETTINGS, make_episode

LONGER = ("go to kitchen", "open microwave", "take apple", "heat apple")
LONGEST = (*LONGER, "eat apple")

PROSE = """---
name: pdf-fill
description: >-
  Fill in PDF forms: read the fields,
  then write the values.
license: MIT
metadata:
  version: "2"
---

# PDF form filling

Read the form's fields first with the helper script; it prints every field name and
its type.

```python
fields = read_fields("form.pdf")
print(fields)
```

- Match each value to a field by its label.
- Check boxes take "Yes" or "Off".

## When to use

Someone asks you to fill in a PDF form.
"""


def fresh(tmp_path: Path, name: str) -> DeltaMem:
    return DeltaMem(SQLiteStore(tmp_path / f"{name}.db"), HashingEmbedder(), TraceExtractor(),
                    settings=TEST_SETTINGS)


def write(tmp_path: Path, text: str, name: str = "skill") -> Path:
    path = tmp_path / "skills" / name / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_yaml_block_scalar_description_is_read_as_yaml(tmp_path: Path) -> None:
    parsed = parse_skill_md(write(tmp_path, PROSE))
    assert parsed.name == "pdf-fill"
    assert parsed.description == ("Fill in PDF forms: read the fields, then write the values.")


def test_a_prose_skill_imports_as_a_root_of_its_paragraphs_bullets_and_code(
        tmp_path: Path) -> None:
    parsed = parse_skill_md(write(tmp_path, PROSE))
    assert parsed.skill == Skill(
        activation="Someone asks you to fill in a PDF form.",
        steps=("Read the form's fields first with the helper script; it prints every field "
               "name and its type.",
               '```python\nfields = read_fields("form.pdf")\nprint(fields)\n```',
               "Match each value to a field by its label.",
               'Check boxes take "Yes" or "Off".'))
    mem = fresh(tmp_path, "prose")
    done = import_skills(mem, tmp_path / "skills")
    (node,) = [mem.get(i) for i in done["imported"]]
    assert node.is_root and node.key == parsed.key == (
        "pdf fill: Fill in PDF forms: read the fields, then write the values.")
    recall = mem.recall(parsed.key)  # the hashing test embedder: the same words
    assert recall.task.matched and "Check boxes take" in recall.context
    assert export_skills(mem, tmp_path / "out")["skills"] == ["pdf-fill/SKILL.md"]  # its name


def test_front_matter_that_is_not_yaml_is_one_clear_error(tmp_path: Path) -> None:
    path = write(tmp_path, "---\nname: x\ndescription: [unclosed\n---\n1. step\n")
    with pytest.raises(ConfigError, match=r"front matter is not valid YAML at line \d"):
        parse_skill_md(path)
    path.write_text("---\n- a list\n---\n1. step\n")
    with pytest.raises(ConfigError, match="YAML mapping"):
        parse_skill_md(path)


def test_skill_export_front_matter_survives_any_description(tmp_path: Path) -> None:
    """Backslashes, quotes, colons and '#' in a key come back exactly (YAML written by PyYAML,
    read by PyYAML)."""
    mem = fresh(tmp_path, "odd")
    task = 'copy C:\\temp\\new "draft": #1 it\'s done'
    mem.learn(make_episode(task=task))
    export_skills(mem, tmp_path / "out")
    other = fresh(tmp_path, "odd2")
    import_skills(other, tmp_path / "out")
    assert {n.key for n in other.nodes(Tree.TASK)} == {task}


def learned_memory(tmp_path: Path) -> DeltaMem:
    """Two trees with roots, deltas two deep, a failure lesson and counted outcomes."""
    mem = fresh(tmp_path, "source")
    mem.learn(make_episode())
    mem.learn(make_episode(actions=LONGER))
    deepest = mem.learn(make_episode(actions=LONGEST)).task.node
    mem.learn(make_episode(task="wash the plate", actions=("go to sink", "wash plate"),
                           success=False))
    mem.learn(make_episode(task="cool the milk", actions=("go to fridge", "cool milk"),
                           env="a cold pantry with a fridge"))
    recall = mem.recall("heat the apple", "a kitchen with a fridge")
    mem.record_outcome(recall, success=True)
    mem.record_outcome([deepest], success=False)
    return mem


def shape(mem: DeltaMem) -> list[tuple[object, ...]]:
    return sorted((n.id, n.tree, n.kind, n.outcome, n.parent_id, n.depth, n.key, n.hits,
                   n.successes, n.failures, mem.experience(n.id)) for n in mem.nodes())


def tree_files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*.md"))}


def test_memory_md_round_trip_keeps_the_trees_and_counters_byte_for_byte(
        tmp_path: Path) -> None:
    mem = learned_memory(tmp_path)
    kinds = {n.kind for n in mem.nodes()}
    assert kinds == {NodeKind.ROOT, NodeKind.DELTA}
    assert any(n.depth >= 3 for n in mem.nodes(Tree.TASK))
    assert any(n.outcome is Outcome.FAILURE for n in mem.nodes())
    assert any(n.hits and n.successes for n in mem.nodes())

    first = tmp_path / "first"
    export_layout(mem, first, "memory-md")
    copy = fresh(tmp_path, "copy")
    done = import_layout(copy, first)
    assert len(done["imported"]) == len(list(mem.nodes())) and done["skipped"] == []
    assert shape(copy) == shape(mem)
    assert copy.check() == []

    second = tmp_path / "second"
    export_layout(copy, second, "memory-md")
    assert tree_files(second) == tree_files(first)

    again = import_layout(copy, first)  # a second import changes nothing
    assert again["imported"] == [] and shape(copy) == shape(mem)
    recall = copy.recall("heat the apple", "a kitchen with a fridge")
    assert recall.task.matched and "past episodes (0 succeeded" not in recall.context


def test_memory_md_import_refuses_a_delta_without_its_parent(tmp_path: Path) -> None:
    mem = learned_memory(tmp_path)
    out = tmp_path / "md"
    export_layout(mem, out, "memory-md")
    root = next(n for n in mem.nodes(Tree.TASK) if n.is_root and n.key == "heat the apple")
    for path in (out / "skills").glob("*.md"):
        if f"node: {root.id}\n" in path.read_text():
            path.unlink()
    copy = fresh(tmp_path, "orphan")
    with pytest.raises(ConfigError, match=f"parent {root.id} is neither in the folder"):
        import_layout(copy, out)
    assert not copy.exists or list(copy.nodes()) == []


def test_skill_folders_keep_root_counters_and_export_the_same_bytes(tmp_path: Path) -> None:
    """The agent-skills layout holds roots only; their counters travel in the front matter's
    ``metadata`` map, and a second export is the same files."""
    mem = learned_memory(tmp_path)
    first = tmp_path / "first"
    export_skills(mem, first)
    copy = fresh(tmp_path, "skills-copy")
    import_skills(copy, first)
    counted = {(n.key, n.content): (n.hits, n.successes, n.failures)
               for n in mem.nodes(Tree.TASK) if n.is_root and isinstance(n.content, Skill)}
    assert any(h for h, _, _ in counted.values())
    assert {(n.key, n.content): (n.hits, n.successes, n.failures)
            for n in copy.nodes(Tree.TASK)} == counted
    second = tmp_path / "second"
    export_skills(copy, second)
    assert tree_files(second) == {k: v for k, v in tree_files(first).items()
                                  if not k.startswith("knowledge/")}


def test_names_that_share_a_slug_get_the_next_free_suffix_in_linear_time() -> None:
    """``skills export`` names the n-th skill of one slug ``slug-n`` without trying every
    earlier suffix again (it was quadratic in the skills sharing a slug), and never reuses a
    name another slug already took."""
    from deltamem.faces.skills.files import unique

    taken: dict[str, int] = {}
    assert [unique("heat", taken) for _ in range(3)] == ["heat", "heat-2", "heat-3"]
    assert unique("heat-4", taken) == "heat-4"
    assert unique("heat", taken) == "heat-5"

    class Lookups(dict):  # type: ignore[type-arg]
        """A test double: a dict that counts the names looked up in it."""

        looked = 0

        def __contains__(self, key: object) -> bool:
            Lookups.looked += 1
            return super().__contains__(key)

    counted = Lookups()
    names = [unique("same", counted) for _ in range(2_000)]
    assert len(set(names)) == 2_000 and names[-1] == "same-2000"
    assert Lookups.looked <= 2 * 2_000  # trying every suffix again looked ~2,000,000 up
