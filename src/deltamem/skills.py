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

The second layout, :func:`export_memory_md` (``--layout memory-md``), is the ``MEMORY.md`` index
plus one file per composed chain that memory-file readers load on demand; there every node is
exported, a delta as its full composition. :func:`import_layout` reads either layout back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deltamem.core.model import Experience, Knowledge, Lesson, Node, Outcome, Skill, Tree
from deltamem.core.render import render_experience, render_knowledge, skill_markdown
from deltamem.errors import ConfigError
from deltamem.memory import DeltaMem

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
    return _add_roots(mem, [_skill_item(s) for s in skills])


def _skill_item(s: ParsedSkill) -> tuple[Tree, str, Experience, Path, dict[str, Any]]:
    return Tree.TASK, s.description, s.skill, s.path, {"skill_name": s.name}


def _add_roots(mem: DeltaMem, items: list[tuple[Tree, str, Experience, Path, dict[str, Any]]]
               ) -> dict[str, Any]:
    """Write ``(tree, key, experience, source path, meta)`` items as roots in one transaction
    (:meth:`DeltaMem.add_roots`); an identical root is skipped."""
    ids = mem.add_roots([(tree, key, content, {"imported_from": _source(path), **meta})
                         for tree, key, content, path, meta in items])
    return {"imported": [i for i in ids if i is not None],
            "skipped": [str(item[3]) for item, i in zip(items, ids, strict=True) if i is None]}


def _source(path: Path) -> str:
    return path.name if path.name != "SKILL.md" else f"{path.parent.name}/SKILL.md"


# -- the MEMORY.md layout ---------------------------------------------------------------------
MEMORY_INDEX = "MEMORY.md"
SKILLS_DIR = "skills"
LESSONS_DIR = "lessons"
INDEX_LINES = 200


def export_layout(mem: DeltaMem, out_dir: str | Path, layout: str) -> dict[str, Any]:
    """Export in ``layout``: ``skills`` (:func:`export_skills`) or ``memory-md``
    (:func:`export_memory_md`); the result names the folder and layout, then what was written
    (``deltamem.api.SkillsExportOut``)."""
    exporters = {"skills": export_skills, "memory-md": export_memory_md}
    if layout not in exporters:
        raise ConfigError(f"unknown layout {layout!r} (skills or memory-md)")
    return {"dir": str(out_dir), "layout": layout, **exporters[layout](mem, out_dir)}


def export_memory_md(mem: DeltaMem, out_dir: str | Path) -> dict[str, Any]:
    """Write the trees as a ``MEMORY.md`` index plus one file per composed chain.

    Layout (what Claude Code auto-memory, the Agents SDK sandbox memory and similar read)::

        <dir>/MEMORY.md               index: skill roots with their variants, scenes, warnings
        <dir>/skills/<slug>.md        one per successful task node: its composed chain
        <dir>/knowledge/<slug>.md     one per environment node: the scene's composed knowledge
        <dir>/lessons/<slug>.md       one per failure lesson (a warning, never a procedure)

    The index stays within ``INDEX_LINES`` lines; past that it says how many entries it left
    out (their files are still written). Returns the written paths relative to ``out_dir``.
    """
    root = Path(out_dir)
    written: dict[str, Any] = {"index": MEMORY_INDEX, "skills": [], "knowledge": [],
                               "lessons": []}
    sections: dict[str, list[str]] = {"skills": [], "knowledge": [], "lessons": []}
    for tree in (Tree.TASK, Tree.ENV):
        children: dict[str | None, list[Node]] = {}
        for node in sorted(mem.nodes(tree), key=lambda n: n.created_at):
            children.setdefault(node.parent_id, []).append(node)
        taken: set[str] = set()
        stack = [(top, 0, [top]) for top in reversed(children.get(None, []))]
        while stack:
            node, depth, chain = stack.pop()
            kind, rel = _write_chain_file(mem, root, node, chain, taken)
            written[kind].append(rel)
            label = "variant: " if depth else ""
            counts = f"({node.successes} ok of {node.hits} uses)"
            sections[kind].append(f"{'  ' * depth}- [{Path(rel).stem}]({rel}) {label}"
                                  f"{_one_line(node.key)} {counts}")
            stack += [(c, depth + 1, [*chain, c]) for c in reversed(children.get(node.id, []))]
    root.mkdir(parents=True, exist_ok=True)
    (root / MEMORY_INDEX).write_text(_index_markdown(sections), encoding="utf-8")
    return written


