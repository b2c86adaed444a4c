"""Claude Code and Codex hooks: a short note on the project at session start, the skill or lesson
of a past task like the request per prompt, and learning each finished task from the transcript.

The hook commands (``deltamem hook EVENT``) read the hook's JSON from stdin, as both tools send
it (``session_id``, ``transcript_path``, ``cwd``, ``hook_event_name``, and ``prompt`` for
``UserPromptSubmit``), and print the JSON both tools read back:

* ``session-start`` -- the project's knowledge (exactly this repository's: see
  ``integrations.coding_memory``) as a short note, ``hookSpecificOutput.additionalContext``; at most
  ``DELTAMEM_SESSION_START_TOKENS`` tokens (200; 0 turns it off);
* ``user-prompt`` -- the skill or failure lesson of a past task like the request, within the
  scope (``DELTAMEM_SCOPE``), at most ``DELTAMEM_USER_PROMPT_TOKENS`` tokens (250; 0: off);
* ``stop`` -- learns what the turn finished: the task (the request and its follow-ups, see
  ``extract.coding_session``) with its outcome judged by the documented rules, plus an
  interrupted task before it (no Stop hook runs after an interrupt). Nothing is printed.
* ``session-end`` -- learns a last task the user interrupted (Claude Code's ``SessionEnd``),
  unless a Stop hook already learned it. Nothing is printed.

A task with no call that acts (a question answered) teaches nothing, and a turn in which the
agent already called the memory's own ``learn`` tool is skipped. The extractor is the configured
one (``DELTAMEM_EXTRACTOR``): the coding rules, or with ``llm`` a model at an OpenAI-compatible
endpoint under the same rules.

Transcripts are read in both recorded formats: Claude Code's JSONL (``type`` user/assistant
lines holding Anthropic ``message`` objects) and Codex's rollout JSONL (``session_meta``,
``response_item`` lines holding Responses API items).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deltamem import config
from deltamem._util.lazymod import module
from deltamem.engine.memory import DeltaMem
from deltamem.errors import ConfigError, EpisodeError
from deltamem.extract.base import Extractor
from deltamem.extract.coding_session import CodingExtractor, episode_calls, judge, split_tasks
from deltamem.extract.coding_session import is_request as _is_request
from deltamem.formats.transcripts import (
    Message,
    claude_message,
    codex_items,
    episode_from_messages,
    messages_from_anthropic,
    messages_from_responses,
    turn_end,
)
from deltamem.integrations import env
from deltamem.integrations.coding_memory import CodingMemory
from deltamem.integrations.repository import checkout
from deltamem.scenes.project import project_root, project_scene
from deltamem_hook import reply_digest

if TYPE_CHECKING:
    from deltamem.engine import results
else:
    results = module("deltamem.engine.results")


EVENTS = {"session-start": "SessionStart", "user-prompt": "UserPromptSubmit", "stop": "Stop",
          "session-end": "SessionEnd"}
# The result of a tool call the transcript holds no result for (see ``parse_transcript``).
NO_RESULT = "error: no result was recorded for this call"
# How long a turn's learner waits for the client to flush the turn's final reply.
FLUSH_WAIT = 3.0
@dataclass
class Transcript:
    """A session as chat messages, with the working directory it ran in."""

    messages: list[Message] = field(default_factory=list)
    cwd: str = ""
    # Lines the session's edits replaced (kept out of what is learned: an edit made them false).
    replaced: list[str] = field(default_factory=list)


def scene(cwd: str) -> str:
    """The environment-tree key of a working directory: its project (the repository's main
    checkout, ``integrations.repository``; without a repository, the folder holding ``.git``
    or the directory itself)."""
    found = checkout(cwd or Path.cwd())
    return project_scene(found.root if found is not None else project_root(cwd or Path.cwd()))


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
    return parse_transcript(lines)


def read_turn(path: str | Path, size: int = 0, *, reply: str | None = None,
              digest: str | None = None, since: float | None = None,
              wait: float = FLUSH_WAIT, failed: Mapping[str, bool] | None = None) -> Transcript:
    """The transcript as it is at the end of the turn that ended when it was ``size`` bytes long
    (0: its end now). A client may flush the turn's last lines after its end hook ran (Claude
    Code runs Stop first): the lines after ``size`` up to the next turn are read too, and until
    the turn's final reply is there (``reply``, the Stop hook's ``last_assistant_message``, or
    its ``digest``, :func:`deltamem_hook.reply_digest`) the file is read again, up to ``wait``
    seconds after ``since`` (default: now). A reply still missing then is added from ``reply``
    when it is known. ``failed`` are the calls Claude Code's ``PostToolUseFailure`` hook
    reported (``{tool_use_id: is_interrupt}``): their results read as failures.

    Raises:
        EpisodeError: the file cannot be read.
    """
    want = digest or (reply_digest(reply) if reply else None)
    deadline = (time.time() if since is None else since) + wait
    while True:
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            raise EpisodeError(f"cannot read transcript: {exc}", where=str(path)) from exc
        text = data[:turn_end(data, size)].decode("utf-8", errors="replace")
        transcript = parse_transcript(text.splitlines(), failed=failed)
        found = want is None or _last_reply_is(transcript.messages, want)
        if found or time.time() >= deadline:
            break
        time.sleep(0.05)
    if not found and reply:
        transcript.messages.append({"role": "assistant", "content": reply.strip()})
    return transcript


def _last_reply_is(messages: list[Message], digest: str) -> bool:
    for message in reversed(messages):
        if message.get("role") == "assistant" and not message.get("tool_calls"):
            return reply_digest(str(message.get("content") or "")) == digest
        if message.get("role") in ("assistant", "tool"):
            return False
    return False


def parse_transcript(lines: list[str], *, failed: Mapping[str, bool] | None = None
                     ) -> Transcript:
    """A transcript from its lines (Claude Code JSONL or a Codex rollout); the results of the
    ``failed`` calls (``{tool_use_id: is_interrupt}``) read as failures (or interrupts)."""
    out = Transcript()
    claude: list[Mapping[str, Any]] = []
    codex: list[Mapping[str, Any]] = []
    for record in _records(lines):
        kind = record.get("type")
        payload = record.get("payload")
        if kind == "session_meta" and isinstance(payload, Mapping):
            out.cwd = str(payload.get("cwd") or out.cwd)
        elif kind in ("response_item", "event_msg") and isinstance(payload, Mapping):
            codex.append(record)
        elif kind in ("user", "assistant") and isinstance(record.get("message"), Mapping):
            if record.get("isSidechain") or record.get("isMeta") or record.get(
                    "isCompactSummary"):
                continue  # a subagent's own conversation, a client note, a compaction summary
            out.cwd = str(record.get("cwd") or out.cwd)
            out.replaced += _replaced_by_edits(record["message"])
            message = claude_message(record["message"])
            if claude and _same_reply(claude[-1], message):
                # Claude Code writes one line per content block of a reply: join them again.
                message = {**message, "content": [*claude.pop()["content"], *message["content"]]}
            claude.append(message)
    items = codex_items(codex)
    for item in items:
        out.replaced += _replaced_in_patch(item)
    messages = messages_from_anthropic(claude) + messages_from_responses(items)
    out.messages = _answered([_failed(m, failed) for m in messages] if failed else messages)
    return out


def _failed(message: Message, failed: Mapping[str, bool]) -> Message:
    call = str(message.get("tool_call_id") or "")
    content = str(message.get("content") or "")
    if message.get("role") != "tool" or call not in failed or content.startswith("error: "):
        return message
    mark = "error: Interrupted by user: " if failed[call] else "error: "
    return {**message, "content": mark + content}


def _answered(messages: list[Message]) -> list[Message]:
    """``messages`` with a result for every tool call: a call the transcript records no result
    for (the client had not written it, or the call never finished) gets an error result, so a
    missing output never reads as a pass."""
    answered = {str(m.get("tool_call_id")) for m in messages if m.get("role") == "tool"}
    out: list[Message] = []
    for message in messages:
        out.append(message)
        for call in message.get("tool_calls") or []:
            if call.get("id") and str(call["id"]) not in answered:
                out.append({"role": "tool", "tool_call_id": call["id"],
                            "content": NO_RESULT})
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


def _replaced(old: str, new: str) -> list[str]:
    kept = {line.strip() for line in new.splitlines()}
    return [line.strip() for line in old.splitlines() if line.strip() and line.strip() not in kept]


def _replaced_by_edits(message: Mapping[str, Any]) -> list[str]:
    """The lines Claude Code's Edit / MultiEdit calls of a message replace."""
    content = message.get("content")
    out: list[str] = []
    for block in content if isinstance(content, list) else []:
        if not (isinstance(block, Mapping) and block.get("type") == "tool_use"):
            continue
        args = block.get("input")
        if not isinstance(args, Mapping):
            continue
        listed = args.get("edits")
        edits: list[Any] = listed if isinstance(listed, list) else [args]
        for edit in edits:
            if isinstance(edit, Mapping) and isinstance(edit.get("old_string"), str):
                out += _replaced(str(edit["old_string"]), str(edit.get("new_string") or ""))
    return out


