"""The ``MEMORY.md`` layout: an index plus one file per composed chain, and back.

Layout written by :func:`export_memory_md` (what Claude Code auto-memory, the Agents SDK
sandbox memory and similar read)::

    <dir>/MEMORY.md               index: skill roots with their variants, scenes, warnings
    <dir>/skills/<slug>.md        one per successful task node: its composed chain
    <dir>/knowledge/<slug>.md     one per environment node: the scene's composed knowledge
    <dir>/lessons/<slug>.md       one per failure lesson (a warning, never a procedure)

Every node is exported, a delta as its full composition, with its id, chain and counters in
the front matter -- except what a correction took back (``engine.corrections.withdrawn``),
which is never handed out as guidance. :func:`import_memory_md` reads it back as the same trees
(roots and deltas, ids, counters), so export -> import -> export writes the same bytes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deltamem.core.model import Knowledge, Lesson, Node, Outcome, Skill, Tree
from deltamem.core.render import LESSON_HEAD, render_experience
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
    one_line,
    read_text,
    slugify,
    text_of,
    unique,
    with_front_matter,
)
from deltamem.faces.skills.skill_md import (
    parse_skill_md,
    skill_body,
    skill_entry,
    skill_from_body,
)

MEMORY_INDEX = "MEMORY.md"
SKILLS_DIR = "skills"
LESSONS_DIR = "lessons"
INDEX_LINES = 200


def export_memory_md(mem: DeltaMem, out_dir: str | Path) -> dict[str, Any]:
    """Write the trees as a ``MEMORY.md`` index plus one file per composed chain (see the
    module docstring; nothing is written through a link in ``out_dir``).

    The index stays within ``INDEX_LINES`` lines; past that it says how many entries it left
    out (their files are still written). Returns the written paths relative to ``out_dir``.

    Raises:
        ConfigError: a link planted in ``out_dir`` where a folder or file would be written.
    """
    folder = Folder(out_dir)
    written: dict[str, Any] = {"index": MEMORY_INDEX, "skills": [], "knowledge": [],
                               "lessons": []}
    sections: dict[str, list[str]] = {"skills": [], "knowledge": [], "lessons": []}
    gone = withdrawn(list(mem.nodes()))
    for tree in (Tree.TASK, Tree.ENV):
        children: dict[str | None, list[Node]] = {}
        for node in sorted(mem.nodes(tree), key=lambda n: n.created_at):
            if node.id not in gone:
                children.setdefault(node.parent_id, []).append(node)
        taken: dict[str, int] = {}
        stack = [(top, 0, [top]) for top in reversed(children.get(None, []))]
        while stack:
            node, depth, chain = stack.pop()
            kind, rel = _write_chain_file(mem, folder, node, chain, taken)
            written[kind].append(rel)
            label = "variant: " if depth else ""
            counts = f"({node.successes} ok of {node.hits} uses)"
            sections[kind].append(f"{'  ' * depth}- [{Path(rel).stem}]({rel}) {label}"
                                  f"{one_line(node.key)} {counts}")
            stack += [(c, depth + 1, [*chain, c]) for c in reversed(children.get(node.id, []))]
    folder.write(MEMORY_INDEX, _index_markdown(sections))
    return written


def _write_chain_file(mem: DeltaMem, folder: Folder, node: Node, chain: list[Node],
                      taken: dict[str, int]) -> tuple[str, str]:
    """Write one node's composed chain; return its section (skills/knowledge/lessons) and path."""
    if node.outcome is Outcome.FAILURE:
        kind = LESSONS_DIR
    else:
        kind = SKILLS_DIR if node.tree is Tree.TASK else KNOWLEDGE_DIR
    name = unique(slugify(node.key), taken)
    rel = f"{kind}/{name}.md"
    folder.write(rel, _chain_markdown(name, node, chain, mem.experience(node.id)))
    return kind, rel


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
        body = skill_body(name, node.key, experience)
    else:
        body = f"# {name}\n\n{render_experience(experience)}\n"
    return with_front_matter(meta, body)


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


