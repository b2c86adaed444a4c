"""Fixtures for provider tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fake_anthropic_server import FakeAnthropicServer
from fake_openai_server import FakeOpenAIServer


@pytest.fixture
def fake_server() -> Iterator[FakeOpenAIServer]:
    """A running fake OpenAI-compatible server."""
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture
def anthropic_server() -> Iterator[FakeAnthropicServer]:
    """A running fake Anthropic Messages API server."""
    with FakeAnthropicServer() as server:
        yield server