def _replaced_in_patch(item: Mapping[str, Any]) -> list[str]:
    """The lines a Codex ``apply_patch`` call removes."""
    text = item.get("input", item.get("arguments")) if item.get("type") in (
        "custom_tool_call", "function_call") else None
    if not isinstance(text, str) or "*** Begin Patch" not in text:
        return []
    text = text.replace("\\n", "\n")
    lines = text.splitlines()
    removed = "\n".join(x[1:] for x in lines if x.startswith("-") and not x.startswith("---"))
    added = "\n".join(x[1:] for x in lines if x.startswith("+") and not x.startswith("+++"))
    return _replaced(removed, added)


def is_request(message: Message) -> bool:
    """A user message that is a request (not tool scaffolding, a client note or an interrupt)."""
    return _is_request(message)


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


def _verdict(turn: list[Message]) -> bool | None:
    """The outcome the agent reported itself with the memory's ``record_outcome`` tool."""
    for name, args in reversed(_memory_calls(turn)):
        if name.endswith("record_outcome") and isinstance(args, Mapping) and "success" in args:
            return bool(args["success"])
    return None


def turn_outcome(turn: list[Message]) -> bool:
    """Whether a turn succeeded, by the rules of ``extract.coding_session.judge`` (the agent's own
    ``record_outcome`` first)."""
    verdict = _verdict(turn)
    if verdict is not None:
        return verdict
    steps = [m for m in turn if not any(_memory_call(c) for c in m.get("tool_calls") or [])]
    if not any(m.get("tool_calls") for m in steps):
        return True
    calls = episode_calls(episode_from_messages(steps, success=True, task="-"))
    replies = [c.output for c in calls if c.kind == "reply"]
    return judge(calls, replies[-1] if replies else "")[0]


