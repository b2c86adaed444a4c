"""Answers in the shape Anthropic's Messages API documents, for the scripted loopback server (a
test double for provider tests): ``FakeAnthropicServer`` records each request and replays them."""

from __future__ import annotations

from typing import Any

from fake_openai_server import FakeOpenAIServer, Reply

MODEL = "claude-test-1"


class FakeAnthropicServer(FakeOpenAIServer):
    """The scripted loopback server, answering ``POST /v1/messages`` in Anthropic's format."""


def message(text: str, input_tokens: int = 25, output_tokens: int = 9, *,
            cache_read: int = 0, cache_creation: int = 0, stop_reason: str = "end_turn",
            blocks: list[dict[str, Any]] | None = None) -> Reply:
    """A 200 answer: ``content`` blocks (one text block by default), ``stop_reason``, usage."""
    return Reply(200, {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant",
        "model": MODEL,
        "content": blocks if blocks is not None else [{"type": "text", "text": text}],
        "stop_reason": stop_reason, "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens,
                  "cache_creation_input_tokens": cache_creation,
                  "cache_read_input_tokens": cache_read},
    })


def tool_answer(value: dict[str, Any], input_tokens: int = 40, output_tokens: int = 20) -> Reply:
    """A 200 answer whose only block is a call of the ``answer`` tool with ``value``."""
    block = {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": "answer",
             "input": value}
    return message("", input_tokens, output_tokens, stop_reason="tool_use", blocks=[block])


def error(status: int, kind: str, text: str, headers: dict[str, str] | None = None) -> Reply:
    """An error answer: ``{"type": "error", "error": {"type": ..., "message": ...}}``."""
    return Reply(status, {"type": "error", "error": {"type": kind, "message": text},
                          "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy"}, headers or {})
