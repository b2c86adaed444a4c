"""Episodes from agent transcripts: chat messages with tool calls, and the files agents record.

One normal form, the OpenAI chat message list (``role`` = system/user/assistant/tool, assistant
``tool_calls`` with ``function.name``/``function.arguments``, tool messages with
``tool_call_id``), is turned into an :class:`Episode` by :func:`episode_from_messages`:

* the task is the first user message (unless given);
* every tool call is a step: the action is ``name: argument`` (one string argument) or
  ``name(key=value, ...)``, the observation is the matching tool result, and the assistant text
  that came with the call is the step's thought;
* assistant text with no tool call is a step ``reply: <text>``; later user messages are
  observations of the step before them (``user: <text>``).

The other formats are converted to that form first: Responses API items (the OpenAI Agents SDK's
``to_input_list()``, Codex ``response_item`` lines) with :func:`messages_from_responses`, and
Anthropic content blocks (Claude Code transcript lines) with :func:`messages_from_anthropic`.
Long texts are cut (``MAX_ACTION`` / ``MAX_OBSERVATION`` characters) so a file dump in a tool
result does not become a fact of the memory. An observation is cut in its middle, never at its
end: a quarter of the limit from its head and the rest from its tail, where a command's error,
its reason and a test summary stand (``[... N characters ...]`` marks the cut).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from deltamem.core.model import Episode, Step, register_message_reader
from deltamem.errors import EpisodeError

MAX_ACTION = 300
MAX_OBSERVATION = 1_000
MAX_TASK = 2_000

Message = dict[str, Any]


def episode_from_messages(messages: Iterable[Mapping[str, Any]], *, success: bool,
                          task: str | None = None, env: str = "", score: float | None = None,
                          meta: dict[str, Any] | None = None,
                          project: str | None = None) -> Episode:
    """An episode from an OpenAI-style chat message list (see the module docstring).

    ``project``, a coding agent's repository root, sets ``env`` to that project's scene
    (``scenes.project.project_scene``, unless ``env`` is given) and records it as
    ``meta["project"]``.

    Raises:
        EpisodeError: no task (none given and no user message), or no step at all.
    """
    builder = _Steps()
    for i, raw in enumerate(messages):
        if not isinstance(raw, Mapping):
            raise EpisodeError(f"messages[{i}] must be an object, got {type(raw).__name__}")
        builder.add(raw)
    goal = task if task is not None else builder.first_user
    if not goal or not goal.strip():
        raise EpisodeError("no task: pass task=... or include a user message")
    if not builder.steps:
        raise EpisodeError("the transcript has no assistant step (no tool call and no reply)")
    info = dict(meta or {})
    if project:
        from deltamem.scenes.project import project_scene, signature_of

        env = env or project_scene(project)
        info["project"] = signature_of(project_scene(project))
    return Episode(task=_cut(goal.strip(), MAX_TASK), env=env, steps=tuple(builder.steps),
                   success=success, score=score, meta=info)


class _Steps:
    """Steps accumulated message by message; tool results find their call by id."""

    def __init__(self) -> None:
        self.steps: list[Step] = []
        self.by_call: dict[str, int] = {}
        self.first_user: str | None = None

    def add(self, message: Mapping[str, Any]) -> None:
        role = message.get("role")
        text = content_text(message.get("content"))
        if role == "user":
            if self.first_user is None:
                self.first_user = text
            elif self.steps and text:
                self.observe(len(self.steps) - 1, "user: " + text)
        elif role == "assistant":
            calls = message.get("tool_calls") or []
            for call in calls:
                self.steps.append(Step(action=_call_action(call),
                                       thought=_cut(text, MAX_OBSERVATION) or None))
                if call.get("id"):
                    self.by_call[str(call["id"])] = len(self.steps) - 1
            if not calls and text:
                self.steps.append(Step(action=_cut("reply: " + text, MAX_ACTION, one_line=True)))
        elif role == "tool":
            index = self.by_call.get(str(message.get("tool_call_id")))
            if index is not None:
                self.observe(index, text)

    def observe(self, index: int, text: str) -> None:
        step = self.steps[index]
        joined = f"{step.observation}\n{text}" if step.observation else text
        self.steps[index] = Step(step.action, excerpt(joined, MAX_OBSERVATION), step.thought)


def content_text(content: Any) -> str:
    """The text of a message content: a string, or a list of text parts (others skipped)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content.strip()
    if isinstance(content, list):
        parts = [p.get("text") or p.get("content") if isinstance(p, Mapping) else p
                 for p in content]
        return "\n".join(p.strip() for p in parts if isinstance(p, str) and p.strip())
    return str(content).strip()