def hook_extractor(environ: Mapping[str, str] | None = None) -> Extractor:
    """The extractor the hooks learn with, as configured (``DELTAMEM_EXTRACTOR``): the coding
    rules (``trace``, the default), or a model under them (``llm``). A coding transcript needs
    a capable model: ``llm`` uses the OpenAI-compatible endpoint (``DELTAMEM_LLM_BASE_URL``,
    ``DELTAMEM_LLM_MODEL``), or Anthropic's API with ``DELTAMEM_LLM=anthropic``; the embedded
    135M model is used only when ``DELTAMEM_LLM=local`` asks for it.

    Raises:
        ConfigError: an unknown extractor, or ``llm`` with no endpoint configured.
    """
    name, llm = env.extractor_choice(environ)
    if name == "trace":
        return CodingExtractor()
    endpoint = config.llm_endpoint(environ)
    if name == "llm" and llm is None and endpoint["base_url"] is None:
        raise ConfigError("DELTAMEM_EXTRACTOR=llm needs a model for coding transcripts: set "
                          "DELTAMEM_LLM_BASE_URL and DELTAMEM_LLM_MODEL (an OpenAI-compatible "
                          "endpoint), or DELTAMEM_LLM=anthropic and DELTAMEM_LLM_MODEL (the "
                          "embedded 135M model is not a coding-transcript extractor)")
    from deltamem.extract import make_extractor

    return CodingExtractor(make_extractor(name, llm=llm, base_url=endpoint["base_url"],
                                          model=endpoint["model"], api_key=endpoint["api_key"]))


