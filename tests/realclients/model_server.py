"""A scripted model server for the real-client tests (a test double of the model, not of the
clients): it plays a fixed script of turns to Claude Code over Anthropic's streamed Messages API
(``POST /v1/messages``) and to Codex over OpenAI's streamed Responses API
(``POST /v1/responses``). Standard library only; it listens on 127.0.0.1 only.

A script is a list of steps, each one model turn, written once for both clients:

* ``{"run": "python -m pytest -q"}`` -- a shell command (Claude Code ``Bash``; Codex
  ``exec_command`` with ``login: false``, or with ``"code_mode": true`` Codex's ``exec`` tool
  running JavaScript that calls ``tools.exec_command``);
* ``{"read": "calc.py"}`` -- read a file (Claude Code ``Read``, which ``Edit`` needs first; Codex
  ``exec_command`` ``cat``);
* ``{"edit": "calc.py", "old": "a - b", "new": "a + b"}`` -- an edit (Claude Code ``Edit``,
  Codex ``apply_patch``);
* ``{"reply": "text"}`` -- the final answer, which ends the turn.

Which step a request gets is the number of tool results in its conversation (both clients send
the whole conversation each time), so a retried request gets the same step again. A request
that offers no tools (a title or a summary the client asks for on the side) gets a one-line
text. Every request body is appended to ``log`` (one JSON line each) so a test can check what
reached the model: the hook notes arrive as ``system`` messages (Claude Code) or ``developer``
items (Codex).
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Step = Mapping[str, Any]


def _id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:24]}"


def _sse(event: str, data: Mapping[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


# -- Anthropic Messages ---------------------------------------------------------------------


def claude_tool(step: Step, cwd: str) -> tuple[str, dict[str, Any]] | None:
    """The Claude Code tool call of a step (None for a reply)."""
    if "run" in step:
        return "Bash", {"command": step["run"], "description": "run a command"}
    if "read" in step:
        return "Read", {"file_path": os.path.join(cwd, step["read"])}
    if "edit" in step:
        return "Edit", {"file_path": os.path.join(cwd, step["edit"]),
                        "old_string": step["old"], "new_string": step["new"]}
    return None


def anthropic_turn(index: int, step: Step, model: str, cwd: str) -> Iterator[bytes]:
    """The SSE events of one scripted assistant turn."""
    yield _sse("message_start", {"type": "message_start", "message": {
        "id": _id("msg"), "type": "message", "role": "assistant", "model": model,
        "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 50, "output_tokens": 1}}})
    tool = claude_tool(step, cwd)
    if tool is None:
        text = str(step.get("reply", "done"))
        yield _sse("content_block_start", {"type": "content_block_start", "index": 0,
                                           "content_block": {"type": "text", "text": ""}})
        yield _sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                           "delta": {"type": "text_delta", "text": text}})
        stop = "end_turn"
    else:
        name, args = tool
        yield _sse("content_block_start", {"type": "content_block_start", "index": 0,
                                           "content_block": {"type": "tool_use",
                                                             "id": _id("toolu"),
                                                             "name": name, "input": {}}})
        yield _sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {
            "type": "input_json_delta", "partial_json": json.dumps(args)}})
        stop = "tool_use"
    yield _sse("content_block_stop", {"type": "content_block_stop", "index": 0})
    yield _sse("message_delta", {"type": "message_delta",
                                 "delta": {"stop_reason": stop, "stop_sequence": None},
                                 "usage": {"output_tokens": 20}})
    yield _sse("message_stop", {"type": "message_stop"})


def anthropic_index(body: Mapping[str, Any]) -> int:
    """The step a Messages request asks for: the tool results so far."""
    count = 0
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, list):
            count += sum(1 for b in content
                         if isinstance(b, Mapping) and b.get("type") == "tool_result")
    return count


# -- OpenAI Responses -----------------------------------------------------------------------


def _patch(path: str, old: str, new: str) -> str:
    return (f"*** Begin Patch\n*** Update File: {path}\n@@\n"
            + "".join(f"-{line}\n" for line in old.splitlines())
            + "".join(f"+{line}\n" for line in new.splitlines()) + "*** End Patch\n")


def codex_item(step: Step, cwd: str, *, code_mode: bool = False) -> dict[str, Any]:
    """The Responses output item of a step."""
    command = step.get("run") or (f"cat {step['read']}" if "read" in step else None)
    if command is not None:
        args = {"cmd": command, "workdir": cwd, "login": False, "yield_time_ms": 10000}
        if code_mode:
            source = (f"const r = await tools.exec_command({json.dumps(args)});\n"
                      "text(typeof r === 'string' ? r : JSON.stringify(r));\n")
            return {"type": "custom_tool_call", "id": _id("ctc"), "call_id": _id("call"),
                    "name": "exec", "input": source, "status": "completed"}
        return {"type": "function_call", "id": _id("fc"), "call_id": _id("call"),
                "name": "exec_command", "arguments": json.dumps(args), "status": "completed"}
    if "edit" in step and code_mode:
        patch = _patch(str(step["edit"]), str(step["old"]), str(step["new"]))
        source = (f"const r = await tools.apply_patch({json.dumps(patch)});\n"
                  "text(typeof r === 'string' ? r : JSON.stringify(r));\n")
        return {"type": "custom_tool_call", "id": _id("ctc"), "call_id": _id("call"),
                "name": "exec", "input": source, "status": "completed"}
    if "edit" in step:
        return {"type": "custom_tool_call", "id": _id("ctc"), "call_id": _id("call"),
                "name": "apply_patch", "status": "completed",
                "input": _patch(str(step["edit"]), str(step["old"]), str(step["new"]))}
    return {"type": "message", "id": _id("msg"), "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": str(step.get("reply", "done")),
                         "annotations": []}]}


def responses_turn(step: Step, model: str, cwd: str, *, code_mode: bool = False
                   ) -> Iterator[bytes]:
    response_id = _id("resp")
    base = {"id": response_id, "object": "response", "model": model, "output": []}
    yield _sse("response.created", {"type": "response.created",
                                    "response": {**base, "status": "in_progress"}})
    item = codex_item(step, cwd, code_mode=code_mode)
    yield _sse("response.output_item.added", {"type": "response.output_item.added",
                                              "output_index": 0,
                                              "item": {**item, "status": "in_progress"}})
    if item["type"] == "message":
        yield _sse("response.output_text.delta", {
            "type": "response.output_text.delta", "item_id": item["id"], "output_index": 0,
            "content_index": 0, "delta": item["content"][0]["text"]})
    yield _sse("response.output_item.done", {"type": "response.output_item.done",
                                             "output_index": 0, "item": item})
    yield _sse("response.completed", {"type": "response.completed", "response": {
        **base, "status": "completed", "output": [item],
        "usage": {"input_tokens": 50, "output_tokens": 20, "total_tokens": 70,
                  "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens_details": {"reasoning_tokens": 0}}}})


def responses_index(body: Mapping[str, Any]) -> int:
    """The step a Responses request asks for: the tool outputs so far."""
    return sum(1 for item in body.get("input") or [] if isinstance(item, Mapping)
               and item.get("type") in ("function_call_output", "custom_tool_call_output"))


def offers_tools(body: Mapping[str, Any]) -> bool:
    """Whether a request is the agent's own turn (it offers tools): ``tools``, or in Codex's
    code mode an ``additional_tools`` input item."""
    return bool(body.get("tools")) or any(
        isinstance(item, Mapping) and item.get("type") == "additional_tools"
        for item in body.get("input") or [])


# -- the server -----------------------------------------------------------------------------


class ScriptedModel:
    """The script and the request log of one session (see the module docstring)."""

    def __init__(self, steps: Sequence[Step], cwd: str, log: str | None = None, *,
                 code_mode: bool = False):
        self.steps = list(steps)
        self.cwd = cwd
        self.log = log
        self.code_mode = code_mode
        self.lock = threading.Lock()

    def step(self, index: int) -> Step:
        return self.steps[min(index, len(self.steps) - 1)]

    def record(self, path: str, body: Mapping[str, Any]) -> None:
        if self.log:
            with self.lock, open(self.log, "a", encoding="utf-8") as out:
                out.write(json.dumps({"path": path, "body": body}) + "\n")


def make_handler(model: ScriptedModel) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
            return

        def _json(self, status: int, data: Mapping[str, Any]) -> None:
            raw = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def _stream(self, events: Iterator[bytes]) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            for chunk in events:
                self.wfile.write(chunk)
                self.wfile.flush()
            self.close_connection = True

        def do_GET(self) -> None:  # noqa: N802 - stdlib name
            self._json(200, {"data": [], "object": "list"})

        def do_POST(self) -> None:  # noqa: N802 - stdlib name
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except ValueError:
                self._json(400, {"error": {"message": "not JSON"}})
                return
            path = self.path.split("?")[0]
            model.record(path, body)
            name = str(body.get("model") or "scripted")
            if path.endswith("/messages/count_tokens"):
                self._json(200, {"input_tokens": 100})
            elif path.endswith("/messages"):
                index = anthropic_index(body) if offers_tools(body) else -1
                step = model.step(index) if index >= 0 else {"reply": "Scripted session"}
                events = anthropic_turn(index, step, name, model.cwd)
                if body.get("stream"):
                    self._stream(events)
                else:
                    self._json(200, _anthropic_plain(step, name, model.cwd))
            elif path.endswith("/responses"):
                index = responses_index(body) if offers_tools(body) else -1
                step = model.step(index) if index >= 0 else {"reply": "Scripted session"}
                self._stream(responses_turn(step, name, model.cwd, code_mode=model.code_mode))
            else:
                self._json(404, {"error": {"message": f"no route {path}"}})

    return Handler


def _anthropic_plain(step: Step, model: str, cwd: str) -> dict[str, Any]:
    tool = claude_tool(step, cwd)
    content: list[dict[str, Any]] = (
        [{"type": "text", "text": str(step.get("reply", "done"))}] if tool is None else
        [{"type": "tool_use", "id": _id("toolu"), "name": tool[0], "input": tool[1]}])
    return {"id": _id("msg"), "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": "end_turn" if tool is None else "tool_use",
            "usage": {"input_tokens": 50, "output_tokens": 20}}


def serve(model: ScriptedModel) -> ThreadingHTTPServer:
    """Start serving ``model`` on 127.0.0.1 (a free port: ``server.server_address[1]``) in a
    daemon thread; stop it with ``shutdown()``."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(model))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