def _call_action(call: Mapping[str, Any]) -> str:
    function = call.get("function") or {}
    name = str(function.get("name") or call.get("name") or "tool")
    args = function.get("arguments", call.get("arguments"))
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError:
            return _cut(f"{name}: {args}", MAX_ACTION, one_line=True)
    return _cut(format_call(name, args), MAX_ACTION, one_line=True)


def format_call(name: str, args: Any) -> str:
    """``name: value`` for one string argument, else ``name(key=value, ...)``."""
    if isinstance(args, Mapping):
        if len(args) == 1 and isinstance(next(iter(args.values())), str):
            return f"{name}: {next(iter(args.values()))}"
        inner = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in args.items())
        return f"{name}({inner})"
    if args in (None, ""):
        return name
    return f"{name}: {args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)}"


def _cut(text: str, limit: int, *, one_line: bool = False) -> str:
    text = " ".join(text.split()) if one_line else text.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


_HEADLINE = re.compile(r"^[\W_]*(?:error|fatal|failed|fail|panic)\b", re.IGNORECASE)
_ERROR_HEAD = re.compile(r"^[\W_]*(?:error\b|fatal\b|failed\b|fail\b|panic\b|\[error\]|"
                         r"\w*(?:error|exception)\b:|traceback\b|e\s{2,})", re.IGNORECASE)


