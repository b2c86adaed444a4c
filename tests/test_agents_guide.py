"""docs/agents.md runs as written: a coding agent's and a web agent's transcripts become
episodes that the memory learns and recalls (real MiniLM, real SQLite)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from deltamem import Episode
from deltamem.errors import EpisodeError

GUIDE = Path(__file__).resolve().parent.parent / "docs" / "agents.md"


def blocks() -> list[str]:
    found = re.findall(r"```python\n(.*?)```", GUIDE.read_text(), re.S)
    assert len(found) == 2
    return found


def test_coding_agent_example(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    exec(compile(blocks()[0], "docs/agents.md", "exec"), {})
    actions, writes = capsys.readouterr().out.strip().splitlines()
    assert actions.startswith("['run: pytest tests/test_cart.py -x -q', "
                              "'read_file: src/shop/cart.py', 'edit_file(path=")
    assert "'run: pytest -q', 'reply: Fixed: the discount" in actions
    assert writes == "root root"


def test_web_agent_example(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    exec(compile(blocks()[1], "docs/agents.md", "exec"), {})
    assert capsys.readouterr().out.strip() == "True"


def test_from_messages_pairs_results_with_their_calls():
    """Tool results find their call by id even when they arrive out of order."""
    messages = [
        {"role": "user", "content": "find the config"},
        {"role": "assistant", "content": "Look in two places.", "tool_calls": [
            {"id": "a", "type": "function",
             "function": {"name": "ls", "arguments": '{"d": "/etc"}'}},
            {"id": "b", "type": "function",
             "function": {"name": "ls", "arguments": '{"d": "~"}'}}]},
        {"role": "tool", "tool_call_id": "b", "content": ".config"},
        {"role": "tool", "tool_call_id": "a", "content": "app.conf"},
    ]
    episode = Episode.from_messages(messages, success=False, env="a Linux box", score=0.5)
    assert episode.task == "find the config" and not episode.success and episode.score == 0.5
    assert [(s.action, s.observation) for s in episode.steps] == [
        ("ls: /etc", "app.conf"), ("ls: ~", ".config")]
    assert episode.steps[0].thought == "Look in two places."
    with pytest.raises(EpisodeError, match="no task"):
        Episode.from_messages([{"role": "assistant", "content": "hi"}], success=True)
