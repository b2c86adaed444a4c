"""Claude Code and Codex hooks: recall into the session, learn each turn from the transcript.

The hook commands (``deltamem hook EVENT``) read the hook's JSON from stdin, as both tools send
it (``session_id``, ``transcript_path``, ``cwd``, ``hook_event_name``, and ``prompt`` for
``UserPromptSubmit``), and print the JSON both tools read back:

* ``session-start`` -- the scene knowledge recalled for the working directory, as
  ``hookSpecificOutput.additionalContext``;
* ``user-prompt`` -- the skill recalled for the user's request, the same way;
* ``stop`` -- learns the turn that just ended: the task is the user's request, the steps are
  the agent's tool calls with their results, the scene is the working directory. Nothing is
  printed. A turn without a tool call (a question answered) teaches no skill and is skipped, and
  so is a turn in which the agent already called the memory's own ``learn`` tool.

A turn's outcome: a failure when the agent reported one with the memory's ``record_outcome``
tool, when the user interrupted it, or when its last tool call failed; otherwise a success.

Transcripts are read in both recorded formats: Claude Code's JSONL (``type`` user/assistant
lines holding Anthropic ``message`` objects) and Codex's rollout JSONL (``session_meta``,
``response_item`` lines holding Responses API items).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deltamem.errors import EpisodeError
from deltamem.memory import DeltaMem
from deltamem.results import LearnResult
from deltamem.transcripts import (
    Message,
    content_text,
    episode_from_messages,
    messages_from_anthropic,
    messages_from_responses,
)

EVENTS = {"session-start": "SessionStart", "user-prompt": "UserPromptSubmit", "stop": "Stop"}
# The argument that says what a Claude Code tool call did (the rest is noise for a skill).
PRIMARY_ARGUMENT = {"Bash": "command", "Read": "file_path", "Edit": "file_path",
                    "MultiEdit": "file_path", "Write": "file_path", "NotebookEdit": "notebook_path",
                    "Grep": "pattern", "Glob": "pattern", "WebFetch": "url", "WebSearch": "query"}
# User texts that are not requests: tool scaffolding both clients record as user messages.
NOT_A_REQUEST = ("<environment_context>", "<user_instructions>", "# AGENTS.md", "<command-",
                 "<local-command-", "Caveat: ", "<system-reminder>", "<turn_aborted>")
INTERRUPTED = "[Request interrupted by user"


@dataclass
class Transcript:
    """A session as chat messages, with the working directory it ran in."""

    messages: list[Message] = field(default_factory=list)
    cwd: str = ""


def scene(cwd: str) -> str:
    """The environment-tree key of a working directory."""
    path = Path(cwd) if cwd else Path.cwd()
    return f"software project {path.name} at {path}"


def read_transcript(path: str | Path) -> Transcript:
    """Read a Claude Code or Codex transcript file (the format is told line by line).

    Raises:
        EpisodeError: the file cannot be read.
    """
    p = Path(path)
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise EpisodeError(f"cannot read transcript: {exc}", where=str(p)) from exc
    out = Transcript()
    claude: list[Mapping[str, Any]] = []
    codex: list[Mapping[str, Any]] = []
    for record in _records(lines):
        kind = record.get("type")
        payload = record.get("payload")
        if kind == "session_meta" and isinstance(payload, Mapping):
            out.cwd = str(payload.get("cwd") or out.cwd)
        elif kind == "response_item" and isinstance(payload, Mapping):
            codex.append(_codex_item(payload))
        elif kind in ("user", "assistant") and isinstance(record.get("message"), Mapping):
            if record.get("isSidechain") or record.get("isMeta"):
                continue  # a subagent's own conversation, or a client note
            out.cwd = str(record.get("cwd") or out.cwd)
            message = _claude_message(record["message"])
            if claude and _same_reply(claude[-1], message):
                # Claude Code writes one line per content block of a reply: join them again.
                message = {**message, "content": [*claude.pop()["content"], *message["content"]]}
            claude.append(message)
    out.messages = messages_from_anthropic(claude) + messages_from_responses(codex)
    return out


def _records(lines: list[str]) -> Iterator[Mapping[str, Any]]:
    for line in lines:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line being written while we read
        if isinstance(record, Mapping):
            yield record


def _same_reply(previous: Mapping[str, Any], message: Mapping[str, Any]) -> bool:
    return (message.get("role") == "assistant" and previous.get("role") == "assistant"
            and bool(message.get("id")) and previous.get("id") == message.get("id")
            and isinstance(previous.get("content"), list)
            and isinstance(message.get("content"), list))


def _claude_message(message: Mapping[str, Any]) -> Mapping[str, Any]:
    content = message.get("content")
    if not isinstance(content, list):
        return message
    blocks = []
    for block in content:
        if isinstance(block, Mapping) and block.get("type") == "tool_use":
            args = block.get("input") or {}
            key = PRIMARY_ARGUMENT.get(str(block.get("name")))
            if key and isinstance(args, Mapping) and key in args:
                block = {**block, "input": {key: args[key]}}
        blocks.append(block)
    return {**message, "content": blocks}


def _codex_item(item: Mapping[str, Any]) -> Mapping[str, Any]:
    """Codex items with their shell commands and exit codes made readable."""
    if item.get("type") == "function_call":
        try:
            args = json.loads(str(item.get("arguments") or "{}"))
        except json.JSONDecodeError:
            return item
        command = args.get("command", args.get("cmd")) if isinstance(args, Mapping) else None
        if isinstance(command, list) and command:
            command = str(command[-1])
        if isinstance(command, str):
            return {**item, "arguments": json.dumps({"command": command})}
    if item.get("type") in ("function_call_output", "custom_tool_call_output"):
        output = item.get("output")
        try:
            data = json.loads(output) if isinstance(output, str) else None
        except json.JSONDecodeError:
            data = None
        if isinstance(data, Mapping) and "output" in data:
            code = (data.get("metadata") or {}).get("exit_code", 0)
            text = str(data["output"])
            return {**item, "output": f"error: exit code {code}: {text}" if code else text}
    return item


def is_request(message: Message) -> bool:
    """A user message that is a request (not tool scaffolding or a client note)."""
    text = content_text(message.get("content"))
    return message.get("role") == "user" and bool(text) and not text.startswith(NOT_A_REQUEST)


def last_turn(messages: list[Message]) -> list[Message]:
    """The messages from the last user request to the end ([] when there is none)."""
    starts = [i for i, m in enumerate(messages) if is_request(m)]
    return messages[starts[-1]:] if starts else []


def _memory_call(call: Mapping[str, Any]) -> tuple[str, Any] | None:
    """``(tool name, arguments)`` of a call to the memory's own MCP tools, else None."""
    function = call.get("function") or {}
    name = str(function.get("name") or "")
    if "deltamem" not in name:
        return None
    args = function.get("arguments")
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            args = None
    return name, args