def _write_chain_file(mem: DeltaMem, root: Path, node: Node, chain: list[Node],
                      taken: set[str]) -> tuple[str, str]:
    """Write one node's composed chain; return its section (skills/knowledge/lessons) and path."""
    if node.outcome is Outcome.FAILURE:
        kind = LESSONS_DIR
    else:
        kind = SKILLS_DIR if node.tree is Tree.TASK else KNOWLEDGE_DIR
    name = _unique(slugify(node.key), taken)
    rel = f"{kind}/{name}.md"
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(_chain_markdown(name, node, chain, mem.experience(node.id)), encoding="utf-8")
    return kind, rel


def _one_line(text: str, limit: int = 100) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _chain_markdown(name: str, node: Node, chain: list[Node],
                    experience: Skill | Knowledge | Lesson) -> str:
    head = ["---", f"name: {name}", f'description: "{_one_line(node.key, 300)}"',
            f"node: {node.id}", f"chain: {' > '.join(n.id for n in chain)}",
            f"outcome: {node.outcome.value}", f"hits: {node.hits}",
            f"successes: {node.successes}", "---", ""]
    if isinstance(experience, Skill):
        body = skill_markdown(name, node.key, experience).split("---\n", 2)[2].lstrip("\n")
    else:
        body = f"# {name}\n\n{render_experience(experience)}\n"
    return "\n".join(head) + body


def _index_markdown(sections: dict[str, list[str]]) -> str:
    titles = {"skills": "## Skills (roots, then their variants)",
              "knowledge": "## Scene knowledge", "lessons": "## Warnings (failed attempts)"}
    lines = ["# Memory", "",
             "Experience learned by deltamem. Read the file of a skill or scene when its task "
             "or place resembles yours; warnings describe attempts that failed.", ""]
    budget = INDEX_LINES - len(lines) - 3 * len(titles)
    total = sum(len(v) for v in sections.values())
    per_section = {k: v[: max(1, budget * len(v) // total)] if total > budget else v
                   for k, v in sections.items()}
    for key, title in titles.items():
        entries = sections[key]
        shown = per_section[key]
        lines += [title, "", *shown] if entries else [title, "", "(none yet)"]
        if len(shown) < len(entries):
            lines.append(f"- ... {len(entries) - len(shown)} more in {key}/")
        lines.append("")
    return "\n".join(lines[:INDEX_LINES]).rstrip() + "\n"


def import_layout(mem: DeltaMem, src: str | Path) -> dict[str, Any]:
    """Import SKILL.md folders, or a MEMORY.md layout when ``src`` holds a ``MEMORY.md``."""
    base = Path(src)
    if (base / MEMORY_INDEX).is_file():
        return import_memory_md(mem, base)
    return import_skills(mem, base)


def import_memory_md(mem: DeltaMem, src: str | Path) -> dict[str, Any]:
    """Read a :func:`export_memory_md` folder back in one transaction: skill files as task
    roots, knowledge files as environment roots (identical roots skipped). Lessons stay out: a
    warning without the chain it belongs to is not a skill."""
    base = Path(src)
    skills = [parse_skill_md(p) for p in sorted((base / SKILLS_DIR).glob("*.md"))]
    knowledge = [_parse_knowledge_md(p) for p in sorted((base / KNOWLEDGE_DIR).glob("*.md"))]
    return _add_roots(mem, [*map(_skill_item, skills),
                            *((Tree.ENV, k.trigger, k, p, {}) for k, p in knowledge)])


def _parse_knowledge_md(path: Path) -> tuple[Knowledge, Path]:
    meta, body = _front_matter(path.read_text(encoding="utf-8"), path)
    trigger = meta.get("description", "").strip()
    for line in body.splitlines():
        if line.startswith("Applies to: ") and not trigger:
            trigger = line[len("Applies to: "):].strip()
    facts = tuple(line[2:].strip() for line in body.splitlines() if line.startswith("- "))
    if not trigger or not facts:
        raise ConfigError(f"{path}: a knowledge file needs a description and '- fact' lines")
    return Knowledge(trigger=trigger, facts=facts), path
