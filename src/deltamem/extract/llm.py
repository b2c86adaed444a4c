"""The LLM extractor: a model reads the episode (and the matched experience) and writes the new
full experience; consolidation asks it to generalise a chain's composition into one root.

Which prompt runs (files in ``extract/prompts/``):

============  ==========  =============================  ====================
tree          outcome     matched experience             prompt
============  ==========  =============================  ====================
task          success     none, or not a Skill           ``skill_root``
task          success     a Skill                        ``skill_update``
task          failure     any (shown as context)         ``lesson``
env           any         none, or not Knowledge         ``knowledge_root``
env           any         Knowledge                      ``knowledge_update``
============  ==========  =============================  ====================

Update prompts ask for the NEW FULL experience with unchanged items copied word for word; the
engine diffs it against the chain, so an unchanged answer costs nothing to store.

Every validated answer is normalised to the properties the trace extractor keeps
(:func:`normalise`): facts hold one statement per subject (a later fact about a subject
supersedes an earlier one, ``core.knowledge.supersede``), and a skill never repeats a step
immediately (a loop such as "look around, look around" is one step).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from string import Template
from typing import Any

from deltamem._util.usage import Usage
from deltamem.core.knowledge import supersede
from deltamem.core.model import Episode, Experience, Knowledge, Lesson, Skill, Tree
from deltamem.errors import ExtractionError
from deltamem.extract.base import Extraction, ExtractRequest
from deltamem.extract.schemas import (
    ANSWER_FOR,
    MAX_ITEMS,
    KnowledgeAnswer,
    LessonAnswer,
    SkillAnswer,
    answer_schema,
)
from deltamem.extract.structured import ask_structured
from deltamem.llm.base import LLM, Message

PROMPT_NAMES: tuple[str, ...] = (
    "skill_root",
    "skill_update",
    "lesson",
    "knowledge_root",
    "knowledge_update",
    "compile_skill",
    "compile_knowledge",
)
_USER_MARK = "=== user ==="
_ELLIPSIS = "…"
# Compiled steps may be reworded but must be recognisably an input step: at least this share of
# a compiled step's content words has to appear in one input step.
COMPILE_MIN_OVERLAP = 0.5
_STOPWORDS = frozenset(
    {
        "a", "an", "the", "to", "of", "in", "on", "at", "and", "or", "for", "with", "from",
        "into", "onto", "by", "is", "are", "be", "it", "its", "this", "that", "then", "you",
        "your",
    }
)
_WORD = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True, slots=True)
class Prompt:
    """A prompt file split into its system text and its user-message template."""

    name: str
    system: str
    user: Template

    def render(self, **values: str) -> list[Message]:
        """Chat messages with ``$placeholders`` filled (a missing value raises ``KeyError``)."""
        return [
            {"role": "system", "content": self.system},
            {"role": "user", "content": self.user.substitute(values).strip()},
        ]


@cache
def load_prompt(name: str) -> Prompt:
    """Load ``extract/prompts/<name>.md`` (cached).

    Raises:
        KeyError: there is no prompt of that name.
    """
    if name not in PROMPT_NAMES:
        raise KeyError(f"no prompt {name!r}; known: {', '.join(PROMPT_NAMES)}")
    text = resources.files("deltamem.extract").joinpath("prompts", f"{name}.md").read_text("utf-8")
    system, mark, user = text.partition(_USER_MARK)
    if not mark:
        raise KeyError(f"prompt {name!r} has no {_USER_MARK!r} line")
    return Prompt(name=name, system=system.strip(), user=Template(user.strip()))


# -- rendering ------------------------------------------------------------------------------------


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    if limit <= 0:
        return ""
    return text if len(text) <= limit else text[: max(limit - 1, 0)].rstrip() + _ELLIPSIS


def render_trajectory(
    episode: Episode,
    max_chars: int = 3000,
    max_observation_chars: int = 300,
    max_action_chars: int = 200,
    include_thoughts: bool = False,
) -> str:
    """Numbered ``Action:`` / ``Observation:`` lines, fitted into ``max_chars``.

    Shrinking order, chosen because actions carry the procedure and observations mostly carry
    scenery: first observations are clipped harder (to 120, then 40 characters); if the text is
    still too long, steps are dropped from the middle (the start and the end of an episode say
    the most about how it began and how it was won or lost) and a marker says how many.
    """
    if not episode.steps:
        return "(no steps recorded)"
    limits = [max_observation_chars]
    limits += [x for x in (120, 40) if x < max_observation_chars]
    for obs_limit in limits:
        blocks = _step_blocks(episode, obs_limit, max_action_chars, include_thoughts)
        text = "\n".join(blocks)
        if len(text) <= max_chars:
            return text
    return _elide_middle(blocks, max_chars)


def _step_blocks(
    episode: Episode, obs_limit: int, action_limit: int, include_thoughts: bool
) -> list[str]:
    blocks = []
    for i, step in enumerate(episode.steps, 1):
        lines = []
        if include_thoughts and step.thought:
            lines.append(f"{i}. Thought: {_clip(step.thought, action_limit)}")
        lines.append(f"{i}. Action: {_clip(step.action, action_limit)}")
        observation = _clip(step.observation, obs_limit)
        if observation:
            lines.append(f"   Observation: {observation}")
        blocks.append("\n".join(lines))
    return blocks


def _elide_middle(blocks: list[str], max_chars: int) -> str:
    head: list[str] = []
    tail: list[str] = []
    used = 0
    left, right = 0, len(blocks) - 1
    take_head = True
    marker_room = 40
    while left <= right:
        block = blocks[left] if take_head else blocks[right]
        if used + len(block) + 1 + marker_room > max_chars:
            break
        used += len(block) + 1
        if take_head:
            head.append(block)
            left += 1
        else:
            tail.insert(0, block)
            right -= 1
        take_head = not take_head
    omitted = right - left + 1
    if omitted <= 0:
        return "\n".join(head + tail)
    marker = f"... ({omitted} step{'s' if omitted != 1 else ''} omitted) ..."
    if not head:  # not even one step fits: show the first one, clipped
        return _clip(blocks[0], max_chars - len(marker) - 1) + "\n" + marker
    return "\n".join([*head, marker, *tail])


def render_experience(exp: Experience) -> str:
    """An experience as indented JSON, the form the model is asked to copy from and answer in."""
    body: dict[str, Any] = {name: getattr(exp, name) for name in exp.SCALARS}
    body.update({name: list(getattr(exp, name)) for name in exp.LISTS})
    # Keep the answer's key order (e.g. activation, steps, termination) so copying is easy.
    order = list(ANSWER_FOR[exp.TYPE].model_fields)
    return json.dumps({k: body[k] for k in order}, ensure_ascii=False, indent=1)


def _outcome(episode: Episode) -> str:
    parts = [f"{len(episode.steps)} steps"]
    if episode.score is not None:
        parts.append(f"score {episode.score:.2f}")
    return f"{'SUCCESS' if episode.success else 'FAILURE'} ({', '.join(parts)})"


def _content_words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOPWORDS}


def item_overlap(item: str, source: str) -> float:
    """Share of ``item``'s content words that also occur in ``source`` (1.0 for equal text)."""
    words = _content_words(item)
    if not words:
        return 1.0 if item.strip().lower() == source.strip().lower() else 0.0
    return len(words & _content_words(source)) / len(words)