def import_memory_md(mem: DeltaMem, src: str | Path) -> dict[str, Any]:
    """Read a :func:`export_memory_md` folder back in one transaction (through
    :meth:`DeltaMem.add_nodes`: redacted and embedded there).

    Files that carry a node id and chain (our export) come back as the same trees: the same ids,
    roots and deltas (each delta stored as the patch from its parent's composition to its own),
    outcomes, counters and creation times, so exporting the result again writes the same bytes.
    A node whose id is already in the space with the same key and experience is skipped (a
    second import changes nothing); with other content it is an error. Hand-written files
    without ids are added as roots (identical roots skipped).

    Raises:
        ConfigError: a file that does not parse or is not a small regular file, or a delta
            whose parent is neither in the folder nor in the space; nothing is written.
    """
    base = Path(src)
    entries = []
    for kind in (SKILLS_DIR, KNOWLEDGE_DIR, LESSONS_DIR):
        sub = base / kind
        if sub.is_symlink():
            raise ConfigError(f"{sub}: is a symbolic link; refusing to read through it")
        if sub.is_dir():
            entries += [_memory_entry(p, kind) for p in find_files(sub, suffix=".md")
                        if p.parent == sub]
    return add_entries(mem, [e for e in entries if e is not None])


def _memory_entry(path: Path, kind: str) -> Entry | None:
    meta, body = front_matter(read_text(path), path)
    node_id = text_of(meta, "node")
    if not node_id:  # hand-written: a skill or scene root; a lesson alone is not a skill
        if kind == LESSONS_DIR:
            return None
        if kind == SKILLS_DIR:
            return skill_entry(parse_skill_md(path))
        knowledge = _knowledge_from(meta, body, path)
        return Entry(path, Tree.ENV, knowledge.trigger, knowledge, {})
    try:
        tree = Tree(text_of(meta, "tree") or (Tree.ENV.value if kind == KNOWLEDGE_DIR
                                               else Tree.TASK.value))
        outcome = Outcome(text_of(meta, "outcome") or Outcome.SUCCESS.value)
        chain = _chain_ids(meta.get("chain"), node_id)
        counts = tuple(_count(meta, k) for k in ("hits", "successes", "failures"))
        created = float(meta.get("created") or 0.0)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{path}: bad front matter: {exc}") from None
    key = text_of(meta, "description")
    if not key:
        raise ConfigError(f"{path}: front matter has no 'description' (the node's key)")
    kind_of = text_of(meta, "type") or (Knowledge.TYPE if tree is Tree.ENV else Skill.TYPE)
    experience: Skill | Knowledge | Lesson
    if kind_of == Skill.TYPE:
        experience = skill_from_body(body, path, key, exact=True)
    elif kind_of == Lesson.TYPE:
        experience = _lesson_from(body, path)
    else:
        experience = _knowledge_from(meta, body, path)
    lineage = meta.get("lineage") or []
    if not isinstance(lineage, list):
        raise ConfigError(f"{path}: bad front matter: 'lineage' must be a list of node ids")
    return Entry(path, tree, key, experience, {}, node_id, chain, outcome,
                 (counts[0], counts[1], counts[2]), bool(meta.get("consolidated")),
                 tuple(str(i) for i in lineage), created)


def _chain_ids(raw: Any, node_id: str) -> tuple[str, ...]:
    if isinstance(raw, str):  # files written before the chain was a YAML list
        raw = [part.strip() for part in raw.split(">")]
    if raw is not None and not isinstance(raw, list):
        raise ValueError("its chain must be a list of node ids")
    chain = tuple(str(i) for i in raw or [node_id])
    if not chain or chain[-1] != node_id:
        raise ValueError(f"its chain must end with its node {node_id!r}")
    return chain


def _count(meta: dict[str, Any], key: str) -> int:
    value = meta.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{key!r} must be a whole number >= 0, not {value!r}")
    return value


def _knowledge_from(meta: dict[str, Any], body: str, path: Path) -> Knowledge:
    """Scene knowledge from a knowledge file: ``Applies to:`` (else the description) and the
    ``- fact`` lines."""
    trigger = ""
    for line in body.splitlines():
        if line.startswith("Applies to: "):
            trigger = line[len("Applies to: "):].strip()
            break
    trigger = trigger or text_of(meta, "description")
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
