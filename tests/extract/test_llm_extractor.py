"""``LLMExtractor`` with a scripted model: prompt choice, rendering, retries and compile."""

from __future__ import annotations

import json

import pytest

from deltamem.core.model import Episode, Knowledge, Lesson, Skill, Step, Tree
from deltamem.errors import ExtractionError
from deltamem.extract.base import Extractor, ExtractRequest
from deltamem.extract.llm import (
    PROMPT_NAMES,
    LLMExtractor,
    invented_items,
    item_overlap,
    load_prompt,
    render_trajectory,
)
from deltamem.testing.llm import ScriptedLLM

EPISODE = Episode(
    task="heat an apple and put it on the table",
    env="You are in a kitchen. You see a fridge 1, a microwave 1 and a table 1.",
    steps=(
        Step("open fridge 1", "You open the fridge 1. You see an apple 1."),
        Step("take apple 1 from fridge 1", "You pick up the apple 1."),
        Step("heat apple 1 with microwave 1", "You heat the apple 1."),
        Step("put apple 1 in/on table 1", "You put the apple 1 on the table 1."),
    ),
    success=True,
    meta={"id": "ep-1"},
)
FAILED = Episode(task=EPISODE.task, env=EPISODE.env, steps=EPISODE.steps[:1], success=False)
SKILL = Skill(
    "Applies when an object must be heated",
    ("take apple 1 from fridge 1", "heat apple 1 with microwave 1"),
    "the apple is hot",
)
SKILL_JSON = json.dumps(
    {"activation": SKILL.activation, "steps": list(SKILL.steps), "termination": SKILL.termination}
)
KNOWLEDGE_JSON = '{"trigger": "Applies in kitchens", "facts": ["apples are kept in the fridge"]}'
LESSON_JSON = '{"situation": "heating", "failed": ["open fridge 1 -> empty"], "untried": []}'


def _run(answer: str, request: ExtractRequest) -> tuple[ScriptedLLM, object]:
    llm = ScriptedLLM([answer])
    return llm, LLMExtractor(llm).extract(request)


def test_is_an_extractor() -> None:
    """LLMExtractor satisfies the Extractor protocol and announces that it uses a model."""
    extractor = LLMExtractor(ScriptedLLM([]))
    assert isinstance(extractor, Extractor)
    assert extractor.name == "llm" and extractor.uses_llm is True


def test_every_prompt_file_loads_and_states_a_schema() -> None:
    """All seven prompt files exist, split into system/user parts and show a JSON shape."""
    for name in PROMPT_NAMES:
        prompt = load_prompt(name)
        assert prompt.system and prompt.user.template
        assert "{" in prompt.system and "JSON" in prompt.system


def test_skill_root_from_success() -> None:
    """A success with no match uses skill_root and returns the model's Skill with usage."""
    llm, result = _run(SKILL_JSON, ExtractRequest(EPISODE, Tree.TASK))
    assert result.experience == SKILL
    assert result.note == "skill_root"
    assert result.usage.llm_calls == 1 and result.usage.prompt_tokens > 0
    assert result.usage.completion_tokens == len(SKILL_JSON.split())
    prompt = llm.calls[0].prompt
    assert "1. Action: open fridge 1" in prompt and "SUCCESS (4 steps)" in prompt
    assert EPISODE.task in prompt and "Stored" not in prompt
    assert llm.calls[0].schema is not None and llm.calls[0].temperature == 0.0


def test_provider_schema_bounds_grow_to_fit_shown_experience() -> None:
    """The provider schema is tight for new roots but always fits the experience to restate."""
    llm, _ = _run(SKILL_JSON, ExtractRequest(EPISODE, Tree.TASK))
    steps = llm.calls[0].schema["properties"]["steps"]  # type: ignore[index]
    assert steps["maxItems"] == 12 and steps["items"]["maxLength"] == 200
    big = Skill("a" * 700, tuple(f"step {i} " + "x" * 300 for i in range(20)), "t")
    llm, _ = _run(SKILL_JSON, ExtractRequest(EPISODE, Tree.TASK, matched=big))
    schema = llm.calls[0].schema
    assert schema is not None and schema["properties"]["steps"]["maxItems"] == 24
    assert schema["properties"]["steps"]["items"]["maxLength"] >= 308
    assert schema["properties"]["activation"]["maxLength"] == 700
    assert llm.calls[0].max_tokens > 512