def invented_items(compiled: Experience, composed: Experience) -> str | None:
    """Why ``compiled`` is not a rewording of ``composed`` (None when it is).

    Each list field may only shrink or keep its length, and every output item must overlap some
    input item by at least :data:`COMPILE_MIN_OVERLAP`.
    """
    if type(compiled) is not type(composed):
        return f"answer is a {compiled.TYPE}, the chain is a {composed.TYPE}"
    for name in composed.LISTS:
        given: tuple[str, ...] = getattr(composed, name)
        written: tuple[str, ...] = getattr(compiled, name)
        if len(written) > len(given):
            return f"{name} grew from {len(given)} to {len(written)} items"
        for item in written:
            if not any(item_overlap(item, src) >= COMPILE_MIN_OVERLAP for src in given):
                return f"{name} item {_clip(item, 80)!r} is not in the chain"
    return None


def normalise(exp: Experience) -> Experience:
    """``exp`` with one fact per subject (the later wins) and no step repeated back to back."""
    if isinstance(exp, Knowledge):
        return Knowledge(exp.trigger, supersede((), exp.facts))
    if isinstance(exp, Skill):
        steps = tuple(s for i, s in enumerate(exp.steps) if i == 0 or s != exp.steps[i - 1])
        return Skill(exp.activation, steps, exp.termination)
    return exp


