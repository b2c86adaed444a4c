"""``LLMExtractor`` on the real local model (SmolLM2-135M via llama-cpp-python).

Never skipped: without llama-cpp-python these tests fail with the ConfigError that says to run
``make setup``. The model is tiny, so only the contract is asserted (a valid experience of the
right type, usage reported), not the quality of the text.
"""

from __future__ import annotations

import pytest

from deltamem.core.knowledge import contradictions
from deltamem.core.model import Episode, Knowledge, Lesson, Skill, Step, Tree
from deltamem.extract.base import ExtractRequest
from deltamem.extract.llm import LLMExtractor
from deltamem.llm.llamacpp import LlamaCppLLM

pytestmark = pytest.mark.llm

EPISODE = Episode(
    task="Your task is to: put a hot apple on the table.",
    env="You are in a kitchen. You see a fridge 1, a microwave 1 and a table 1.",
    steps=(
        Step("go to fridge 1", "The fridge 1 is closed."),
        Step("open fridge 1", "You open the fridge 1. In it you see an apple 1."),
        Step("take apple 1 from fridge 1", "You pick up the apple 1 from the fridge 1."),
        Step("heat apple 1 with microwave 1", "You heat the apple 1 using the microwave 1."),
        Step("put apple 1 in/on table 1", "You put the apple 1 in/on the table 1."),
    ),
    success=True,
)


@pytest.fixture(scope="module")
def extractor() -> LLMExtractor:
    """An extractor on the embedded default model."""
    return LLMExtractor(LlamaCppLLM(n_ctx=4096), retries=1, max_tokens=384)


def test_real_model_extracts_a_valid_skill(extractor: LLMExtractor) -> None:
    """A short successful episode becomes a non-empty Skill with usage accounted."""
    result = extractor.extract(ExtractRequest(EPISODE, Tree.TASK))
    skill = result.experience
    assert isinstance(skill, Skill)
    assert skill.activation.strip() and len(skill.steps) >= 1
    assert all(step.strip() for step in skill.steps)
    assert 1 <= result.usage.llm_calls <= 2
    assert result.usage.prompt_tokens > 100 and result.usage.completion_tokens > 0
    assert result.usage.wall_ms > 0


def test_real_model_extracts_knowledge(extractor: LLMExtractor) -> None:
    """The env tree yields a valid Knowledge entry from the same episode."""
    result = extractor.extract(ExtractRequest(EPISODE, Tree.ENV))
    assert isinstance(result.experience, Knowledge)
    assert result.experience.trigger and result.experience.facts


def test_real_model_keeps_the_memory_properties(extractor: LLMExtractor) -> None:
    """Whatever the small model writes: no two facts about one subject, no step repeated back
    to back, and a failure becomes a lesson whose failed items are non-empty."""
    looped = Episode(task=EPISODE.task, env=EPISODE.env, success=True,
                     steps=(Step("look", EPISODE.env),) * 3 + EPISODE.steps)
    skill = extractor.extract(ExtractRequest(looped, Tree.TASK)).experience
    assert isinstance(skill, Skill)
    assert all(a != b for a, b in zip(skill.steps, skill.steps[1:], strict=False))
    knowledge = extractor.extract(ExtractRequest(looped, Tree.ENV)).experience
    assert isinstance(knowledge, Knowledge) and contradictions(knowledge.facts) == []
    failed = Episode(task=EPISODE.task, env=EPISODE.env, success=False, steps=(
        Step("go to fridge 1", "The fridge 1 is closed."),
        Step("heat apple 1 with microwave 1", "Nothing happens. You are not carrying an apple.")))
    lesson = extractor.extract(ExtractRequest(failed, Tree.TASK)).experience
    assert isinstance(lesson, Lesson) and lesson.failed and all(lesson.failed)
