"""What the CLI prints around its results: progress on a terminal's stderr only, recall text
unwrapped when piped, and `show` in words (raw patches behind --raw). Real subprocesses; the
terminal is a real pseudo-terminal."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
from pathlib import Path

import pytest

from deltamem.formats.episodes import episode_to_dict
from helpers import make_episode

ENV = {**os.environ, "DELTAMEM_EMBEDDER": "hashing", "DELTAMEM_TAU_TASK": "0.6",
       "DELTAMEM_TAU_ENV": "0.6", "COLUMNS": "80", "OPENBLAS_NUM_THREADS": "1"}
CLI = [sys.executable, "-m", "deltamem"]
LONG_STEP = ("open the microwave door carefully with the left hand while holding the apple in "
             "the right hand and then put the apple on the turntable")
LONGER = ("go to kitchen", "open microwave", "take apple", "heat apple")


def run(*args: object) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, env=ENV,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc


def run_on_terminal(*args: object) -> tuple[str, str]:
    """Run with stderr on a pseudo-terminal (stdout piped); (stdout, what the terminal got)."""
    controller, terminal = pty.openpty()
    proc = subprocess.Popen([*CLI, *map(str, args)], stdout=subprocess.PIPE, stderr=terminal,
                            env={**ENV, "TERM": "xterm"})
    os.close(terminal)
    seen = b""
    while True:
        ready, _, _ = select.select([controller], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
    stdout = proc.stdout.read().decode() if proc.stdout else ""
    assert proc.wait(60) == 0, seen.decode(errors="replace")
    os.close(controller)
    return stdout, seen.decode(errors="replace")


@pytest.fixture
def learned(tmp_path: Path) -> tuple[Path, Path]:
    db = tmp_path / "m.db"
    episodes = tmp_path / "e.jsonl"
    episodes.write_text("".join(json.dumps(episode_to_dict(e)) + "\n" for e in [
        make_episode(actions=("go to kitchen", LONG_STEP, "heat apple")),
        make_episode(actions=("go to kitchen", LONG_STEP, "heat apple", "eat apple"))]))
    run("learn", episodes, "--db", db)
    return db, episodes


def test_recall_text_is_not_wrapped_when_piped(learned: tuple[Path, Path]) -> None:
    db, _ = learned
    text = run("recall", "--task", "heat the apple", "--db", db).stdout
    assert len(LONG_STEP) > 80
    assert any(LONG_STEP in line for line in text.splitlines())


def test_show_prints_the_composed_experience_and_the_change_in_words(
        learned: tuple[Path, Path]) -> None:
    db, _ = learned
    delta = next(n for n in json.loads(run("list", "--db", db, "--json").stdout)["nodes"]
                 if n["kind"] == "delta" and n["tree"] == "task")["id"]
    text = run("show", delta, "--db", db).stdout
    assert text.startswith(f"{delta}  task delta (success), depth 2")
    assert "key: heat the apple" in text and f"> {delta}" in text
    assert "4. eat apple" in text  # the composed skill, numbered as a prompt shows it
    assert "Change from its parent:" in text and '["' not in text
    assert LONG_STEP in text  # not wrapped
    raw = json.loads(run("show", delta, "--db", db, "--raw").stdout)
    assert raw["kind"] == "delta" and isinstance(raw["patch"], list) and raw["patch"]


@pytest.mark.parametrize("command", ["import", "export"])
def test_progress_shows_on_a_terminal_only(learned: tuple[Path, Path], tmp_path: Path,
                                           command: str) -> None:
    db, _ = learned
    dump = tmp_path / "dump.jsonl"
    run("export", dump, "--db", db)
    if command == "import":
        args: list[object] = ["import", dump, "--db", tmp_path / "copy.db"]
        label = "importing"
    else:
        args = ["export", tmp_path / "again.jsonl", "--db", db]
        label = "exporting"
    stdout, terminal = run_on_terminal(*args)
    assert label in terminal and command + "ed" in stdout
    (tmp_path / "copy.db").unlink(missing_ok=True)
    piped = run(*args)
    assert piped.stderr == "" and command + "ed" in piped.stdout
    (tmp_path / "copy.db").unlink(missing_ok=True)
    _, quiet = run_on_terminal(*args, "--json")
    assert label not in quiet


def test_consolidate_and_calibrate_show_progress_on_a_terminal(
        learned: tuple[Path, Path]) -> None:
    db, episodes = learned
    _, terminal = run_on_terminal("consolidate", "--db", db)
    assert "consolidating" in terminal
    _, terminal = run_on_terminal("calibrate", episodes, "--embedder", "hashing")
    assert "calibrating on 2 episodes" in terminal