def test_skill_update_shows_matched_skill() -> None:
    """A success under a matched Skill shows it as JSON and asks for the new full skill."""
    llm, result = _run(SKILL_JSON, ExtractRequest(EPISODE, Tree.TASK, matched=SKILL))
    assert result.experience == SKILL and result.note == "skill_update"
    prompt = llm.calls[0].prompt
    assert "Stored skill:" in prompt and '"take apple 1 from fridge 1"' in prompt
    assert "word for word" in prompt and "NEW FULL" in prompt


def test_failure_writes_lesson_with_context() -> None:
    """A failed task episode produces a Lesson; a matched lesson or skill is shown as context."""
    llm, result = _run(LESSON_JSON, ExtractRequest(FAILED, Tree.TASK))
    assert isinstance(result.experience, Lesson) and result.note == "lesson"
    assert "FAILURE" in llm.calls[0].prompt and "Stored" not in llm.calls[0].prompt
    lesson = Lesson("heating", ("open fridge 1 -> empty",))
    llm, result = _run(LESSON_JSON, ExtractRequest(FAILED, Tree.TASK, matched=lesson))
    assert "Stored failure record:" in llm.calls[0].prompt
    llm, _ = _run(LESSON_JSON, ExtractRequest(FAILED, Tree.TASK, matched=SKILL))
    assert "Stored skill that was followed:" in llm.calls[0].prompt


def test_lesson_keeps_the_error_text_and_what_worked() -> None:
    """The lesson prompt asks for the quoted reply and the steps that worked; both are kept."""
    answer = json.dumps({"situation": "deploying to production",
                         "failed": ['kubectl apply -f k8s/prod -> "error: forbidden"'],
                         "untried": ["ask for a change ticket"],
                         "worked": ["build docker image"]})
    llm, result = _run(answer, ExtractRequest(FAILED, Tree.TASK))
    assert result.experience == Lesson("deploying to production",
                                       ('kubectl apply -f k8s/prod -> "error: forbidden"',),
                                       ("ask for a change ticket",), ("build docker image",))
    prompt = llm.calls[0].prompt
    assert "error text copied exactly" in prompt and '"worked"' in prompt


def test_answers_are_normalised_to_one_fact_per_subject_and_no_loops() -> None:
    """A model's contradicting facts and copied loops get the trace extractor's properties."""
    answer = json.dumps({"trigger": "Applies in the kitchen", "facts": [
        "West of the kitchen: the pantry", "In the kitchen: a stove",
        "West of the kitchen: the corridor"]})
    _, result = _run(answer, ExtractRequest(EPISODE, Tree.ENV))
    assert result.experience.facts == ("West of the kitchen: the corridor",
                                       "In the kitchen: a stove")
    looped = json.dumps({"activation": "find the coin", "termination": "",
                         "steps": ["look around", "look around", "look around", "take coin"]})
    _, result = _run(looped, ExtractRequest(EPISODE, Tree.TASK))
    assert result.experience.steps == ("look around", "take coin")


def test_success_under_lesson_writes_a_fresh_skill() -> None:
    """A success that matched only a failure record gets the skill_root prompt."""
    lesson = Lesson("heating", ("x",))
    _, result = _run(SKILL_JSON, ExtractRequest(EPISODE, Tree.TASK, matched=lesson))
    assert result.note == "skill_root" and isinstance(result.experience, Skill)


@pytest.mark.parametrize("episode", [EPISODE, FAILED], ids=["success", "failure"])
def test_env_tree_always_writes_knowledge(episode: Episode) -> None:
    """The env tree yields Knowledge whatever the outcome; a matched entry selects the update."""
    llm, result = _run(KNOWLEDGE_JSON, ExtractRequest(episode, Tree.ENV))
    assert isinstance(result.experience, Knowledge) and result.note == "knowledge_root"
    assert "facts, never commands" in llm.calls[0].prompt
    matched = Knowledge("Applies in kitchens", ("apples are kept in the fridge",))
    llm, result = _run(KNOWLEDGE_JSON, ExtractRequest(episode, Tree.ENV, matched=matched))
    assert result.experience == matched and result.note == "knowledge_update"
    assert "Stored knowledge:" in llm.calls[0].prompt


def test_retry_with_feedback_then_success() -> None:
    """An invalid first answer is corrected on the retry; usage counts both calls."""
    llm = ScriptedLLM(['{"activation": "x"}', SKILL_JSON])
    result = LLMExtractor(llm, retries=1).extract(ExtractRequest(EPISODE, Tree.TASK))
    assert result.experience == SKILL
    assert result.usage.llm_calls == 2 and "after 2 attempts" in result.note
    assert "steps: Field required" in llm.calls[1].messages[-1]["content"]


