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
    (``scenes.coding.project_scene``, unless ``env`` is given) and records it as
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
        from deltamem.scenes.coding import project_scene, signature_of

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
