"""The agent-skills layout: task-tree roots as ``<slug>/SKILL.md`` folders, and back.

Layout written by :func:`export_skills`::

    <dir>/<slug>/SKILL.md          one per task-tree skill root (front matter: name, description)
    <dir>/knowledge/<slug>.md      one per environment-tree root

Only roots are exported: a root holds a full experience (consolidated roots hold a whole
compiled chain), while a delta means something only on top of its chain. Failure lessons are
warnings, not skills, so they stay in the memory; so does what a correction took back
(``engine.corrections.withdrawn``).

:func:`import_skills` reads ``SKILL.md`` files (ours or hand-written ones) and adds each as a
task-tree root, all in one transaction; an identical root already in the memory is skipped, so
importing the same folder twice changes nothing. Front matter is YAML (read with PyYAML, so block
scalars such as ``description: >-`` work). The steps are the numbered lines; a prose skill
without any becomes a root whose steps are its paragraphs, bullet items and code blocks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deltamem.core.model import Knowledge, Outcome, Skill, Tree
from deltamem.core.render import render_knowledge, skill_markdown
from deltamem.engine.corrections import withdrawn
from deltamem.engine.memory import DeltaMem
from deltamem.errors import ConfigError
from deltamem.faces.skills.files import (
    KNOWLEDGE_DIR,
    Entry,
    Folder,
    add_entries,
    find_files,
    front_matter,
    read_text,
    slugify,
    text_of,
    unique,
    with_front_matter,
)

_STEP = re.compile(r"^\s*(\d+)[.)]\s+(.+?)\s*$")
_BULLET = re.compile(r"^\s*[-*+]\s+(.+?)\s*$")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")
_FENCES = ("```", "~~~")
UNSPECIFIED = "(unspecified)"  # what skill_markdown writes for an empty activation
COUNTERS = ("hits", "successes", "failures")


@dataclass(frozen=True, slots=True)
class ParsedSkill:
    """A skill read from a SKILL.md file; ``key`` is what recall matches it by."""

    name: str
    description: str
    skill: Skill
    path: Path
    counts: tuple[int, int, int] = (0, 0, 0)  # hits, successes, failures (our export's metadata)
    key: str = ""


def export_skills(mem: DeltaMem, out_dir: str | Path) -> dict[str, Any]:
    """Write every skill root and knowledge root of ``mem`` under ``out_dir`` (what a
    correction took back is left out; nothing is written through a link in ``out_dir``).

    Returns:
        ``{"skills": [paths], "knowledge": [paths]}`` relative to ``out_dir``.

    Raises:
        ConfigError: a link planted in ``out_dir`` where a folder or file would be written.
    """
    folder = Folder(out_dir)
    nodes = list(mem.nodes())
    gone = withdrawn(nodes)
    taken: dict[str, int] = {KNOWLEDGE_DIR: 2}
    written: dict[str, Any] = {"skills": [], "knowledge": []}
    for node in nodes:
        if node.tree is not Tree.TASK or not node.is_root or node.id in gone \
                or not isinstance(node.content, Skill) or node.outcome is not Outcome.SUCCESS:
            continue
        imported_name = node.meta.get("skill_name")  # the name a SKILL.md gave it, if any
        name = unique(slugify(str(imported_name or "") or node.key
                              or node.content.activation), taken)
        description = node.content.activation or node.key
        meta = {"name": name, "description": description,
                "metadata": {f"deltamem-{k}": str(getattr(node, k)) for k in COUNTERS}}
        rel = f"{name}/SKILL.md"
        folder.write(rel, with_front_matter(meta, skill_body(name, description, node.content)))
        written["skills"].append(rel)
    taken_k: dict[str, int] = {}
    for node in nodes:
        if node.tree is not Tree.ENV or not node.is_root or node.id in gone \
                or not isinstance(node.content, Knowledge):
            continue
        name = unique(slugify(node.key or node.content.trigger), taken_k)
        rel = f"{KNOWLEDGE_DIR}/{name}.md"
        folder.write(rel, _knowledge_markdown(name, node.content))
        written["knowledge"].append(rel)
    return written


def _knowledge_markdown(name: str, knowledge: Knowledge) -> str:
    return with_front_matter({"name": name, "description": knowledge.trigger},
                             f"# {name}\n\n{render_knowledge(knowledge)}\n")


def skill_body(name: str, description: str, skill: Skill) -> str:
    """The Markdown body of :func:`skill_markdown` (its front matter is written here)."""
    return skill_markdown(name, description, skill).split("---\n", 2)[2].lstrip("\n")


def parse_skill_md(path: str | Path) -> ParsedSkill:
    """Read one SKILL.md: YAML front matter ``name``/``description``, sections, steps.

    ``## When to use`` gives the activation (else the description); numbered lines give the
    steps (those under ``## Steps`` when that section exists); ``## Done when`` the termination.
    A prose skill (no numbered line) gets its paragraphs, bullet items and code blocks as steps,
    in order (headings and the two sections above left out).

    The key recall matches it by is :func:`skill_key`: the description our own export wrote
    (its ``metadata`` carries deltamem's counters), else the skill's name and the first
    sentence of its description -- what the skill does, which a short request resembles more
    than a whole paragraph.

    Raises:
        ConfigError: no front matter with a name, front matter that is not YAML, no steps, or
            a file that is not a small regular file (:func:`files.read_text`).
    """
    p = Path(path)
    meta, body = front_matter(read_text(p), p)
    name = text_of(meta, "name")
    if not name:
        raise ConfigError(f"{p}: front matter has no 'name'")
    description = text_of(meta, "description")
    skill = skill_from_body(body, p, description or name)
    description = description or skill.activation
    ours = isinstance(meta.get("metadata"), dict) and "deltamem-hits" in meta["metadata"]
    return ParsedSkill(name, description, skill, p, _metadata_counts(meta, p),
                       description if ours else skill_key(name, description))


def skill_key(name: str, description: str) -> str:
    """A third-party skill's retrieval key: its name (as words) and the first sentence of its
    description, e.g. ``"pdf fill: Fill in PDF forms."``."""
    first = _SENTENCE_END.split(" ".join(description.split()), maxsplit=1)[0]
    words = " ".join(re.split(r"[-_\s]+", name)).strip()
    if not first or first.lower().startswith(words.lower()):
        return first or words
    return f"{words}: {first}"


def _metadata_counts(meta: dict[str, Any], path: Path) -> tuple[int, int, int]:
    """The counters our export keeps in the agent-skills ``metadata`` map (strings there)."""
    extra = meta.get("metadata")
    if not isinstance(extra, dict):
        return (0, 0, 0)
    try:
        hits, successes, failures = (int(extra.get(f"deltamem-{k}", 0)) for k in COUNTERS)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{path}: metadata deltamem counters must be whole numbers ({exc})"
                          ) from None
    if min(hits, successes, failures) < 0:
        raise ConfigError(f"{path}: metadata deltamem counters must be >= 0")
    return hits, successes, failures


def skill_from_body(body: str, path: Path, fallback: str, *, exact: bool = False) -> Skill:
    """A skill from a SKILL.md body; ``exact`` (our own export) keeps an empty activation."""
    sections = _sections(body)
    steps = _steps(sections.get("steps", _without_sections(body, ("when to use", "done when"))))
    if not steps:
        raise ConfigError(f"{path}: no steps found (numbered lines, bullets or paragraphs)")
    activation = _clean(sections.get("when to use", ""))
    if activation == UNSPECIFIED:
        activation = ""
    if not activation and not exact:
        activation = fallback
    return Skill(activation=activation, steps=steps,
                 termination=_clean(sections.get("done when", "")))


def _sections(body: str) -> dict[str, str]:
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in body.splitlines():
        if line.startswith("## "):
            current = out.setdefault(line[3:].strip().lower(), [])
        elif current is not None:
            current.append(line)
    return {k: "\n".join(v) for k, v in out.items()}


def _without_sections(body: str, names: tuple[str, ...]) -> str:
    kept: list[str] = []
    skipping = False
    for line in body.splitlines():
        if line.startswith("## "):
            skipping = line[3:].strip().lower() in names
        if not skipping:
            kept.append(line)
    return "\n".join(kept)


def _steps(source: str) -> tuple[str, ...]:
    """The numbered lines of ``source``; without any, its prose blocks (:func:`_blocks`)."""
    numbered = tuple(m.group(2) for line in source.splitlines() if (m := _STEP.match(line)))
    return numbered or tuple(_blocks(source))


def _blocks(text: str) -> list[str]:
    """Paragraphs (lines joined), bullet items and fenced code blocks (kept verbatim), in
    order; headings and blank lines separate them and are dropped."""
    blocks: list[str] = []
    current: list[str] = []
    fence: str | None = None

    def flush() -> None:
        if current:
            blocks.append(" ".join(current))
            current.clear()

    for line in text.splitlines():
        stripped = line.strip()
        if fence is not None:
            current.append(line)
            if stripped.startswith(fence):
                blocks.append("\n".join(current))
                current.clear()
                fence = None
        elif stripped.startswith(_FENCES):
            flush()
            fence = stripped[:3]
            current.append(line)
        elif not stripped or stripped.startswith("#"):
            flush()
        elif bullet := _BULLET.match(line):
            flush()
            current.append(bullet.group(1))
        else:
            current.append(stripped)
    if fence is not None:  # an unclosed fence: keep what it holds
        blocks.append("\n".join(current))
    else:
        flush()
    return [block for block in blocks if block.strip()]


def _clean(text: str) -> str:
    return " ".join(text.split())


def find_skill_files(src: str | Path) -> list[Path]:
    """Every ``SKILL.md`` under ``src`` (a folder of skill folders, or one skill file); linked
    folders are not entered."""
    base = Path(src)
    if base.is_file():
        return [base]
    if not base.is_dir():
        raise ConfigError(f"{base}: no such folder")
    return find_files(base, "SKILL.md")


def import_skills(mem: DeltaMem, src: str | Path) -> dict[str, Any]:
    """Add every SKILL.md under ``src`` to ``mem`` as a task-tree root, in one transaction
    (through :meth:`DeltaMem.add_nodes`: redacted and embedded there).

    Returns:
        ``{"imported": [node ids], "skipped": [paths already present]}``.
    """
    parsed = [parse_skill_md(p) for p in find_skill_files(src)]
    return add_skill_roots(mem, parsed)


def add_skill_roots(mem: DeltaMem, skills: list[ParsedSkill]) -> dict[str, Any]:
    """Write parsed skills as task roots (with the counters their metadata carries) in one
    transaction (all or nothing); a root identical to a stored one is skipped."""
    return add_entries(mem, [skill_entry(s) for s in skills])


def skill_entry(s: ParsedSkill) -> Entry:
    return Entry(s.path, Tree.TASK, s.key or s.description, s.skill, {"skill_name": s.name},
                 counts=s.counts)
