"""No user error reaches the user as a traceback: one ``error: ...`` line and a documented code.

Most cases run ``cli.main`` in-process (an exception other than ``SystemExit`` escaping it is
exactly a traceback on a terminal); the entry point itself is run as a subprocess once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import typer

from deltamem import __version__
from deltamem.faces.cli import app as cli
from deltamem.formats.episodes import episode_to_dict
from helpers import make_episode


@pytest.fixture(autouse=True)
def _hashing(monkeypatch):
    monkeypatch.setenv("DELTAMEM_EMBEDDER", "hashing")
    monkeypatch.setenv("DELTAMEM_TAU_TASK", "0.6")
    monkeypatch.setenv("DELTAMEM_TAU_ENV", "0.6")
    monkeypatch.delenv("DELTAMEM_DEBUG", raising=False)


def run(capsys, *args):
    """Run the CLI in-process; return (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as info:
        cli.main([str(a) for a in args])
    captured = capsys.readouterr()
    code = info.value.code
    return (code if isinstance(code, int) else 0), captured.out, captured.err


def one_error_line(err: str, *fragments: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ") and "Traceback" not in err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def learned_db(capsys, tmp_path):
    episodes = tmp_path / "e.jsonl"
    episodes.write_text(json.dumps(episode_to_dict(make_episode())) + "\n")
    db = tmp_path / "m.db"
    code, _, err = run(capsys, "learn", episodes, "--db", db, "--json")
    assert code == 0, err
    return db


def test_version(capsys):
    code, out, _ = run(capsys, "--version")
    assert code == 0 and out.strip() == f"deltamem {__version__}"


@pytest.mark.parametrize(("args", "fragment"), [
    (["recal"], "No such command 'recal'"),
    (["show"], "Missing argument"),
    (["recall", "--top-k", "abc"], "'--top-k'"),
    (["recall", "--no-such-option"], "No such option: --no-such-option"),
    (["keys", "revoke"], "Missing argument"),
    (["learn", "--strict", "--json"], "Missing argument"),
])
def test_usage_errors_are_one_line_exit_2(capsys, args, fragment):
    """Mistyped commands, missing arguments, bad values and unknown options: exit 2."""
    code, out, err = run(capsys, *args)
    assert code == cli.EXIT_USAGE and out == ""
    line = one_error_line(err, fragment)
    assert "--help" in line


def _commands(group: typer.Typer, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    names = [prefix + (c.name or c.callback.__name__.replace("_", "-"),)
             for c in group.registered_commands]
    for sub in group.registered_groups:
        assert sub.typer_instance is not None and sub.name is not None
        names += _commands(sub.typer_instance, prefix + (sub.name,))
    return names


@pytest.mark.parametrize("command", _commands(cli.app), ids=" ".join)
def test_every_command_refuses_an_unknown_option_in_one_line(capsys, command):
    """Each command, subcommand included, reports a bad option as one line, never a traceback."""
    code, _, err = run(capsys, *command, "--no-such-option")
    assert code == cli.EXIT_USAGE
    one_error_line(err, "--no-such-option")


def test_no_arguments_prints_help(capsys):
    code, out, err = run(capsys)
    assert code == 0 and "learn" in out and "Traceback" not in out + err


def test_import_missing_and_malformed_files(capsys, tmp_path):
    """A missing file is exit 8; a file that is not an export names its line (exit 5)."""
    db = tmp_path / "m.db"
    code, _, err = run(capsys, "import", tmp_path / "nope.jsonl", "--db", db)
    assert code == cli.EXIT_FILE
    one_error_line(err, "nope.jsonl", "No such file or directory")
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    code, _, err = run(capsys, "import", bad, "--db", db)
    assert code == 5
    one_error_line(err, "bad.jsonl:1", "not JSON")
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\xff\xfe\x00garbage\n")
    code, _, err = run(capsys, "import", binary, "--db", db)
    assert code == cli.EXIT_FILE
    one_error_line(err, "not UTF-8")


def test_importing_the_same_export_twice_is_a_clear_collision(capsys, tmp_path):
    db = learned_db(capsys, tmp_path)
    export = tmp_path / "x.jsonl"
    assert run(capsys, "export", export, "--db", db)[0] == 0
    target = tmp_path / "t.db"
    assert run(capsys, "import", export, "--db", target)[0] == 0
    code, _, err = run(capsys, "import", export, "--db", target)
    assert code == 5
    line = one_error_line(err, "already in space 'default'")
    assert "UNIQUE constraint" not in line


@pytest.mark.parametrize("command", [["export", "{missing}/x.jsonl"],
                                     ["view", "--out", "{missing}/tree.html"],
                                     ["skills", "export", "{file}/sub"]])
def test_writing_into_a_missing_folder(capsys, tmp_path, command):
    """export / view --out / skills export into a folder that does not exist: exit 8."""
    db = learned_db(capsys, tmp_path)
    (tmp_path / "a-file").write_text("")
    args = [a.format(missing=tmp_path / "nodir", file=tmp_path / "a-file") for a in command]
    code, _, err = run(capsys, *args, "--db", db)
    assert code == cli.EXIT_FILE, err
    one_error_line(err, str(tmp_path))


def test_learn_from_a_folder(capsys, tmp_path):
    code, _, err = run(capsys, "learn", tmp_path, "--db", tmp_path / "m.db")
    assert code == 2
    one_error_line(err, str(tmp_path))


BLOCK = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ModuleNotFoundError(name)
sys.meta_path.insert(0, Block())
import importlib.util
real = importlib.util.find_spec
def find_spec(name, package=None):
    if name.split(".")[0] in {blocked!r}:
        return None
    return real(name, package)
importlib.util.find_spec = find_spec
from deltamem.faces.cli.app import main
sys.argv = ["deltamem", *{args!r}]
main()
"""


@pytest.mark.parametrize(("args", "blocked", "extra"), [
    (["serve", "--no-keys"], ["uvicorn"], "server"),
    (["mcp"], ["mcp"], "mcp"),
])
def test_a_missing_extra_is_named(tmp_path, args, blocked, extra):
    """serve / mcp without their packages: one line naming the pip extra, exit 3."""
    code = BLOCK.format(blocked=blocked, args=[*args, "--db", str(tmp_path / "m.db")])
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "DELTAMEM_EMBEDDER": "hashing"})
    assert proc.returncode == 3, proc.stderr
    one_error_line(proc.stderr, f"pip install 'deltamem[{extra}]'")


def test_entry_point_subprocess_has_no_traceback(tmp_path):
    """The real entry point: a usage error and a file error, each one line."""
    for args, code in ((["recall", "--top-k", "abc"], 2),
                       (["import", str(tmp_path / "nope.jsonl"), "--db", str(tmp_path / "m.db")],
                        cli.EXIT_FILE)):
        proc = subprocess.run([sys.executable, "-m", "deltamem", *args], capture_output=True,
                              text=True, timeout=120,
                              env={**os.environ, "DELTAMEM_EMBEDDER": "hashing"})
        assert proc.returncode == code
        assert "Traceback" not in proc.stdout + proc.stderr
        one_error_line(proc.stderr)


def test_an_internal_error_is_one_line_unless_debugging(capsys, monkeypatch, tmp_path):
    """A bug (an exception deltamem does not expect) is one line with exit 70; DEBUG re-raises."""
    def boom(*_: object, **__: object) -> None:
        raise RuntimeError("kaboom")

    monkeypatch.setattr(cli, "open_memory", boom)
    code, _, err = run(capsys, "stats", "--db", tmp_path / "m.db")
    assert code == cli.EXIT_INTERNAL
    one_error_line(err, "internal error RuntimeError: kaboom", "DELTAMEM_DEBUG=1")
    monkeypatch.setenv("DELTAMEM_DEBUG", "1")
    with pytest.raises(RuntimeError, match="kaboom"):
        cli.main(["stats", "--db", str(tmp_path / "m.db")])
