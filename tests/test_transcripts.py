"""Episodes from transcripts: OpenAI chat messages, Responses API items, Anthropic blocks."""

from __future__ import annotations

import pytest

from deltamem.errors import EpisodeError
from deltamem.formats.transcripts import (
    MAX_OBSERVATION,
    episode_from_messages,
    messages_from_anthropic,
    messages_from_responses,
)

CHAT = [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": [{"type": "text", "text": "fix the login test"}]},
    {"role": "assistant", "content": "Run it first.", "tool_calls": [
        {"id": "a", "type": "function",
         "function": {"name": "bash", "arguments": '{"command": "pytest -q"}'}}]},
    {"role": "tool", "tool_call_id": "a", "content": "1 failed"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "b", "type": "function",
         "function": {"name": "edit", "arguments": {"path": "login.py", "line": 3}}}]},
    {"role": "tool", "tool_call_id": "b", "content": "ok"},
    {"role": "user", "content": "also run the linter"},
    {"role": "assistant", "content": "Done: the test passes."},
]


def test_chat_messages_become_steps_with_observations_and_thoughts():
    ep = episode_from_messages(CHAT, success=True, env="repo")
    assert ep.task == "fix the login test" and ep.env == "repo" and ep.success
    assert [s.action for s in ep.steps] == [
        "bash: pytest -q", 'edit(path="login.py", line=3)', "reply: Done: the test passes."]
    assert ep.steps[0].observation == "1 failed" and ep.steps[0].thought == "Run it first."
    assert ep.steps[1].observation == "ok\nuser: also run the linter"
    assert episode_from_messages(CHAT, success=False, task="given").task == "given"


def test_long_tool_output_is_cut_in_the_middle_so_its_end_survives():
    output = "\n".join([f"resource/{i} unchanged" for i in range(200)]
                       + ["Error from server (Forbidden): denied the request: [policy] needs X"])
    chat = [CHAT[1], CHAT[2], {"role": "tool", "tool_call_id": "a", "content": output}]
    step = episode_from_messages(chat, success=True).steps[0]
    assert len(step.observation) <= MAX_OBSERVATION
    assert step.observation.startswith("resource/0 unchanged")
    assert step.observation.endswith("denied the request: [policy] needs X")
    assert "characters ...]" in step.observation


def test_transcript_without_task_or_steps_is_a_clear_error():
    with pytest.raises(EpisodeError, match="no task"):
        episode_from_messages([CHAT[2]], success=True)
    with pytest.raises(EpisodeError, match="no assistant step"):
        episode_from_messages([CHAT[1]], success=True)
    with pytest.raises(EpisodeError, match=r"messages\[0\]"):
        episode_from_messages(["hi"], success=True)  # type: ignore[list-item]


def test_responses_items_convert_like_chat():
    items = [
        {"role": "user", "content": "fix the login test"},
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Run it first."}]},
        {"type": "function_call", "call_id": "a", "name": "bash",
         "arguments": '{"command": "pytest -q"}'},
        {"type": "function_call_output", "call_id": "a", "output": "1 failed"},
        {"type": "custom_tool_call", "call_id": "p", "name": "apply_patch",
         "input": "*** Begin Patch"},
        {"type": "custom_tool_call_output", "call_id": "p", "output": "Success"},
        {"type": "message", "role": "assistant",
         "content": [{"type": "output_text", "text": "Done."}]},
    ]
    ep = episode_from_messages(messages_from_responses(items), success=True)
    assert [s.action for s in ep.steps] == [
        "bash: pytest -q", "apply_patch: *** Begin Patch", "reply: Done."]
    assert ep.steps[0].thought == "Run it first." and ep.steps[1].observation == "Success"


def test_anthropic_blocks_convert_and_errors_show():
    messages = [
        {"role": "user", "content": "fix the login test"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Look at the test."},
            {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "pytest"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                      "content": [{"type": "text", "text": "boom"}],
                                      "is_error": True}]},
        {"role": "assistant", "content": [{"type": "text", "text": "It fails."}]},
    ]
    ep = episode_from_messages(messages_from_anthropic(messages), success=False)
    assert [s.action for s in ep.steps] == ["Bash: pytest", "reply: It fails."]
    assert ep.steps[0].observation == "error: boom"
    assert ep.steps[0].thought == "Look at the test."


def test_a_long_output_keeps_the_error_headline_from_its_middle():
    lines = [f"module.net.aws_subnet.private[{i}]: Refreshing state..." for i in range(60)]
    lines += ["\u2502 Error: Error acquiring the state lock", "\u2502",
              "\u2502 Error message: ConditionalCheckFailedException: the request failed"]
    lines += [f"\u2502   detail line {i} of the lock info block, padded to be long"
              for i in range(14)]
    chat = [CHAT[1], CHAT[2], {"role": "tool", "tool_call_id": "a", "content": "\n".join(lines)}]
    step = episode_from_messages(chat, success=True).steps[0]
    assert len(step.observation) <= MAX_OBSERVATION
    assert "Error: Error acquiring the state lock" in step.observation
    assert step.observation.endswith("detail line 13 of the lock info block, padded to be long")
