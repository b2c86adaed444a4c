"""Skills as files: export task-tree roots as ``SKILL.md`` folders, and import them back.

Layout written by :func:`export_skills` (the common agent-skills layout)::

    <dir>/<slug>/SKILL.md          one per task-tree skill root (front matter: name, description)
    <dir>/knowledge/<slug>.md      one per environment-tree root

Only roots are exported: a root holds a full experience (consolidated roots hold a whole
compiled chain), while a delta means something only on top of its chain. Failure lessons are
warnings, not skills, so they stay in the memory.

:func:`import_skills` reads ``SKILL.md`` files (ours or hand-written ones) and adds each as a
task-tree root, all in one transaction; an identical root already in the memory is skipped, so
importing the same folder twice changes nothing.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deltamem.core.model import Knowledge, Node, NodeKind, Outcome, Skill, Tree
from deltamem.core.render import render_knowledge, skill_markdown
from deltamem.errors import ConfigError
from deltamem.memory import DeltaMem, new_node_id

KNOWLEDGE_DIR = "knowledge"
_SLUG = re.compile(r"[^a-z0-9]+")
_STEP = re.compile(r"^\s*(\d+)[.)]\s+(.+?)\s*$")
_MAX_SLUG = 60


@dataclass(frozen=True, slots=True)
class ParsedSkill:
    """A skill read from a SKILL.md file."""

    name: str
    description: str
    skill: Skill
    path: Path


def slugify(text: str) -> str:
    """A lowercase, hyphenated folder name (``"skill"`` when nothing is left)."""
    slug = _SLUG.sub("-", text.lower()).strip("-")[:_MAX_SLUG].strip("-")
    return slug or "skill"


def _unique(slug: str, taken: set[str]) -> str:
    candidate, n = slug, 2
    while candidate in taken:
        candidate, n = f"{slug}-{n}", n + 1
    taken.add(candidate)
    return candidate


def export_skills(mem: DeltaMem, out_dir: str | Path) -> dict[str, Any]:
    """Write every skill root and knowledge root of ``mem`` under ``out_dir``.

    Returns:
        ``{"skills": [paths], "knowledge": [paths]}`` relative to ``out_dir``.
    """
    root = Path(out_dir)
    taken: set[str] = {KNOWLEDGE_DIR}
    written: dict[str, Any] = {"skills": [], "knowledge": []}
    for node in mem.nodes(Tree.TASK):
        if not node.is_root or not isinstance(node.content, Skill):
            continue
        name = _unique(slugify(node.key or node.content.activation), taken)
        description = node.content.activation or node.key
        path = root / name / "SKILL.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(skill_markdown(name, description, node.content), encoding="utf-8")
        written["skills"].append(str(path.relative_to(root)))
    taken_k: set[str] = set()
    for node in mem.nodes(Tree.ENV):
        if not node.is_root or not isinstance(node.content, Knowledge):
            continue
        name = _unique(slugify(node.key or node.content.trigger), taken_k)
        path = root / KNOWLEDGE_DIR / f"{name}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_knowledge_markdown(name, node.content), encoding="utf-8")
        written["knowledge"].append(str(path.relative_to(root)))
    return written


def _knowledge_markdown(name: str, knowledge: Knowledge) -> str:
    safe = knowledge.trigger.replace("\n", " ").replace('"', "'")
    return (f'---\nname: {name}\ndescription: "{safe}"\n---\n\n# {name}\n\n'
            f"{render_knowledge(knowledge)}\n")


def parse_skill_md(path: str | Path) -> ParsedSkill:
    """Read one SKILL.md: front matter ``name``/``description``, sections, numbered steps.

    ``## When to use`` gives the activation (else the description); numbered lines give the
    steps (those under ``## Steps`` when that section exists); ``## Done when`` the termination.

    Raises:
        ConfigError: no front matter with a name, or no numbered steps.
    """
    p = Path(path)
    text = p.read_text(encoding="utf-8")
    meta, body = _front_matter(text, p)
    name = meta.get("name", "").strip()
    if not name:
        raise ConfigError(f"{p}: front matter has no 'name'")
    sections = _sections(body)
    step_source = sections.get("steps", body)
    steps = tuple(m.group(2) for line in step_source.splitlines() if (m := _STEP.match(line)))
    if not steps:
        raise ConfigError(f"{p}: no numbered steps ('1. do this') found")
    description = meta.get("description", "").strip()
    activation = _clean(sections.get("when to use", "")) or description or name
    if activation == "(unspecified)":
        activation = description or name
    skill = Skill(activation=activation, steps=steps,
                  termination=_clean(sections.get("done when", "")))
    return ParsedSkill(name, description or activation, skill, p)


def _front_matter(text: str, path: Path) -> tuple[dict[str, str], str]:
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        raise ConfigError(f"{path}: missing front matter (a '---' block with name/description)")
    meta: dict[str, str] = {}
    for i, line in enumerate(lines[1:], 1):
        if line.strip() == "---":
            return meta, "\n".join(lines[i + 1:])
        key, sep, value = line.partition(":")
        if sep and key.strip():
            meta[key.strip().lower()] = _unquote(value.strip())
    raise ConfigError(f"{path}: front matter is not closed with '---'")


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _sections(body: str) -> dict[str, str]:
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in body.splitlines():
        if line.startswith("## "):
            current = out.setdefault(line[3:].strip().lower(), [])
        elif current is not None:
            current.append(line)
    return {k: "\n".join(v) for k, v in out.items()}


def _clean(text: str) -> str:
    return " ".join(text.split())


def find_skill_files(src: str | Path) -> list[Path]:
    """Every ``SKILL.md`` under ``src`` (a folder of skill folders, or one skill folder)."""
    base = Path(src)
    if base.is_file():
        return [base]
    if not base.is_dir():
        raise ConfigError(f"{base}: no such folder")
    return sorted(base.rglob("SKILL.md"))


def import_skills(mem: DeltaMem, src: str | Path) -> dict[str, Any]:
    """Add every SKILL.md under ``src`` to ``mem`` as a task-tree root, in one transaction.

    The retrieval key of each skill is its description (what an agent's goal will resemble).

    Returns:
        ``{"imported": [node ids], "skipped": [paths already present]}``.
    """
    parsed = [parse_skill_md(p) for p in find_skill_files(src)]
    return add_skill_roots(mem, parsed)


def add_skill_roots(mem: DeltaMem, skills: list[ParsedSkill]) -> dict[str, Any]:
    """Write parsed skills as task roots in one transaction (all or nothing)."""
    existing = {(n.key, n.content) for n in mem.nodes(Tree.TASK) if n.is_root}
    fresh: list[ParsedSkill] = []
    skipped: list[str] = []
    for item in skills:
        if (item.description, item.skill) in existing:
            skipped.append(str(item.path))
        else:
            existing.add((item.description, item.skill))
            fresh.append(item)
    vectors = mem.embedder.embed([s.description for s in fresh]) if fresh else None
    ids: list[str] = []
    with mem.transaction():
        for i, item in enumerate(fresh):
            assert vectors is not None
            node = Node(
                id=new_node_id(Tree.TASK), tree=Tree.TASK, kind=NodeKind.ROOT,
                outcome=Outcome.SUCCESS, key=item.description, content=item.skill,
                created_at=time.time(),
                meta={"imported_from": item.path.name if item.path.name != "SKILL.md"
                      else f"{item.path.parent.name}/SKILL.md", "skill_name": item.name},
            )
            mem.store.add_node(mem.space, node, vectors[i])
            ids.append(node.id)
    return {"imported": ids, "skipped": skipped}
