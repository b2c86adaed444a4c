"""Skills as files: export task-tree roots as ``SKILL.md`` folders, and import them back.

Layout written by :func:`export_skills` (the common agent-skills layout)::

    <dir>/<slug>/SKILL.md          one per task-tree skill root (front matter: name, description)
    <dir>/knowledge/<slug>.md      one per environment-tree root

Only roots are exported: a root holds a full experience (consolidated roots hold a whole
compiled chain), while a delta means something only on top of its chain. Failure lessons are
warnings, not skills, so they stay in the memory.

:func:`import_skills` reads ``SKILL.md`` files (ours or hand-written ones) and adds each as a
task-tree root, all in one transaction; an identical root already in the memory is skipped, so
importing the same folder twice changes nothing. Front matter is YAML (read with PyYAML, so block
scalars such as ``description: >-`` work). The steps are the numbered lines; a prose skill
without any becomes a root whose steps are its paragraphs, bullet items and code blocks.

The second layout, :func:`export_memory_md` (``--layout memory-md``), is the ``MEMORY.md`` index
plus one file per composed chain that memory-file readers load on demand; there every node is
exported, a delta as its full composition, with its id, chain and counters in the front matter.
:func:`import_layout` reads either layout back; a ``MEMORY.md`` folder comes back as the same
trees (roots and deltas, ids, counters), so export -> import -> export writes the same bytes.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from deltamem._util.usage import Usage
from deltamem.core.delta import diff
from deltamem.core.model import (
    Experience,
    Knowledge,
    Lesson,
    Node,
    NodeKind,
    Outcome,
    Skill,
    Tree,
)
from deltamem.core.render import (
    LESSON_HEAD,
    render_experience,
    render_knowledge,
    skill_markdown,
)
from deltamem.engine.memory import DeltaMem, new_node_id
from deltamem.errors import ConfigError

KNOWLEDGE_DIR = "knowledge"
_SLUG = re.compile(r"[^a-z0-9]+")
_STEP = re.compile(r"^\s*(\d+)[.)]\s+(.+?)\s*$")
_BULLET = re.compile(r"^\s*[-*+]\s+(.+?)\s*$")
_FENCES = ("```", "~~~")
_MAX_SLUG = 60
UNSPECIFIED = "(unspecified)"  # what skill_markdown writes for an empty activation
COUNTERS = ("hits", "successes", "failures")


@dataclass(frozen=True, slots=True)
class ParsedSkill:
    """A skill read from a SKILL.md file."""

    name: str
    description: str
    skill: Skill
    path: Path
    counts: tuple[int, int, int] = (0, 0, 0)  # hits, successes, failures (our export's metadata)


def slugify(text: str) -> str:
    """A lowercase, hyphenated folder name (``"skill"`` when nothing is left)."""
    slug = _SLUG.sub("-", text.lower()).strip("-")[:_MAX_SLUG].strip("-")
    return slug or "skill"


def _unique(slug: str, taken: dict[str, int]) -> str:
    """The first of ``slug``, ``slug-2``, ``slug-3``, ... not in ``taken`` (names given so far,
    each with the next suffix to try for it), recorded: names are never freed, so the search
    for a name asked again starts where the last one stopped (linear in the names, where
    trying every suffix from 2 was quadratic in the names sharing one slug)."""
    n = taken.get(slug)
    if n is None:
        taken[slug] = 2
        return slug
    candidate = f"{slug}-{n}"
    while candidate in taken:
        n += 1
        candidate = f"{slug}-{n}"
    taken[slug] = n + 1
    taken[candidate] = 2
    return candidate


def export_skills(mem: DeltaMem, out_dir: str | Path) -> dict[str, Any]:
    """Write every skill root and knowledge root of ``mem`` under ``out_dir``.

    Returns:
        ``{"skills": [paths], "knowledge": [paths]}`` relative to ``out_dir``.
    """
    root = Path(out_dir)
    taken: dict[str, int] = {KNOWLEDGE_DIR: 2}
    written: dict[str, Any] = {"skills": [], "knowledge": []}
    for node in mem.nodes(Tree.TASK):
        if not node.is_root or not isinstance(node.content, Skill):
            continue
        imported_name = node.meta.get("skill_name")  # the name a SKILL.md gave it, if any
        name = _unique(slugify(str(imported_name or "") or node.key
                               or node.content.activation), taken)
        description = node.content.activation or node.key
        path = root / name / "SKILL.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        meta = {"name": name, "description": description,
                "metadata": {f"deltamem-{k}": str(getattr(node, k)) for k in COUNTERS}}
        path.write_text(_with_front_matter(meta, _skill_body(name, description, node.content)),
                        encoding="utf-8")
        written["skills"].append(str(path.relative_to(root)))
    taken_k: dict[str, int] = {}
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
    return _with_front_matter({"name": name, "description": knowledge.trigger},
                              f"# {name}\n\n{render_knowledge(knowledge)}\n")


def _with_front_matter(meta: dict[str, Any], body: str) -> str:
    """``body`` under a YAML front matter block (written by PyYAML, so any text reads back)."""
    head = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=1 << 30)
    return f"---\n{head}---\n\n{body}"


def _skill_body(name: str, description: str, skill: Skill) -> str:
    """The Markdown body of :func:`skill_markdown` (its front matter is written here)."""
    return skill_markdown(name, description, skill).split("---\n", 2)[2].lstrip("\n")


def parse_skill_md(path: str | Path) -> ParsedSkill:
    """Read one SKILL.md: YAML front matter ``name``/``description``, sections, steps.

    ``## When to use`` gives the activation (else the description); numbered lines give the
    steps (those under ``## Steps`` when that section exists); ``## Done when`` the termination.
    A prose skill (no numbered line) gets its paragraphs, bullet items and code blocks as steps,
    in order (headings and the two sections above left out).

    Raises:
        ConfigError: no front matter with a name, front matter that is not YAML, or no steps.
    """
    p = Path(path)
    meta, body = _front_matter(_read(p), p)
    name = _text(meta, "name")
    if not name:
        raise ConfigError(f"{p}: front matter has no 'name'")
    description = _text(meta, "description")
    skill = _skill_from_body(body, p, description or name)
    return ParsedSkill(name, description or skill.activation, skill, p, _metadata_counts(meta, p))


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


def _skill_from_body(body: str, path: Path, fallback: str, *, exact: bool = False) -> Skill:
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


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def _front_matter(text: str, path: Path) -> tuple[dict[str, Any], str]:
    """The YAML front matter (keys lowercased) and the body after it."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        raise ConfigError(f"{path}: missing front matter (a '---' block with name/description)")
    end = next((i for i, line in enumerate(lines[1:], 1) if line.strip() in ("---", "...")),
               None)
    if end is None:
        raise ConfigError(f"{path}: front matter is not closed with '---'")
    try:
        meta = yaml.safe_load("\n".join(lines[1:end]))
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        at = f" at line {where.line + 2}" if where is not None else ""
        problem = getattr(exc, "problem", None) or type(exc).__name__
        raise ConfigError(f"{path}: front matter is not valid YAML{at}: {problem}") from None
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise ConfigError(f"{path}: front matter must be 'key: value' lines (YAML mapping)")
    return {str(k).strip().lower(): v for k, v in meta.items()}, "\n".join(lines[end + 1:])


def _text(meta: dict[str, Any], key: str) -> str:
    value = meta.get(key)
    if value is None or isinstance(value, dict | list):
        return ""
    return str(value).strip()


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
    """Write parsed skills as task roots (with the counters their metadata carries) in one
    transaction (all or nothing); a root identical to a stored one is skipped."""
    return _add_entries(mem, [_skill_entry(s) for s in skills])


def _skill_entry(s: ParsedSkill) -> _Entry:
    return _Entry(s.path, Tree.TASK, s.description, s.skill, {"skill_name": s.name},
                  counts=s.counts)


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
    (``deltamem.formats.api.SkillsExportOut``)."""
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
        taken: dict[str, int] = {}
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
                      taken: dict[str, int]) -> tuple[str, str]:
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
    meta: dict[str, Any] = {
        "name": name, "description": node.key, "type": experience.TYPE,
        "tree": node.tree.value, "node": node.id, "chain": [n.id for n in chain],
        "outcome": node.outcome.value, "hits": node.hits, "successes": node.successes,
        "failures": node.failures, "created": node.created_at}
    if node.consolidated:
        meta["consolidated"] = True
    if node.lineage:
        meta["lineage"] = list(node.lineage)
    if isinstance(experience, Skill):
        body = _skill_body(name, node.key, experience)
    else:
        body = f"# {name}\n\n{render_experience(experience)}\n"
    return _with_front_matter(meta, body)


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
    """Read a :func:`export_memory_md` folder back in one transaction.

    Files that carry a node id and chain (our export) come back as the same trees: the same ids,
    roots and deltas (each delta stored as the patch from its parent's composition to its own),
    outcomes, counters and creation times, so exporting the result again writes the same bytes.
    A node whose id is already in the space with the same key and experience is skipped (a
    second import changes nothing); with other content it is an error. Hand-written files
    without ids are added as roots (identical roots skipped).

    Raises:
        ConfigError: a file that does not parse, or a delta whose parent is neither in the
            folder nor in the space; nothing is written.
    """
    base = Path(src)
    entries = [_memory_entry(p, kind) for kind in (SKILLS_DIR, KNOWLEDGE_DIR, LESSONS_DIR)
               for p in sorted((base / kind).glob("*.md"))]
    return _add_entries(mem, [e for e in entries if e is not None])


@dataclass(slots=True)
class _Entry:
    """One node read from a MEMORY.md layout file."""

    path: Path
    tree: Tree
    key: str
    experience: Experience
    meta: dict[str, Any]
    node_id: str | None = None
    chain: tuple[str, ...] = ()
    outcome: Outcome = Outcome.SUCCESS
    counts: tuple[int, int, int] = (0, 0, 0)  # hits, successes, failures
    consolidated: bool = False
    lineage: tuple[str, ...] = ()
    created: float = 0.0


def _memory_entry(path: Path, kind: str) -> _Entry | None:
    meta, body = _front_matter(_read(path), path)
    node_id = _text(meta, "node")
    if not node_id:  # hand-written: a skill or scene root; a lesson alone is not a skill
        if kind == LESSONS_DIR:
            return None
        if kind == SKILLS_DIR:
            return _skill_entry(parse_skill_md(path))
        knowledge = _knowledge_from(meta, body, path)
        return _Entry(path, Tree.ENV, knowledge.trigger, knowledge, {})
    try:
        tree = Tree(_text(meta, "tree") or (Tree.ENV.value if kind == KNOWLEDGE_DIR
                                             else Tree.TASK.value))
        outcome = Outcome(_text(meta, "outcome") or Outcome.SUCCESS.value)
        chain = _chain_ids(meta.get("chain"), node_id)
        counts = tuple(_count(meta, k) for k in ("hits", "successes", "failures"))
        created = float(meta.get("created") or 0.0)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{path}: bad front matter: {exc}") from None
    key = _text(meta, "description")
    if not key:
        raise ConfigError(f"{path}: front matter has no 'description' (the node's key)")
    kind_of = _text(meta, "type") or (Knowledge.TYPE if tree is Tree.ENV else Skill.TYPE)
    experience: Experience
    if kind_of == Skill.TYPE:
        experience = _skill_from_body(body, path, key, exact=True)
    elif kind_of == Lesson.TYPE:
        experience = _lesson_from(body, path)
    else:
        experience = _knowledge_from(meta, body, path)
    lineage = meta.get("lineage") or []
    return _Entry(path, tree, key, experience, {}, node_id, chain, outcome,
                  (counts[0], counts[1], counts[2]), bool(meta.get("consolidated")),
                  tuple(str(i) for i in lineage), created)


def _chain_ids(raw: Any, node_id: str) -> tuple[str, ...]:
    if isinstance(raw, str):  # files written before the chain was a YAML list
        raw = [part.strip() for part in raw.split(">")]
    chain = tuple(str(i) for i in raw or [node_id])
    if not chain or chain[-1] != node_id:
        raise ValueError(f"its chain must end with its node {node_id!r}")
    return chain


def _count(meta: dict[str, Any], key: str) -> int:
    value = meta.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{key!r} must be a whole number >= 0, not {value!r}")
    return value


def _add_entries(mem: DeltaMem, entries: list[_Entry]) -> dict[str, Any]:
    """Write the entries in one transaction: parents before children, skipping what is there."""
    existing = {n.id: n for n in mem.nodes()}
    roots = {(n.tree, n.key, n.content) for n in existing.values() if n.is_root}
    composed: dict[str, Experience] = {}
    depths = {i: n.depth for i, n in existing.items()}
    new: list[tuple[Node, _Entry]] = []
    skipped: list[str] = []
    for entry in sorted(entries, key=lambda e: (len(e.chain) > 1, e.created)):
        node = _entry_node(mem, entry, existing, roots, composed, depths)
        if node is None:
            skipped.append(str(entry.path))
        else:
            new.append((node, entry))
    if new:
        # the facade's embedding: cached, and each vector checked
        vectors = mem._embed([node.key for node, _ in new], Usage())
        with mem.transaction():
            for (node, _), vector in zip(new, vectors, strict=True):
                mem.store.add_node(mem.space, node, vector)
    return {"imported": [node.id for node, _ in new], "skipped": skipped}


def _entry_node(mem: DeltaMem, entry: _Entry, existing: dict[str, Node],
                roots: set[tuple[Tree, str, Experience | None]],
                composed: dict[str, Experience], depths: dict[str, int]) -> Node | None:
    """The node to store for ``entry``, or None when it is already in the space."""
    meta = {"imported_from": _source(entry.path), **entry.meta}
    if entry.node_id is None:  # a hand-written root
        if (entry.tree, entry.key, entry.experience) in roots:
            return None
        roots.add((entry.tree, entry.key, entry.experience))
        return Node(id=new_node_id(entry.tree), tree=entry.tree, kind=NodeKind.ROOT,
                    outcome=Outcome.SUCCESS, key=entry.key, content=entry.experience,
                    hits=entry.counts[0], successes=entry.counts[1], failures=entry.counts[2],
                    created_at=time.time(), meta=meta)
    node_id = entry.node_id
    if node_id in existing or node_id in composed:
        same = node_id in composed or (existing[node_id].key == entry.key
                                       and mem.experience(node_id) == entry.experience)
        if not same:
            raise ConfigError(f"{entry.path}: node {node_id} is already in space "
                              f"{mem.space!r} with other content")
        composed[node_id] = entry.experience
        return None
    if len(entry.chain) > mem.settings.max_depth:
        raise ConfigError(f"{entry.path}: a chain of {len(entry.chain)} nodes is deeper than "
                          f"max_depth {mem.settings.max_depth}")
    composed[node_id] = entry.experience
    common: dict[str, Any] = {"id": node_id, "tree": entry.tree, "outcome": entry.outcome,
              "key": entry.key,
              "hits": entry.counts[0], "successes": entry.counts[1],
              "failures": entry.counts[2], "consolidated": entry.consolidated,
              "lineage": entry.lineage, "created_at": entry.created or time.time(),
              "meta": meta}
    if len(entry.chain) == 1:
        depths[node_id] = 1
        return Node(kind=NodeKind.ROOT, content=entry.experience, **common)
    parent_id = entry.chain[-2]
    parent = existing.get(parent_id)
    if parent_id not in composed and parent is not None:
        composed[parent_id] = mem.experience(parent_id)
    if parent_id not in composed or (parent is not None and parent.tree is not entry.tree):
        raise ConfigError(f"{entry.path}: its parent {parent_id} is neither in the folder nor "
                          f"in space {mem.space!r} (export the whole memory again)")
    depths[node_id] = depths[parent_id] + 1
    return Node(kind=NodeKind.DELTA, parent_id=parent_id, depth=depths[node_id],
                patch=diff(composed[parent_id], entry.experience), **common)


def _knowledge_from(meta: dict[str, Any], body: str, path: Path) -> Knowledge:
    """Scene knowledge from a knowledge file: ``Applies to:`` (else the description) and the
    ``- fact`` lines."""
    trigger = ""
    for line in body.splitlines():
        if line.startswith("Applies to: "):
            trigger = line[len("Applies to: "):].strip()
            break
    trigger = trigger or _text(meta, "description")
    facts = tuple(line[2:].strip() for line in body.splitlines() if line.startswith("- "))
    if not trigger or not facts:
        raise ConfigError(f"{path}: a knowledge file needs a description and '- fact' lines")
    return Knowledge(trigger=trigger, facts=facts)


_LESSON_ITEMS = {"- Failed: ": "failed", "- Worked (in that attempt): ": "worked",
                 "- Not tried: ": "untried"}


def _lesson_from(body: str, path: Path) -> Lesson:
    """A failure lesson from the text :func:`render_lesson` writes."""
    situation = ""
    items: dict[str, list[str]] = {"failed": [], "worked": [], "untried": []}
    for line in body.splitlines():
        if line.startswith("Situation: "):
            situation = line[len("Situation: "):].strip()
        for prefix, field_name in _LESSON_ITEMS.items():
            if line.startswith(prefix):
                items[field_name].append(line[len(prefix):].strip())
    if LESSON_HEAD not in body and not situation:
        raise ConfigError(f"{path}: a lesson file needs a 'Situation:' line")
    return Lesson(situation=situation, failed=tuple(items["failed"]),
                  untried=tuple(items["untried"]), worked=tuple(items["worked"]))
