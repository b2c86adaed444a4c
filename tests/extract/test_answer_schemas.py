"""Answer models in ``deltamem.extract.schemas``: bounds, cleaning and conversion."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from deltamem.core.model import Knowledge, Lesson, Skill
from deltamem.extract.schemas import (
    MAX_ITEMS,
    KnowledgeAnswer,
    LessonAnswer,
    SkillAnswer,
    answer_schema,
    clean_text,
)


def test_to_experience_for_each_kind() -> None:
    """Each answer converts to its core experience type with tuples for lists."""
    skill = SkillAnswer.model_validate({"activation": "a", "steps": ["s1"], "termination": "t"})
    assert skill.to_experience() == Skill("a", ("s1",), "t")
    lesson = LessonAnswer.model_validate({"situation": "s", "failed": ["f"], "untried": ["u"]})
    assert lesson.to_experience() == Lesson("s", ("f",), ("u",))
    knowledge = KnowledgeAnswer.model_validate({"trigger": "t", "facts": ["f"]})
    assert knowledge.to_experience() == Knowledge("t", ("f",))


def test_clean_text_strips_invisible_and_collapses_space() -> None:
    """Control, zero-width and bidi characters go; whitespace runs become one space."""
    assert clean_text("  a\u200b\u202e b\n\n c\x00 ") == "a b c"
    assert clean_text(3) == 3


def test_bounds_are_enforced() -> None:
    """Over-long items and too many items are rejected, not truncated."""
    with pytest.raises(ValidationError):
        KnowledgeAnswer.model_validate({"trigger": "t", "facts": ["x" * 501]})
    with pytest.raises(ValidationError):
        KnowledgeAnswer.model_validate({"trigger": "t", "facts": ["x"] * (MAX_ITEMS + 1)})
    ok = KnowledgeAnswer.model_validate({"trigger": "t", "facts": ["x" * 500] * MAX_ITEMS})
    assert len(ok.facts) == MAX_ITEMS


def test_no_type_coercion() -> None:
    """Strings are not split into lists and numbers are not turned into strings."""
    with pytest.raises(ValidationError):
        SkillAnswer.model_validate({"activation": "a", "steps": "s1"})
    with pytest.raises(ValidationError):
        SkillAnswer.model_validate({"activation": 1, "steps": ["s1"]})


def test_answer_schema_requires_all_fields() -> None:
    """Provider schemas require every field, forbid extras and need one item in required lists."""
    schema = answer_schema(LessonAnswer)
    assert schema["required"] == ["situation", "failed", "untried", "worked"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["failed"]["minItems"] == 1
    assert "minItems" not in schema["properties"]["untried"]
    assert schema["properties"]["situation"] == {"type": "string", "maxLength": 1000,
                                                 "minLength": 1}
    tight = answer_schema(LessonAnswer, max_items=5, max_item_chars=9999)
    assert tight["properties"]["failed"]["maxItems"] == 5
    assert tight["properties"]["failed"]["items"]["maxLength"] == 500  # capped at validation


def test_schema_of_a_list_of_objects_is_refused():
    """The memory's answers hold text and lists of text; a list of anything else is a
    programming error named as such (a baseline that wants nested items builds its own schema,
    as bench's ReasoningBank does)."""
    import pytest
    from pydantic import BaseModel, Field

    from deltamem.extract.schemas import answer_schema

    class Item(BaseModel):
        title: str = Field(min_length=1, max_length=50)

    class Items(BaseModel):
        items: list[Item] = Field(min_length=1, max_length=3)

    with pytest.raises(TypeError, match="Items.items is a list of"):
        answer_schema(Items)
    assert answer_schema(Item)["properties"]["title"]["maxLength"] == 50
