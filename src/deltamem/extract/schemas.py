"""What a model must answer, as pydantic models, and the JSON schemas sent to the model.

The pydantic models are the gate between untrusted model text and the memory: bounded lengths,
whitespace normalised, control and invisible formatting characters removed, empty required fields
rejected, no type coercion. Whatever passes is converted with ``to_experience()``.

The JSON schemas given to providers (``answer_schema``) carry the same bounds (capped at the
validation limits), so a grammar-constrained decoder can close the object when a small model
starts repeating itself; the pydantic models enforce them again on whatever comes back.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar, get_args, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
)

from deltamem.core.model import Experience, Knowledge, Lesson, Skill

MAX_TEXT_CHARS = 1000
MAX_ITEM_CHARS = 500
MAX_ITEMS = 40

# C0/C1 controls, zero-width characters, bidi embeddings/overrides/isolates and the BOM: none of
# them carry meaning in an experience, and bidi overrides can disguise text shown to an agent.
_INVISIBLE = re.compile(
    "[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f"
    "\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]"
)
_SPACES = re.compile(r"\s+")
# Models copy the numbering and labels of the rendered trajectory ("3. Action: open door");
# the list position already carries the order, so the marker is noise.
_ITEM_MARKER = re.compile(
    r"^(?:step\s*\d{1,3}\s*[:.)-]?\s*|\d{1,3}[.)]\s+|[-*\u2022]\s+)?"
    r"(?:(?:action|observation)\s*:\s*)?",
    re.IGNORECASE,
)
# Template placeholders copied from a prompt ("<fact>", "...") carry no information.
_PLACEHOLDER = re.compile(r"^(?:<[^<>]*>|[\W_]*)$")


def clean_text(value: Any) -> Any:
    """Remove invisible characters and collapse whitespace runs (newlines too) to one space.

    Non-strings are returned unchanged so that validation reports them as the wrong type.
    """
    if not isinstance(value, str):
        return value
    return _SPACES.sub(" ", _INVISIBLE.sub("", value)).strip()


def clean_item(value: Any) -> Any:
    """:func:`clean_text` plus removal of a leading list marker or ``Action:`` label."""
    text = clean_text(value)
    if not isinstance(text, str):
        return text
    return _ITEM_MARKER.sub("", text, count=1).strip() or text


def _clean_items(value: Any) -> Any:
    # Blank items are noise a small model often emits; dropping them is lossless.
    if not isinstance(value, list):
        return value
    cleaned = [clean_item(item) for item in value]
    return [item for item in cleaned if not (isinstance(item, str) and item == "")]


def _reject_placeholder(value: str) -> str:
    if _PLACEHOLDER.match(value):
        raise ValueError(f"{value!r} is a placeholder, not content; write the real text")
    return value


Text = Annotated[
    str,
    BeforeValidator(clean_text),
    StringConstraints(min_length=1, max_length=MAX_TEXT_CHARS),
    AfterValidator(_reject_placeholder),
]
OptionalText = Annotated[
    str, BeforeValidator(clean_text), StringConstraints(max_length=MAX_TEXT_CHARS)
]
Item = Annotated[
    str,
    StringConstraints(min_length=1, max_length=MAX_ITEM_CHARS),
    AfterValidator(_reject_placeholder),
]
Items = Annotated[
    list[Item], BeforeValidator(_clean_items), Field(min_length=1, max_length=MAX_ITEMS)
]
OptionalItems = Annotated[
    list[Item], BeforeValidator(_clean_items), Field(max_length=MAX_ITEMS)
]


class _Answer(BaseModel):
    # strict: "3" is not a list and 3 is not a string; extra keys (a model's "notes") are ignored.
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)

    EXPERIENCE: ClassVar[type[Skill] | type[Knowledge] | type[Lesson]]

    def to_experience(self) -> Experience:
        """The validated answer as a core experience."""
        raise NotImplementedError


class SkillAnswer(_Answer):
    """A procedural skill: when it applies, the steps, and when it is done."""

    EXPERIENCE: ClassVar[type[Skill]] = Skill

    activation: Text
    steps: Items
    termination: OptionalText = ""

    def to_experience(self) -> Skill:
        """The answer as a :class:`~deltamem.core.model.Skill`."""
        return Skill(self.activation, tuple(self.steps), self.termination)


class LessonAnswer(_Answer):
    """A failure record: the situation, what failed (with why), what was not tried, what worked."""

    EXPERIENCE: ClassVar[type[Lesson]] = Lesson

    situation: Text
    failed: Items
    untried: OptionalItems = Field(default_factory=list)
    worked: OptionalItems = Field(default_factory=list)

    def to_experience(self) -> Lesson:
        """The answer as a :class:`~deltamem.core.model.Lesson`."""
        return Lesson(self.situation, tuple(self.failed), tuple(self.untried), tuple(self.worked))


class KnowledgeAnswer(_Answer):
    """Scene knowledge: where it applies and the facts that hold there."""

    EXPERIENCE: ClassVar[type[Knowledge]] = Knowledge

    trigger: Text
    facts: Items

    def to_experience(self) -> Knowledge:
        """The answer as a :class:`~deltamem.core.model.Knowledge`."""
        return Knowledge(self.trigger, tuple(self.facts))


ANSWER_FOR: dict[str, type[SkillAnswer] | type[LessonAnswer] | type[KnowledgeAnswer]] = {
    "skill": SkillAnswer,
    "lesson": LessonAnswer,
    "knowledge": KnowledgeAnswer,
}


def answer_schema(
    model_cls: type[BaseModel],
    *,
    max_items: int = MAX_ITEMS,
    max_item_chars: int = MAX_ITEM_CHARS,
    max_text_chars: int = MAX_TEXT_CHARS,
) -> dict[str, Any]:
    """Compact JSON schema for a provider's structured-output mode.

    Every field is required (so a grammar makes the model write all of them), lists need at least
    one item when the pydantic model does, and no other keys are allowed. The bounds (capped at
    the validation limits) let a grammar-constrained decoder close the object even when a small
    model starts repeating itself, instead of running into the token limit mid-string.
    """
    max_items = min(max_items, MAX_ITEMS)
    max_item_chars = min(max_item_chars, MAX_ITEM_CHARS)
    max_text_chars = min(max_text_chars, MAX_TEXT_CHARS)
    properties: dict[str, Any] = {}
    for name, info in model_cls.model_fields.items():
        if _is_list(info.annotation):
            (item_type,) = get_args(info.annotation)
            if isinstance(item_type, type) and issubclass(item_type, BaseModel):
                raise TypeError(f"answer_schema reads text and lists of text only; "
                                f"{model_cls.__name__}.{name} is a list of {item_type!r}")
            items = {"type": "string", "minLength": 1, "maxLength": max_item_chars}
            prop: dict[str, Any] = {"type": "array", "items": items,
                                    "maxItems": _max_len(info, max_items)}
            if info.is_required():
                prop["minItems"] = 1
        else:
            prop = {"type": "string", "maxLength": _max_len(info, max_text_chars)}
            if info.is_required():
                prop["minLength"] = 1
        properties[name] = prop
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def _is_list(annotation: Any) -> bool:
    return get_origin(annotation) is list


def _max_len(info: Any, default: int) -> int:
    """The field's own ``max_length`` when it is tighter than ``default``."""
    for meta in info.metadata:
        limit = getattr(meta, "max_length", None)
        if isinstance(limit, int):
            return min(limit, default)
    return default
