"""Coding sessions written line by line in the clients' on-disk formats, for the coding tests.

:class:`ClaudeSession` writes Claude Code's JSONL (one line per content block of a reply, tool
results as user lines with ``toolUseResult``, ``Exit code N`` results marked ``is_error``, a
rejected permission prompt followed by ``[Request interrupted by user for tool use]``);
:class:`CodexRollout` writes a Codex rollout (``session_meta``, ``response_item`` lines, shell
outputs with their exit code in ``metadata``). The sessions themselves are in
``tests/integrations/test_coding_memory.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

REJECTED = ("The user doesn't want to proceed with this tool use. The tool use was rejected (eg. "
            "if it was a file edit, the new_string was NOT written to the file). STOP what you "
            "are doing and wait for the user to tell you how to proceed.")
INTERRUPTED = "[Request interrupted by user for tool use]"
TODO_ACK = ("Todos have been modified successfully. Ensure that you continue to use the todo list "
            "to track your progress. Please proceed with the current tasks if applicable")


def cat_n(text: str, start: int = 1) -> str:
    """A file as Claude Code's Read tool shows it (``cat -n`` with arrows)."""
    return "\n".join(f"{i:>6}\u2192{line}" for i, line in enumerate(text.splitlines(), start))


class ClaudeSession:
    """A Claude Code session transcript, built call by call."""

    def __init__(self, cwd: str, session: str = "5f0c6f2e-8d7b-4c1e-9a51-2b7d4e9c1a10") -> None:
        self.cwd = cwd
        self.session = session
        self.lines: list[dict[str, Any]] = []
        self.count = 0
        self.parent: str | None = None

    def _line(self, kind: str, message: dict[str, Any], **extra: Any) -> None:
        self.count += 1
        uuid = f"{self.count:08d}-0000-4000-8000-000000000000"
        self.lines.append({"parentUuid": self.parent, "isSidechain": False,
                           "userType": "external", "cwd": self.cwd, "sessionId": self.session,
                           "version": "2.0.31", "gitBranch": "main", "type": kind,
                           "message": message, "uuid": uuid,
                           "timestamp": f"2026-11-30T10:{self.count // 60:02d}:"
                                        f"{self.count % 60:02d}.000Z", **extra})
        self.parent = uuid

    def user(self, text: str) -> ClaudeSession:
        self._line("user", {"role": "user", "content": text})
        return self

    def _assistant(self, block: dict[str, Any], msg: str) -> None:
        self._line("assistant", {"id": msg, "type": "message", "role": "assistant",
                                 "model": "claude-sonnet-4-5-20250929", "content": [block],
                                 "stop_reason": "tool_use" if block["type"] == "tool_use"
                                 else "end_turn", "stop_sequence": None,
                                 "usage": {"input_tokens": 1200, "output_tokens": 80}},
                   requestId=f"req_{msg}")

    def call(self, tool: str, args: dict[str, Any], result: str, *, code: int = 0,
             error: bool = False, thought: str = "") -> ClaudeSession:
        msg = f"msg_{self.count:04d}"
        if thought:
            self._assistant({"type": "text", "text": thought}, msg)
        use = f"toolu_{self.count:04d}"
        self._assistant({"type": "tool_use", "id": use, "name": tool, "input": args}, msg)
        content = f"Exit code {code}\n{result}" if code else result
        self._line("user", {"role": "user", "content": [
            {"tool_use_id": use, "type": "tool_result", "content": content,
             "is_error": bool(code) or error}]},
            toolUseResult={"stdout": result, "stderr": "", "interrupted": False,
                           "isImage": False} if tool == "Bash" else result)
        return self

    def bash(self, command: str, output: str, code: int = 0, thought: str = "") -> ClaudeSession:
        return self.call("Bash", {"command": command, "description": "Run"}, output, code=code,
                         thought=thought)

    def read(self, path: str, text: str) -> ClaudeSession:
        return self.call("Read", {"file_path": path}, cat_n(text))

    def edit(self, path: str, old: str, new: str) -> ClaudeSession:
        shown = cat_n(new, 10)
        return self.call("Edit", {"file_path": path, "old_string": old, "new_string": new},
                         f"The file {path} has been updated. Here's the result of running "
                         f"`cat -n` on a snippet of the edited file:\n{shown}")

    def grep(self, pattern: str, hits: list[str]) -> ClaudeSession:
        return self.call("Grep", {"pattern": pattern, "output_mode": "files_with_matches"},
                         f"Found {len(hits)} files\n" + "\n".join(hits))

    def todo(self, *items: str) -> ClaudeSession:
        todos = [{"content": i, "status": "pending", "activeForm": i} for i in items]
        return self.call("TodoWrite", {"todos": todos}, TODO_ACK)

    def rejected(self, tool: str, args: dict[str, Any]) -> ClaudeSession:
        """A call whose permission prompt the user refused with Esc (an interrupt)."""
        self.call(tool, args, REJECTED, error=True)
        self._line("user", {"role": "user", "content": [{"type": "text", "text": INTERRUPTED}]})
        return self

    def say(self, text: str) -> ClaudeSession:
        self._assistant({"type": "text", "text": text}, f"msg_{self.count:04d}")
        return self

    def write(self, path: Path) -> Path:
        path.write_text("".join(json.dumps(line) + "\n" for line in self.lines))
        return path


