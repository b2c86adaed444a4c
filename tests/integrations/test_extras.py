"""An adapter whose framework is not installed fails on import with one line naming the extra."""

from __future__ import annotations

import importlib
import sys

import pytest

from deltamem._util import extras
from deltamem.errors import ConfigError


@pytest.mark.parametrize(("module", "extra", "framework"), [
    ("deltamem.integrations.langchain", "langchain", "langgraph"),
    ("deltamem.integrations.langgraph", "langgraph", "langgraph"),
    ("deltamem.integrations.openai_agents", "openai-agents", "agents"),
])
def test_missing_framework_names_the_extra(monkeypatch, module, extra, framework):
    monkeypatch.setattr(extras, "_absent", lambda name: name == framework)
    monkeypatch.delitem(sys.modules, module, raising=False)
    with pytest.raises(ConfigError) as info:
        importlib.import_module(module)
    message = str(info.value)
    assert "\n" not in message and f"pip install 'deltamem[{extra}]'" in message