# -- the extractor --------------------------------------------------------------------------------


class LLMExtractor:
    """Extractor that asks an LLM for the new full experience (see the module table).

    Args:
        llm: The model.
        retries: Extra attempts per extraction when the answer does not validate; each retry
            shows the model what was wrong.
        max_trajectory_chars: Character budget of the rendered episode (keep it small for small
            context windows: ~4 characters per token).
        max_observation_chars: Per-observation clip before any further shrinking.
        max_context_chars: Clip for the task and environment descriptions.
        max_tokens: Answer length limit; raised automatically when the experience to copy is long.
        temperature: Sampling temperature (0 = deterministic where the provider allows).
        include_thoughts: Also show the agent's reasoning lines.
        max_items: Items per list the provider schema allows for a new experience (raised to fit
            a shown experience). Small bounds let grammar-constrained small models finish.
        max_item_chars: Characters per list item in the provider schema (same raising rule).
        max_text_chars: Characters per text field in the provider schema.
    """

    name = "llm"
    uses_llm = True

    def __init__(
        self,
        llm: LLM,
        *,
        retries: int = 1,
        max_trajectory_chars: int = 3000,
        max_observation_chars: int = 300,
        max_context_chars: int = 600,
        max_tokens: int = 512,
        temperature: float = 0.0,
        include_thoughts: bool = False,
        max_items: int = 12,
        max_item_chars: int = 200,
        max_text_chars: int = 400,
    ):
        self.llm = llm
        self.retries = retries
        self.max_trajectory_chars = max_trajectory_chars
        self.max_observation_chars = max_observation_chars
        self.max_context_chars = max_context_chars
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.include_thoughts = include_thoughts
        self.max_items = max_items
        self.max_item_chars = max_item_chars
        self.max_text_chars = max_text_chars

    def __repr__(self) -> str:
        return f"LLMExtractor(llm={self.llm!r}, retries={self.retries})"

    def extract(self, request: ExtractRequest) -> Extraction:
        """Write the new full experience for one tree of one episode.

        Raises:
            ExtractionError: the model's answers never validated (memory must stay unchanged).
            ProviderError: the model failed.
        """
        prompt_name, answer_cls, values = self._plan(request)
        messages = load_prompt(prompt_name).render(**values)
        label = _episode_label(request.episode)
        obj, usage, _ = ask_structured(
            self.llm,
            messages,
            answer_cls,
            retries=self.retries,
            schema=self._schema(answer_cls, request.matched),
            temperature=self.temperature,
            max_tokens=self._answer_tokens(request.matched),
            label=label,
        )
        return Extraction(normalise(obj.to_experience()), usage, _note(prompt_name, usage))

    def compile(self, tree: Tree, composed: Experience) -> Extraction:
        """Generalise a consolidated chain's composition into one self-contained root.

        The model may reword and drop duplicates but not invent: if its answer does not validate
        or adds items that are not in ``composed``, the exact composition is returned and
        ``note`` says why. Lessons are never compiled (there is nothing to generalise in a
        failure record), so their composition is returned as is without a model call.

        Raises:
            ProviderError: the model failed.
        """
        if isinstance(composed, Lesson):
            return Extraction(composed, Usage(), "compile skipped: lesson chains are kept verbatim")
        prompt_name = "compile_skill" if isinstance(composed, Skill) else "compile_knowledge"
        answer_cls = SkillAnswer if isinstance(composed, Skill) else KnowledgeAnswer
        messages = load_prompt(prompt_name).render(experience=render_experience(composed))
        try:
            obj, usage, _ = ask_structured(
                self.llm,
                messages,
                answer_cls,
                retries=self.retries,
                schema=self._schema(answer_cls, composed),
                temperature=self.temperature,
                max_tokens=self._answer_tokens(composed),
                label=f"compile {tree.value} chain",
            )
        except ExtractionError as exc:
            spent = exc.usage if isinstance(exc.usage, Usage) else Usage()
            return Extraction(
                composed,
                spent,
                f"{prompt_name} fallback: kept the exact composition (the answer did not "
                f"validate after {exc.attempts} attempt(s))",
            )
        compiled = normalise(obj.to_experience())
        why = invented_items(compiled, composed)
        if why is not None:
            return Extraction(
                composed, usage, f"{prompt_name} fallback: kept the exact composition ({why})"
            )
        return Extraction(compiled, usage, _note(prompt_name, usage))

    # -- internals -------------------------------------------------------------------------------

    def _plan(
        self, request: ExtractRequest
    ) -> tuple[str, type[SkillAnswer] | type[LessonAnswer] | type[KnowledgeAnswer], dict[str, str]]:
        episode, matched = request.episode, request.matched
        values = {
            "task": _clip(episode.task, self.max_context_chars) or "(none)",
            "environment": _clip(episode.env, self.max_context_chars) or "(not described)",
            "outcome": _outcome(episode),
            "trajectory": render_trajectory(
                episode,
                self.max_trajectory_chars,
                self.max_observation_chars,
                include_thoughts=self.include_thoughts,
            ),
        }
        if request.tree is Tree.ENV:
            if isinstance(matched, Knowledge):
                return "knowledge_update", KnowledgeAnswer, {
                    **values, "existing": render_experience(matched)}
            return "knowledge_root", KnowledgeAnswer, values
        if not episode.success:
            return "lesson", LessonAnswer, {**values, "context": _lesson_context(matched)}
        if isinstance(matched, Skill):
            return "skill_update", SkillAnswer, {**values, "existing": render_experience(matched)}
        return "skill_root", SkillAnswer, values

    def _schema(
        self, answer_cls: type[SkillAnswer] | type[LessonAnswer] | type[KnowledgeAnswer],
        shown: Experience | None,
    ) -> dict[str, Any]:
        # The model must be able to restate what it is shown, so the bounds grow to fit it.
        items, item_chars, text_chars = self.max_items, self.max_item_chars, self.max_text_chars
        if shown is not None:
            for name in shown.LISTS:
                values: tuple[str, ...] = getattr(shown, name)
                items = max(items, len(values) + 4)
                item_chars = max(item_chars, *(len(v) for v in values), 0)
            for name in shown.SCALARS:
                text_chars = max(text_chars, len(getattr(shown, name)))
        return answer_schema(
            answer_cls, max_items=items, max_item_chars=item_chars, max_text_chars=text_chars
        )

    def _answer_tokens(self, shown: Experience | None) -> int:
        # An update or compile answer restates the shown experience; make sure it fits.
        if shown is None:
            return self.max_tokens
        needed = len(render_experience(shown)) // 3 + 128
        return max(self.max_tokens, min(needed, MAX_ITEMS * 160))


def _lesson_context(matched: Experience | None) -> str:
    if isinstance(matched, Lesson):
        return f"Stored failure record:\n{render_experience(matched)}\n"
    if isinstance(matched, Skill):
        return f"Stored skill that was followed:\n{render_experience(matched)}\n"
    return ""


def _episode_label(episode: Episode) -> str:
    for key in ("id", "episode_id"):
        value = episode.meta.get(key)
        if value:
            return str(value)
    return _clip(episode.task, 60)


def _note(prompt_name: str, usage: Usage) -> str:
    if usage.llm_calls > 1:
        return f"{prompt_name}: valid after {usage.llm_calls} attempts"
    return prompt_name
