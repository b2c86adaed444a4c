"""Every program in examples/ runs as its docstring says and prints what it promises (real
subprocesses; the team server on the real PostgreSQL of the postgres tests)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pg_fixture import pg_server, pg_url  # noqa: F401 - fixtures

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
ENV = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}


def run(name: str, *args: str) -> str:
    proc = subprocess.run([sys.executable, str(EXAMPLES / name), *args], capture_output=True,
                          text=True, env=ENV, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_every_example_is_tested_here() -> None:
    source = Path(__file__).read_text()
    for example in EXAMPLES.glob("*.py"):
        assert f'"{example.name}"' in source, example.name


def test_coding_agent() -> None:
    out = run("coding_agent.py")
    assert out.count("learned root") == 2
    assert "# Skill memory" in out and "pytest tests/test_cart.py" in out


def test_text_game_agent_wins_once_it_remembers() -> None:
    lines = run("text_game.py").splitlines()
    assert "memory: none" in lines[0]
    later = [line for line in lines if "memory: skill" in line]
    assert later and all("won" in line for line in later)


def test_langgraph_agent() -> None:
    out = run("langgraph_agent.py")
    assert "run 1: recalled 0 steps" in out and "run 2: recalled 4 steps" in out
    assert "('users', 'alice')" in out


@pytest.mark.postgres
@pytest.mark.server
def test_team_server_on_postgresql(pg_url: str) -> None:  # noqa: F811 - the fixture
    out = run("team_server.py", "--db", pg_url)
    assert "alice learned root" in out and "bob recalled t-" in out
    assert "readiness probe" in out
