"""Reading the clients as they are: transcripts, rollouts and hook payloads recorded from the real
Claude Code 2.1.197 and Codex CLI 0.171.0 (``scripts/realclients/record.py``, fixtures under
``tests/fixtures/clients/``), each a scripted fix-the-test session.

Where a test changes a recorded file (cutting it where the client had flushed it when a hook
ran, adding a line), the change is spelled out in the test.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from deltamem.formats.transcripts import (
    codex_items,
    messages_from_responses,
    starts_turn,
    turn_end,
    unified_exec_output,
)
from deltamem.integrations.claude_code import (
    NO_RESULT,
    last_turn,
    parse_transcript,
    read_transcript,
    read_turn,
    turn_outcome,
)
from deltamem_hook import reply_digest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "clients"
CLAUDE = FIXTURES / "claude-code-2.1.197"
CODEX = FIXTURES / "codex-0.171.0"
REPLY = "I changed add() in calc.py, which subtracted its arguments."


def hooks(session: Path) -> dict[str, dict[str, Any]]:
    return {h["event"]: h for h in json.loads((session / "hooks.json").read_text())}


def steps(transcript: Any) -> list[tuple[str, str]]:
    """(tool, command or output) pairs of a parsed transcript's last turn."""
    out = []
    for message in last_turn(transcript.messages):
        for call in message.get("tool_calls") or []:
            out.append(("call", f"{call['function']['name']}: "
                                f"{json.dumps(call['function']['arguments'])}"))
        if message.get("role") == "tool":
            out.append(("result", str(message.get("content"))))
        elif message.get("role") == "assistant" and not message.get("tool_calls"):
            out.append(("reply", str(message.get("content"))))
    return out


# -- Claude Code: the Stop race -------------------------------------------------------------


def _cut_at_last_tool_use(lines: list[str]) -> list[str]:
    """The transcript as Claude Code had it when Stop ran in the trial's worst case: ending at
    the last Bash tool_use (its result and the final reply not yet written)."""
    last = max(i for i, line in enumerate(lines) if '"tool_use"' in line and '"Bash"' in line)
    return lines[:last + 1]


@pytest.mark.parametrize("scenario", ["fix-fail", "fix-pass"])
def test_stop_reads_the_turn_the_client_flushes_after_the_hook(scenario: str,
                                                               tmp_path: Path) -> None:
    session = CLAUDE / scenario / "session-1"
    lines = (session / "transcript.jsonl").read_text().splitlines(keepends=True)
    stop = hooks(session)["stop"]
    assert stop["payload"]["last_assistant_message"] == REPLY  # what Stop carries
    early = _cut_at_last_tool_use(lines)
    path = tmp_path / "t.jsonl"
    path.write_text("".join(early))
    size = path.stat().st_size

    def flush() -> None:  # the client writes the rest a moment after the hook ran
        time.sleep(0.3)
        with path.open("a") as handle:
            handle.write("".join(lines[len(early):]))

    writer = threading.Thread(target=flush)
    writer.start()
    transcript = read_turn(path, size, digest=reply_digest(REPLY), since=time.time(), wait=5.0)
    writer.join()
    found = steps(transcript)
    assert found[-1] == ("reply", REPLY)
    final = [text for kind, text in found if kind == "result"][-1]
    assert ("1 failed" if scenario == "fix-fail" else "2 passed") in final
    assert turn_outcome(last_turn(transcript.messages)) is (scenario == "fix-pass")


def test_a_reply_never_flushed_is_taken_from_stop_and_a_missing_output_is_no_pass(
        tmp_path: Path) -> None:
    """The passing run's output never reached the file: the run is not judged a pass."""
    lines = (CLAUDE / "fix-pass" / "session-1" / "transcript.jsonl").read_text().splitlines(
        keepends=True)
    path = tmp_path / "t.jsonl"
    path.write_text("".join(_cut_at_last_tool_use(lines)))
    transcript = read_turn(path, reply=REPLY, wait=0.2)
    found = steps(transcript)
    assert found[-1] == ("reply", REPLY)
    assert found[-2] == ("result", NO_RESULT)
    assert turn_outcome(last_turn(transcript.messages)) is False


def test_the_next_turn_already_written_is_not_this_turn(tmp_path: Path) -> None:
    session = CLAUDE / "fix-pass" / "session-1"
    data = (session / "transcript.jsonl").read_bytes()
    size = hooks(session)["stop"]["transcript_size"]
    later = json.dumps({"type": "user", "message": {"role": "user", "content": "now add docs"}})
    grown = data + later.encode() + b"\n"
    assert turn_end(grown, size) == len(data)
    assert starts_turn(json.loads(later))


# -- Codex: unified exec and code mode ------------------------------------------------------