def learn_turn(mem: DeltaMem, transcript: Transcript, *, cwd: str = "",
               extractor: Extractor | None = None, scope: str | None = None,
               meta: Mapping[str, Any] | None = None,
               session_end: bool = False) -> results.LearnResult | None:
    """Learn what the last turn of ``transcript`` finished (see the module docstring), or at
    the session's end a last task the user interrupted; the result of the last task learned,
    None when it teaches nothing."""
    turn = last_turn(transcript.messages)
    if any(name.endswith("learn") for name, _ in _memory_calls(turn)):
        return None  # the agent already handed this turn to the memory itself
    messages = [m for m in transcript.messages
                if not any(_memory_call(c) for c in m.get("tool_calls") or [])]
    coding = CodingMemory.for_directory(mem, cwd or transcript.cwd, hints=_texts(messages),
                                        scope=scope or env.scope(),
                                        extractor=extractor or CodingExtractor())
    results = coding.learn_session(messages, verdict=_verdict(turn), stale=transcript.replaced,
                                   meta={"source": "hook", **dict(meta or {})},
                                   session_end=session_end)
    return results[-1] if results else None


def waiting_on_user(transcript: Transcript) -> bool:
    """Whether the session's last task waits on the user's answer
    (``extract.coding_session.Task.awaits_user``): :func:`learn_turn` left it for the answer,
    the user's next task, or the session's end."""
    tasks = split_tasks(transcript.messages)
    return bool(tasks) and tasks[-1].awaits_user


def _texts(messages: list[Message]) -> list[str]:
    """The tool calls' arguments and results of a session (where its root may show)."""
    out = []
    for m in messages:
        if m.get("role") == "tool":
            out.append(str(m.get("content") or ""))
        for c in m.get("tool_calls") or []:
            out.append(json.dumps((c.get("function") or {}).get("arguments"), default=str))
    return out


def context_output(event: str, context: str) -> dict[str, Any]:
    """The JSON both clients read from a hook that adds context ({} when there is none)."""
    if not context:
        return {}
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": context}}


def run_hook(mem: DeltaMem, event: str, payload: Mapping[str, Any], *,
             budget_tokens: int | None = None, scope: str | None = None,
             extractor: Extractor | None = None) -> dict[str, Any]:
    """Handle one hook call; return the JSON to print ({} for nothing). ``budget_tokens``
    overrides the hook's configured budget (``env.hook_budget``), ``scope`` the configured
    scope, ``extractor`` the configured extractor (``hook_extractor``).

    Raises:
        EpisodeError: an unknown event, or a transcript that cannot be read.
        ConfigError: a bad ``DELTAMEM_*`` setting.
    """
    if event not in EVENTS:
        raise EpisodeError(f"unknown hook event {event!r} (one of {', '.join(EVENTS)})")
    cwd = str(payload.get("cwd") or "")
    scope = scope or env.scope()
    if event in ("session-start", "user-prompt"):
        budget = env.hook_budget(event) if budget_tokens is None else budget_tokens
        if budget <= 0:
            return {}
        coding = CodingMemory.for_directory(mem, cwd, scope=scope)
        if event == "session-start":
            return context_output(EVENTS[event], coding.session_note(budget))
        prompt = str(payload.get("prompt") or "")
        return context_output(EVENTS[event], coding.task_note(prompt, budget))
    path = payload.get("transcript_path")
    if path:
        meta = {"session": str(payload["session_id"])} if payload.get("session_id") else {}
        reply = payload.get("last_assistant_message")
        transcript = read_turn(str(path), reply=reply if isinstance(reply, str) else None)
        learn_turn(mem, transcript, cwd=cwd, scope=scope,
                   extractor=extractor or hook_extractor(), meta=meta,
                   session_end=event == "session-end")
    return {}