def _memory_calls(turn: list[Message]) -> list[tuple[str, Any]]:
    return [found for m in turn for call in m.get("tool_calls") or []
            if (found := _memory_call(call)) is not None]


def turn_outcome(turn: list[Message]) -> bool:
    """Whether a turn succeeded (see the module docstring for the rule)."""
    for name, args in reversed(_memory_calls(turn)):
        if name.endswith("record_outcome") and isinstance(args, Mapping) and "success" in args:
            return bool(args["success"])
    if any(INTERRUPTED in content_text(m.get("content")) for m in turn):
        return False
    results = [m for m in turn if m.get("role") == "tool"]
    return not results or not content_text(results[-1].get("content")).startswith("error: ")


def learn_turn(mem: DeltaMem, transcript: Transcript, *,
               cwd: str = "") -> LearnResult | None:
    """Learn the last turn of ``transcript`` (None when the turn teaches nothing)."""
    turn = last_turn(transcript.messages)
    if any(name.endswith("learn") for name, _ in _memory_calls(turn)):
        return None  # the agent already handed this turn to the memory itself
    steps = [m for m in turn
             if not any(_memory_call(c) for c in m.get("tool_calls") or [])]
    if not any(m.get("tool_calls") for m in steps):
        return None
    episode = episode_from_messages(steps, success=turn_outcome(turn),
                                    env=scene(cwd or transcript.cwd),
                                    meta={"source": "hook"})
    return mem.learn(episode)


def context_output(event: str, context: str) -> dict[str, Any]:
    """The JSON both clients read from a hook that adds context ({} when there is none)."""
    if not context:
        return {}
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": context}}


def run_hook(mem: DeltaMem, event: str, payload: Mapping[str, Any], *,
             budget_tokens: int | None = None) -> dict[str, Any]:
    """Handle one hook call; return the JSON to print ({} for nothing). ``budget_tokens`` caps
    the context a hook adds.

    Raises:
        EpisodeError: an unknown event, or a transcript that cannot be read.
    """
    if event not in EVENTS:
        raise EpisodeError(f"unknown hook event {event!r} (one of {', '.join(EVENTS)})")
    cwd = str(payload.get("cwd") or "")
    if event == "session-start":
        recalled = mem.recall("", scene(cwd), budget_tokens=budget_tokens)
        return context_output(EVENTS[event], recalled.context)
    if event == "user-prompt":
        prompt = str(payload.get("prompt") or "")
        skill = mem.recall(prompt, "", budget_tokens=budget_tokens).context if prompt else ""
        return context_output(EVENTS[event], skill)
    path = payload.get("transcript_path")
    if path:
        learn_turn(mem, read_transcript(str(path)), cwd=cwd)
    return {}