def _rollout(name: str) -> list[dict[str, Any]]:
    text = (CODEX / name / "session-1" / "transcript.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


def test_unified_exec_exit_codes_are_read() -> None:
    """``exec_command`` writes ``Process exited with code N``: the failing final run fails."""
    transcript = read_transcript(CODEX / "fix-fail" / "session-1" / "transcript.jsonl")
    results = [text for kind, text in steps(transcript) if kind == "result"]
    assert results[0].startswith("error: exit code 1: ")
    assert results[-1].startswith("error: exit code 1: ") and "1 failed" in results[-1]
    assert turn_outcome(last_turn(transcript.messages)) is False
    passing = read_transcript(CODEX / "fix-pass" / "session-1" / "transcript.jsonl")
    assert turn_outcome(last_turn(passing.messages)) is True


def test_unified_exec_output_alone_carries_the_exit_code() -> None:
    """Without the rollout's CommandExecution events, the output's own header decides."""
    records = [r for r in _rollout("fix-fail") if r["type"] != "event_msg"]
    outputs = [i["output"] for i in codex_items(records) if i.get("type") ==
               "function_call_output"]
    assert outputs[-1].startswith("error: exit code 1: ")
    raw = [r["payload"]["output"] for r in records if r["type"] == "response_item"
           and r["payload"].get("type") == "function_call_output"]
    assert "Process exited with code 1" in raw[-1]
    assert unified_exec_output(raw[-1]) == outputs[-1]
    assert unified_exec_output("plain text") is None


def test_code_mode_exec_is_read_as_the_calls_it_made() -> None:
    """Code mode (``gpt-5.6-sol``: ``tool_mode`` ``code_mode_only``) runs JavaScript through
    ``exec``; the rollout keeps the JavaScript as the call and records each nested command and
    file change as an ``item_completed`` event. The steps are those commands, never the
    JavaScript, and the failing last run fails the task."""
    records = _rollout("code-mode")
    assert any(r["type"] == "response_item" and r["payload"].get("name") == "exec"
               for r in records)
    transcript = parse_transcript([json.dumps(r) for r in records])
    found = steps(transcript)
    calls = [text for kind, text in found if kind == "call"]
    assert calls[0].startswith("exec_command: ") and "python -m pytest" in calls[0]
    assert "tools." not in " ".join(calls)
    assert any(c.startswith("apply_patch: ") and "calc.py" in c for c in calls)
    results = [text for kind, text in found if kind == "result"]
    assert results[-1].startswith("error: exit code 1: ")
    assert turn_outcome(last_turn(transcript.messages)) is False
    assert "return a - b" in transcript.replaced


def test_codex_client_notes_are_not_requests() -> None:
    records = _rollout("fix-pass")
    note = {"type": "response_item", "payload": {"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "<user_shell_command>\nls\n</user_shell_command>"}]}}
    items = codex_items([*records, note])
    messages = messages_from_responses(items)
    assert messages[-1]["role"] == "system"
    transcript = parse_transcript([json.dumps(r) for r in [*records, note]])
    assert last_turn(transcript.messages)[0]["content"].startswith("The tests fail.")


def test_claude_code_tool_names_read_as_the_rules_know_them() -> None:
    """PowerShell (Windows) is a shell; Agent runs a subagent; TaskCreate/TaskUpdate keep the
    todo list. (Lines in the recorded format; the Linux CLI offers no PowerShell.)"""
    lines = (CLAUDE / "fix-pass" / "session-1" / "transcript.jsonl").read_text().splitlines()
    record = json.loads(next(line for line in lines if '"Bash"' in line))
    made = []
    for name, args in (("PowerShell", {"command": "Invoke-Pester", "description": "x"}),
                       ("Agent", {"description": "explore", "prompt": "look around"}),
                       ("TaskCreate", {"subject": "fix add", "description": "x"})):
        block = {**record["message"]["content"][0], "name": name, "input": args,
                 "id": f"toolu_{name}"}
        made.append(json.dumps({**record, "message": {**record["message"], "id": name,
                                                      "content": [block]}}))
    transcript = parse_transcript([*lines[:-1], *made])
    names = [(c["function"]["name"], c["function"]["arguments"])
             for m in transcript.messages for c in m.get("tool_calls") or []][-3:]
    assert names == [("shell", {"command": "Invoke-Pester"}), ("task", {"description": "explore"}),
                     ("todowrite", {"subject": "fix add"})]


def test_claude_code_reports_each_failed_call_by_id() -> None:
    """The registered PostToolUseFailure hook fires for both failing test runs, naming the call
    the transcript records as failed; what the hook keeps of it is the id and the flag."""
    session = CLAUDE / "fix-fail" / "session-1"
    calls = [h["payload"] for h in json.loads((session / "hooks.json").read_text())
             if h["event"] == "tool-failure"]
    assert [c["hook_event_name"] for c in calls] == ["PostToolUseFailure"] * 2
    assert all(c["tool_name"] == "Bash" and c["is_interrupt"] is False for c in calls)
    transcript = read_transcript(session / "transcript.jsonl")
    failed = {str(m["tool_call_id"]) for m in transcript.messages if m.get("role") == "tool"
              and str(m.get("content")).startswith("error: ")}
    assert {c["tool_use_id"] for c in calls} == failed
