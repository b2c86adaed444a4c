"""Turning recalled chains into text for an agent's prompt, and skills into SKILL.md.

Two styles:

* ``composed`` (default) -- the chain's exact composition, shown as one skill and one body of
  knowledge. Failure lessons are shown as warnings, never as steps to follow.
* ``patches`` -- the paper's layout: the base experience, then each delta as a numbered patch.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from deltamem.core.delta import Edit, Patch, Put, SetText, Splice, apply, apply_text_edits
from deltamem.core.model import Experience, Knowledge, Lesson, Node, Outcome, Skill
from deltamem.core.tree import compose_chain, success_prefix


class Style(StrEnum):
    COMPOSED = "composed"
    PATCHES = "patches"


TASK_HEADER = (
    "# Skill memory (procedural)\n"
    "Recalled from past episodes of similar tasks. Follow the procedure where it fits the current "
    "task; names and locations come from past episodes and may need adapting."
)
ENV_HEADER = (
    "# Scene knowledge (declarative)\n"
    "Background facts about similar scenes, not instructions. Use them to decide where to look "
    "and how things behave; trust the current observations when they disagree."
)


def render_skill(skill: Skill) -> str:
    lines = [f"When: {skill.activation}"] if skill.activation else []
    lines += [f"{i}. {step}" for i, step in enumerate(skill.steps, 1)]
    if skill.termination:
        lines.append(f"Done when: {skill.termination}")
    return "\n".join(lines)


def render_lesson(lesson: Lesson) -> str:
    lines = [
        "WARNING - a past attempt at this situation FAILED. Do not follow it as a procedure.",
        f"Situation: {lesson.situation}",
    ]
    lines += [f"- Tried and failed: {item}" for item in lesson.failed]
    lines += [f"- Not yet tried: {item}" for item in lesson.untried]
    return "\n".join(lines)


def render_knowledge(knowledge: Knowledge) -> str:
    lines = [f"Applies to: {knowledge.trigger}"] if knowledge.trigger else []
    lines += [f"- {fact}" for fact in knowledge.facts]
    return "\n".join(lines)


def render_experience(exp: Experience) -> str:
    if isinstance(exp, Skill):
        return render_skill(exp)
    if isinstance(exp, Lesson):
        return render_lesson(exp)
    return render_knowledge(exp)


def render_patch(patch: Patch, base: Experience) -> str:
    """A patch as short human-readable edit lines (positions are 1-based).

    ``base`` is the experience the patch applies to; word-level edits are shown as the revised
    text, which needs it.
    """
    lines: list[str] = []
    revised = apply(base, patch)
    for op in patch:
        if isinstance(op, Edit):
            if op.index is None:
                lines.append(f"Revise {op.field}: {getattr(revised, op.field)}")
            else:
                lines.append(f"Revise {op.field} {op.index + 1}: "
                             f"{getattr(base, op.field)[op.index]} -> "
                             f"{apply_text_edits(getattr(base, op.field)[op.index], op.edits)}")
        elif isinstance(op, Put):
            lines.append("Replace everything with:\n" + render_experience(op.value))
        elif isinstance(op, SetText):
            lines.append(f"Set {op.field}: {op.value}")
        else:
            lines.append(_render_splice(op))
    return "\n".join(lines)


def _render_splice(op: Splice) -> str:
    items = "; ".join(op.items)
    span = f"{op.field} {op.start + 1}" + (f"-{op.stop}" if op.stop - op.start > 1 else "")
    if op.start == op.stop:
        return f"Insert into {op.field} before item {op.start + 1}: {items}"
    if not op.items:
        return f"Remove {span}"
    return f"Replace {span} with: {items}"


def render_chain(chain: Sequence[Node], style: Style = Style.COMPOSED) -> str:
    """One tree's recalled chain (root first) as prompt text; empty string for no chain."""
    if not chain:
        return ""
    if style is Style.PATCHES:
        return _render_patches(chain)
    parts: list[str] = []
    usable = success_prefix(chain)
    if usable:
        parts.append(render_experience(compose_chain(usable)))
    if chain[-1].outcome is Outcome.FAILURE:
        lesson = compose_chain(chain)
        if isinstance(lesson, Lesson):
            parts.append(render_lesson(lesson))
    return "\n\n".join(parts)


def _render_patches(chain: Sequence[Node]) -> str:
    assert chain[0].content is not None
    composed = chain[0].content
    blocks = [f"[Base] {_status(chain[0])}\n{render_experience(composed)}"]
    for i, node in enumerate(chain[1:], 1):
        blocks.append(f"[Patch {i}] {_status(node)}\n{render_patch(node.patch, composed)}")
        composed = apply(composed, node.patch)
    return "\n\n".join(blocks)


def _status(node: Node) -> str:
    return "(success)" if node.outcome is Outcome.SUCCESS else "(FAILED - a warning, not a guide)"


def render_context(
    task_chain: Sequence[Node], env_chain: Sequence[Node], style: Style = Style.COMPOSED
) -> str:
    """Both trees' recalls fused into one memory block; empty when neither tree matched."""
    sections = []
    task_text = render_chain(task_chain, style)
    if task_text:
        sections.append(f"{TASK_HEADER}\n\n{task_text}")
    env_text = render_chain(env_chain, style)
    if env_text:
        sections.append(f"{ENV_HEADER}\n\n{env_text}")
    return "\n\n---\n\n".join(sections)


def skill_markdown(name: str, description: str, skill: Skill) -> str:
    """A skill in the common agent-skills ``SKILL.md`` layout (YAML front matter + body)."""
    safe = description.replace("\n", " ").replace('"', "'")
    body = [
        "---",
        f"name: {name}",
        f'description: "{safe}"',
        "---",
        "",
        f"# {name}",
        "",
        "## When to use",
        "",
        skill.activation or "(unspecified)",
        "",
        "## Steps",
        "",
    ]
    body += [f"{i}. {step}" for i, step in enumerate(skill.steps, 1)]
    if skill.termination:
        body += ["", "## Done when", "", skill.termination]
    return "\n".join(body) + "\n"