def test_never_valid_raises_extraction_error_naming_episode() -> None:
    """When no answer validates, ExtractionError names the episode and carries usage."""
    llm = ScriptedLLM(["garbage", "more garbage"])
    with pytest.raises(ExtractionError) as info:
        LLMExtractor(llm, retries=1).extract(ExtractRequest(EPISODE, Tree.TASK))
    assert info.value.episode == "ep-1" and info.value.usage.llm_calls == 2


def test_trajectory_is_fitted_to_budget() -> None:
    """Long episodes are shrunk to the character budget, keeping first and last steps."""
    steps = tuple(Step(f"action number {i}", "observation " * 60) for i in range(1, 101))
    long = Episode(task="t", steps=steps, success=True)
    text = render_trajectory(long, max_chars=1500)
    assert len(text) <= 1500
    assert "1. Action: action number 1" in text and "100. Action: action number 100" in text
    assert "steps omitted" in text
    short = render_trajectory(EPISODE, max_chars=5000)
    assert "steps omitted" not in short and short.count("Action:") == 4
    assert render_trajectory(Episode(task="t")) == "(no steps recorded)"


def test_prompt_respects_max_trajectory_chars() -> None:
    """The configured trajectory budget bounds the rendered prompt size."""
    steps = tuple(Step(f"act {i}", "seen " * 100) for i in range(200))
    llm = ScriptedLLM([SKILL_JSON])
    LLMExtractor(llm, max_trajectory_chars=800).extract(
        ExtractRequest(Episode(task="t", steps=steps, success=True), Tree.TASK)
    )
    assert len(llm.calls[0].messages[1]["content"]) < 800 + 400


def test_compile_accepts_rewording() -> None:
    """A compiled skill that rewords and drops duplicates is accepted."""
    composed = Skill("a", ("take apple 1 from fridge 1", "heat apple 1 with microwave 1",
                           "heat apple 1 with microwave 1"), "hot")
    answer = json.dumps({"activation": "Applies when heating fruit",
                         "steps": ["take the apple from the fridge", "heat apple with microwave"],
                         "termination": "hot"})
    llm = ScriptedLLM([answer])
    result = LLMExtractor(llm).compile(Tree.TASK, composed)
    assert result.experience.activation == "Applies when heating fruit"  # type: ignore[union-attr]
    assert result.note == "compile_skill" and result.usage.llm_calls == 1
    assert '"heat apple 1 with microwave 1"' in llm.calls[0].prompt


def test_compile_falls_back_on_invented_steps() -> None:
    """New steps the chain never had make compile return the exact composition."""
    answer = json.dumps({"activation": "x", "steps": ["take apple 1 from fridge 1",
                                                      "dance wildly around room"],
                         "termination": ""})
    result = LLMExtractor(ScriptedLLM([answer])).compile(Tree.TASK, SKILL)
    assert result.experience == SKILL
    assert "fallback" in result.note and "dance wildly" in result.note
    assert result.usage.llm_calls == 1


def test_compile_falls_back_on_more_items_or_invalid_answer() -> None:
    """Growing the list, or never validating, also falls back to the composition."""
    knowledge = Knowledge("Applies in kitchens", ("apples are in the fridge",))
    grown = '{"trigger": "t", "facts": ["apples are in the fridge", "apples in fridge"]}'
    result = LLMExtractor(ScriptedLLM([grown])).compile(Tree.ENV, knowledge)
    assert result.experience == knowledge and "grew from 1 to 2" in result.note
    result = LLMExtractor(ScriptedLLM(["bad", "worse"])).compile(Tree.ENV, knowledge)
    assert result.experience == knowledge and "did not validate after 2" in result.note
    assert result.usage.llm_calls == 2


def test_compile_keeps_lessons_without_a_call() -> None:
    """Lesson chains are returned verbatim and the model is not called."""
    lesson = Lesson("s", ("f",))
    llm = ScriptedLLM([])
    result = LLMExtractor(llm).compile(Tree.TASK, lesson)
    assert result.experience == lesson and not llm.calls and result.usage.llm_calls == 0


def test_overlap_helpers() -> None:
    """Token overlap ignores stopwords and case; type mismatches are reported."""
    assert item_overlap("Take the Apple", "take apple 1 from fridge") == 1.0
    assert item_overlap("dance", "take apple") == 0.0
    assert invented_items(Knowledge("t"), SKILL) is not None
    assert invented_items(SKILL, SKILL) is None