def excerpt(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters: whole when it fits; else its first lines (a fifth
    of the limit), the lines from the middle that start an error (``Error: ...``, ``FAILED``,
    ``Traceback``, ``E   ...``; the last ones, up to a fifth), and its last lines (the rest),
    each cut marked ``[... N characters ...]``. Never a head cut: a command's error, its reason
    and its summary stand at the end."""
    text = text.strip()
    if len(text) <= limit:
        return text
    lines = text.splitlines()
    head: list[str] = []
    size = 0
    for line in lines:
        if size + len(line) + 1 > limit // 5:
            break
        head.append(line)
        size += len(line) + 1
    room = limit - size - 2 * 32  # two cut markers at most
    tail: list[str] = []
    middle: list[str] = []
    mid_room = limit // 5
    rest = lines[len(head):]
    used = 0
    start = len(rest)
    for i in range(len(rest) - 1, -1, -1):  # the tail, whole lines, at least 3/5 of the room
        if used + len(rest[i]) + 1 > room - mid_room:
            break
        used += len(rest[i]) + 1
        start = i
    tail = rest[start:]
    found = [(i, line if len(line) <= 120 else line[:119] + "…")
             for i, line in enumerate(rest[:start]) if _ERROR_HEAD.match(line)]
    # Headlines ("Error: ...", "FAILED ...") first, the latest first; then other error lines.
    found.sort(key=lambda item: (not _HEADLINE.match(item[1]), -item[0]))
    picked = []
    for i, line in found:
        if len(line) + 1 <= mid_room:
            picked.append((i, line))
            mid_room -= len(line) + 1
    middle = [line for _, line in sorted(picked)]
    if not tail and rest:  # one long last line: keep its end
        tail = [rest[-1][-(room - mid_room):]]
    shown = head + middle + tail
    cut = len(text) - sum(len(x) + 1 for x in shown)
    marker = f"[... {max(cut, 0)} characters ...]"
    parts = ["\n".join(head)] if head else []
    if middle:
        parts += [marker, "\n".join(middle)]
    parts += [marker if not middle else "[...]", "\n".join(tail)]
    return "\n".join(p for p in parts if p)[-limit:] if len("\n".join(parts)) > limit else \
        "\n".join(p for p in parts if p)


def messages_from_responses(items: Iterable[Mapping[str, Any]]) -> list[Message]:
    """Chat messages from Responses API items (``message``, ``function_call``,
    ``function_call_output``, ``custom_tool_call``/``_output``, ``reasoning``).

    Items without a ``type`` but with a ``role`` (easy input messages) are messages too.
    """
    out: list[Message] = []
    thought = ""
    for item in items:
        kind = item.get("type") or ("message" if "role" in item else None)
        if kind == "message":
            role = str(item.get("role"))
            out.append({"role": "system" if role == "developer" else role,
                        "content": content_text(item.get("content"))})
        elif kind == "reasoning":
            thought = content_text(item.get("summary")) or thought
        elif kind in ("function_call", "custom_tool_call"):
            args = item.get("arguments", item.get("input"))
            out.append({"role": "assistant", "content": thought, "tool_calls": [{
                "id": item.get("call_id"), "type": "function",
                "function": {"name": item.get("name"), "arguments": args}}]})
            thought = ""
        elif kind in ("function_call_output", "custom_tool_call_output"):
            output = item.get("output")
            out.append({"role": "tool", "tool_call_id": item.get("call_id"),
                        "content": output if isinstance(output, str) else content_text(output)})
    return out


def messages_from_anthropic(messages: Iterable[Mapping[str, Any]]) -> list[Message]:
    """Chat messages from Anthropic-style messages (content blocks ``text``, ``thinking``,
    ``tool_use``, ``tool_result``), as Claude Code records them.

    A ``tool_result`` with ``is_error`` gets an ``error: `` prefix, so the failure shows.
    """
    out: list[Message] = []
    for message in messages:
        role = message.get("role")
        content = message.get("content")
        if isinstance(content, str) or content is None:
            out.append({"role": role, "content": content_text(content)})
            continue
        texts: list[str] = []
        for block in content:
            kind = block.get("type")
            if kind == "text":
                texts.append(str(block.get("text", "")))
            elif kind == "thinking" and role == "assistant":
                texts.append(str(block.get("thinking", "")))
            elif kind == "tool_use":
                out.append({"role": "assistant", "content": "\n".join(texts).strip(),
                            "tool_calls": [{"id": block.get("id"), "type": "function",
                                            "function": {"name": block.get("name"),
                                                         "arguments": block.get("input")}}]})
                texts = []
            elif kind == "tool_result":
                result = content_text(block.get("content"))
                prefix = "error: " if block.get("is_error") else ""
                out.append({"role": "tool", "tool_call_id": block.get("tool_use_id"),
                            "content": prefix + result})
        if any(t.strip() for t in texts):
            out.append({"role": role, "content": "\n".join(texts).strip()})
    return out


# Episode.from_messages calls it (so the core imports nothing above it).
register_message_reader(episode_from_messages)


# -- the clients' own files: Claude Code transcripts and Codex rollouts ------------------------

# The argument that says what a Claude Code tool call did (the rest is noise for a skill).
CLAUDE_PRIMARY_ARGUMENT = {
    "Bash": "command", "PowerShell": "command", "Read": "file_path", "Edit": "file_path",
    "MultiEdit": "file_path", "Write": "file_path", "NotebookEdit": "notebook_path",
    "Grep": "pattern", "Glob": "pattern", "WebFetch": "url", "WebSearch": "query",
    "Agent": "description", "Task": "description", "TaskCreate": "subject",
    "TaskUpdate": "status"}
# Claude Code's tool names that the coding rules know under another name: PowerShell is its
# Windows shell; Agent (formerly Task) runs a subagent; TaskCreate / TaskUpdate keep its todo
# list (formerly TodoWrite).
CLAUDE_TOOL_NAMES = {"PowerShell": "shell", "Agent": "task", "TaskCreate": "todowrite",
                     "TaskUpdate": "todowrite", "TaskList": "todoread", "TaskGet": "todoread"}
# Codex writes these into the user role, and none is a request: a command the user ran in the
# shell (``!cmd``), a subagent's report, a skill's instructions.
CODEX_CLIENT_NOTES = ("<user_shell_command>", "<subagent_notification>", "<skill>")
# Unified exec's output (``exec_command``, Codex's default shell tool): a header, then
# ``Output:``; ``Process exited with code N`` when the command finished.
_UNIFIED_HEAD = re.compile(r"\A(?:Chunk ID: .*\n)?Wall time: .*\n(?:(?!Output:).*\n)*?Output:\n?")
_UNIFIED_EXIT = re.compile(r"^Process exited with code (-?\d+)\s*$", re.MULTILINE)


def claude_message(message: Mapping[str, Any]) -> Mapping[str, Any]:
    """A Claude Code transcript message with each tool call reduced to its primary argument and
    its name in the coding rules' vocabulary (:data:`CLAUDE_TOOL_NAMES`)."""
    content = message.get("content")
    if not isinstance(content, list):
        return message
    blocks = []
    for block in content:
        if isinstance(block, Mapping) and block.get("type") == "tool_use":
            name = str(block.get("name"))
            args = block.get("input") or {}
            key = CLAUDE_PRIMARY_ARGUMENT.get(name)
            if key and isinstance(args, Mapping) and key in args:
                args = {key: args[key]}
            block = {**block, "name": CLAUDE_TOOL_NAMES.get(name, name), "input": args}
        blocks.append(block)
    return {**message, "content": blocks}


def unified_exec_output(text: str) -> str | None:
    """The output of a unified exec call (``exec_command``) as the coding rules read outputs:
    the command's output, prefixed ``error: exit code N:`` when it exited non-zero; None when
    ``text`` is not in that format."""
    head = _UNIFIED_HEAD.match(text)
    if head is None:
        return None
    body = text[head.end():]
    code = _UNIFIED_EXIT.search(head.group(0))
    if code and int(code.group(1)) != 0:
        return f"error: exit code {code.group(1)}: {body}"
    return body


def _command_output(code: Any, output: str) -> str:
    return f"error: exit code {code}: {output}" if isinstance(code, int) and code else output


def _shell_command(command: Any) -> str | None:
    if isinstance(command, list) and command:
        return str(command[-1])
    return command if isinstance(command, str) else None


def codex_items(records: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The Responses items of a Codex rollout's records (``response_item`` and ``event_msg``
    lines), made readable:

    * a shell call's command is its ``command`` (``exec_command``'s ``cmd``, a ``shell`` call's
      argument list), and its output carries the exit code: from the call's own completed
      ``CommandExecution`` event when there is one, else from the output's format (unified exec
      ``Process exited with code N``, the old JSON ``metadata.exit_code``);
    * a code-mode ``exec`` call (JavaScript calling ``tools.exec_command`` /
      ``tools.apply_patch``) becomes the calls it made, read from the ``CommandExecution`` and
      ``FileChange`` events recorded while it ran; one that made none stays a ``javascript``
      step (never a shell command);
    * the user-role client notes of :data:`CODEX_CLIENT_NOTES` become system messages.
    """
    records = list(records)
    call_ids = {str(p.get("call_id")) for r in records
                if r.get("type") == "response_item" and isinstance(p := r.get("payload"), Mapping)
                and p.get("call_id")}
    executions: dict[str, Mapping[str, Any]] = {}
    nested: dict[str, list[Mapping[str, Any]]] = {}
    open_exec: str | None = None
    out: list[Mapping[str, Any]] = []
    for record in records:
        payload = record.get("payload")
        if not isinstance(payload, Mapping):
            continue
        if record.get("type") == "event_msg":
            item = _execution(payload)
            if item is not None and str(item.get("id")) in call_ids:
                executions[str(item.get("id"))] = item
            elif item is not None and open_exec is not None:
                nested.setdefault(open_exec, []).append(item)
            continue
        if record.get("type") != "response_item":
            continue
        kind = payload.get("type")
        if kind == "custom_tool_call" and payload.get("name") == "exec":
            open_exec = str(payload.get("call_id"))
            out.append({**payload, "name": "javascript"})
        elif kind == "custom_tool_call_output" and str(payload.get("call_id")) in nested:
            call = str(payload.get("call_id"))
            inner = nested.pop(call)
            while out and out[-1].get("call_id") == call:
                out.pop()  # the JavaScript call: replaced by the calls it made
            out += [x for i, item in enumerate(inner) for x in _nested_call(f"{call}.{i}", item)]
            open_exec = None
        elif kind == "message" and payload.get("role") == "user" and content_text(
                payload.get("content")).startswith(CODEX_CLIENT_NOTES):
            out.append({**payload, "role": "system"})
        else:
            out.append(_codex_item(payload, executions))
            if kind == "custom_tool_call_output" and str(payload.get("call_id")) == open_exec:
                open_exec = None
    return out


def _execution(event: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The command or file change a Codex ``item_completed`` event records, else None."""
    item = event.get("item") if event.get("type") == "item_completed" else None
    if isinstance(item, Mapping) and item.get("type") in ("CommandExecution", "FileChange"):
        return item
    return None