class CodexRollout:
    """A Codex rollout file, built item by item."""

    def __init__(self, cwd: str) -> None:
        self.cwd = cwd
        self.lines: list[dict[str, Any]] = [{
            "timestamp": "2026-11-30T11:00:00.000Z", "type": "session_meta",
            "payload": {"id": "019a6b2e-7c41-7d10-bb2a-5c9e0f3d2a11", "cwd": cwd,
                        "originator": "codex_cli_rs", "cli_version": "0.63.0",
                        "git": {"commit_hash": "a1b2c3d", "branch": "main"}}}]
        self.count = 0
        self._item({"type": "message", "role": "user", "content": [{
            "type": "input_text", "text": f"<environment_context>\n  <cwd>{cwd}</cwd>\n  "
                                          "<approval_policy>on-request</approval_policy>\n"
                                          "</environment_context>"}]})

    def _item(self, payload: dict[str, Any]) -> None:
        self.count += 1
        self.lines.append({"timestamp": f"2026-11-30T11:00:{self.count:02d}.000Z",
                           "type": "response_item", "payload": payload})

    def user(self, text: str) -> CodexRollout:
        self._item({"type": "message", "role": "user",
                    "content": [{"type": "input_text", "text": text}]})
        return self

    def shell(self, command: str, output: str, code: int = 0) -> CodexRollout:
        call = f"call_{self.count}"
        self._item({"type": "function_call", "name": "shell", "call_id": call,
                    "arguments": json.dumps({"command": ["bash", "-lc", command],
                                             "workdir": self.cwd, "timeout_ms": 120000})})
        self._item({"type": "function_call_output", "call_id": call, "output": json.dumps(
            {"output": output, "metadata": {"exit_code": code, "duration_seconds": 0.4}})})
        return self

    def patch(self, path: str, body: str) -> CodexRollout:
        call = f"call_{self.count}"
        self._item({"type": "custom_tool_call", "name": "apply_patch", "call_id": call,
                    "input": f"*** Begin Patch\n*** Update File: {path}\n{body}\n*** End Patch"})
        self._item({"type": "custom_tool_call_output", "call_id": call, "output": json.dumps(
            {"output": f"Success. Updated the following files:\nM {path}\n",
             "metadata": {"exit_code": 0, "duration_seconds": 0.0}})})
        return self

    def say(self, text: str) -> CodexRollout:
        self._item({"type": "message", "role": "assistant",
                    "content": [{"type": "output_text", "text": text}]})
        return self

    def write(self, path: Path) -> Path:
        path.write_text("".join(json.dumps(line) + "\n" for line in self.lines))
        return path
