"""The facade with the LLM extractor (scripted test double): usage, dedup savings, bad answers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deltamem.embed.hashing import HashingEmbedder
from deltamem.engine.memory import DeltaMem
from deltamem.errors import ExtractionError
from deltamem.extract.llm import LLMExtractor
from deltamem.store.sqlite import SQLiteStore
from deltamem.testing import ScriptedLLM
from helpers import TEST_SETTINGS, make_episode

SKILL = json.dumps({"activation": "When asked to heat the apple",
                    "steps": ["go to kitchen", "take apple", "heat apple"],
                    "termination": "the apple is hot"})
KNOWLEDGE = json.dumps({"trigger": "Applies to kitchens", "facts": ["the microwave heats food"]})
HOSTILE = Path(__file__).parent / "fixtures" / "hostile_answers.jsonl"


def memory(tmp_path, answers):
    llm = ScriptedLLM(answers)
    mem = DeltaMem(SQLiteStore(tmp_path / "m.db"), HashingEmbedder(), LLMExtractor(llm),
                   settings=TEST_SETTINGS)
    return mem, llm


def test_llm_learn_reports_calls_and_tokens(tmp_path):
    """Two extraction calls per new episode, with tokens accounted on the result."""
    mem, llm = memory(tmp_path, [SKILL, KNOWLEDGE])
    result = mem.learn(make_episode())
    assert (result.task.action, result.env.action) == ("root", "root")
    assert result.usage.llm_calls == 2 and len(llm.calls) == 2
    assert result.usage.prompt_tokens > 0 and result.usage.completion_tokens > 0
    assert mem.experience(result.task.node).steps == ("go to kitchen", "take apple", "heat apple")
    mem.close()


def test_same_trace_skips_the_model(tmp_path):
    """An episode whose trajectory is already stored is deduplicated without any model call."""
    mem, llm = memory(tmp_path, [SKILL, KNOWLEDGE])
    first = mem.learn(make_episode())
    again = mem.learn(make_episode())  # ScriptedLLM would raise if it were called again
    assert (again.task.action, again.env.action) == ("dedup", "dedup")
    assert again.task.node == first.task.node
    assert again.usage.llm_calls == 0 and again.usage.llm_calls_saved == 2
    assert llm.remaining == 0
    mem.close()


def _hostile_cases():
    return [json.loads(line) for line in HOSTILE.read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("case", [c for c in _hostile_cases() if c["kind"] == "skill"],
                         ids=lambda c: c["name"])
def test_hostile_answers_give_a_node_or_an_error_and_never_half_a_write(tmp_path, case):
    """Each malformed model answer yields a valid node or ExtractionError with the DB unchanged."""
    # The first answer is retried once with the validation error fed back: give it the same junk.
    mem, _ = memory(tmp_path, [case["raw"], case["raw"], KNOWLEDGE, KNOWLEDGE])
    before = mem.stats()
    try:
        result = mem.learn(make_episode())
    except ExtractionError as exc:
        assert case["expected"] == "error", case["name"]
        assert exc.raw is not None and exc.attempts == 2
        assert mem.stats() == before
        assert list(mem.nodes()) == []
    else:
        assert case["expected"] == "valid", case["name"]
        assert mem.check() == []
        assert mem.experience(result.task.node).TYPE == "skill"
    finally:
        mem.close()