def _nested_call(call_id: str, item: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """One call a code-mode ``exec`` made, as a function call and its output."""
    if item.get("type") == "FileChange":
        changes = item.get("changes")
        patch = ["*** Begin Patch"]
        for path, change in (changes.items() if isinstance(changes, Mapping) else ()):
            diff = change.get("unified_diff") if isinstance(change, Mapping) else ""
            patch += [f"*** Update File: {path}", str(diff or "").rstrip("\n")]
        patch.append("*** End Patch")
        failed = item.get("status") not in (None, "completed")
        text = str(item.get("stdout") or "") + str(item.get("stderr") or "")
        return [{"type": "custom_tool_call", "call_id": call_id, "name": "apply_patch",
                 "input": "\n".join(patch)},
                {"type": "custom_tool_call_output", "call_id": call_id,
                 "output": f"error: {text}" if failed else text}]
    command = _shell_command(item.get("command")) or ""
    output = str(item.get("aggregated_output") or "")
    return [{"type": "function_call", "call_id": call_id, "name": "exec_command",
             "arguments": json.dumps({"command": command})},
            {"type": "function_call_output", "call_id": call_id,
             "output": _command_output(item.get("exit_code"), output)}]


def _codex_item(item: Mapping[str, Any],
                executions: Mapping[str, Mapping[str, Any]]) -> Mapping[str, Any]:
    """One Codex item with its shell command and exit code made readable."""
    if item.get("type") == "function_call":
        try:
            args = json.loads(str(item.get("arguments") or "{}"))
        except json.JSONDecodeError:
            return item
        command = _shell_command(args.get("command", args.get("cmd"))) if isinstance(
            args, Mapping) else None
        if command is not None:
            return {**item, "arguments": json.dumps({"command": command})}
        return item
    if item.get("type") not in ("function_call_output", "custom_tool_call_output"):
        return item
    done = executions.get(str(item.get("call_id")))
    if done is not None and "exit_code" in done:
        return {**item, "output": _command_output(done.get("exit_code"),
                                                  str(done.get("aggregated_output") or ""))}
    output = item.get("output")
    text = output if isinstance(output, str) else content_text(output)
    unified = unified_exec_output(text)
    if unified is not None:
        return {**item, "output": unified}
    try:
        data = json.loads(text) if text.startswith("{") else None
    except json.JSONDecodeError:
        data = None
    if isinstance(data, Mapping) and "output" in data:
        meta = data.get("metadata")
        code = meta.get("exit_code", 0) if isinstance(meta, Mapping) else 0
        return {**item, "output": _command_output(code, str(data["output"]))}
    return item


def starts_turn(record: Mapping[str, Any]) -> bool:
    """Whether a transcript record starts a new turn: a Claude Code user line that is not a tool
    result or a client note, a Codex ``task_started`` / ``user_message`` event."""
    kind = record.get("type")
    payload = record.get("payload")
    if kind == "event_msg" and isinstance(payload, Mapping):
        return payload.get("type") in ("task_started", "user_message")
    message = record.get("message")
    if kind != "user" or not isinstance(message, Mapping) or record.get("isMeta") or record.get(
            "isSidechain") or record.get("isCompactSummary"):
        return False
    content = message.get("content")
    if isinstance(content, list):
        return not any(isinstance(b, Mapping) and b.get("type") == "tool_result"
                       for b in content)
    return isinstance(content, str)


def turn_end(data: bytes, start: int) -> int:
    """Where the turn that was being written at byte ``start`` of a transcript ends: before the
    first later line that starts a new turn (:func:`starts_turn`), else after the last whole
    line. Lines after ``start`` were flushed after the turn's end hook ran (Claude Code runs
    Stop before it writes the turn's last lines) and belong to it."""
    end = data.rfind(b"\n") + 1
    if start <= 0:
        return end
    line_start = data.rfind(b"\n", 0, start) + 1 if start < len(data) else end
    if line_start < start:  # ``start`` fell inside a line: that line is still this turn's
        line_start = data.find(b"\n", start) + 1 or end
    position = line_start
    while position < end:
        newline = data.index(b"\n", position)
        try:
            record = json.loads(data[position:newline])
        except ValueError:
            record = None
        if isinstance(record, Mapping) and starts_turn(record):
            return position
        position = newline + 1
    return end
