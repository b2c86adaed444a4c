"""One definition of the extractor/LLM options, taken by learn, serve, mcp and worker alike,
from flags or from the environment, and documented in each command's --help."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from deltamem.faces.cli import app as cli
from deltamem.faces.cli.options import MODEL_OPTIONS
from deltamem.formats.episodes import episode_to_dict
from helpers import make_episode

COMMANDS = ("learn", "serve", "mcp", "worker")
ENV = {"extractor": "DELTAMEM_EXTRACTOR", "llm": "DELTAMEM_LLM",
       "base_url": "DELTAMEM_LLM_BASE_URL", "model": "DELTAMEM_LLM_MODEL"}


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DELTAMEM_EMBEDDER", "hashing")
    for name in (*ENV.values(), "DELTAMEM_LLM_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def model_params(command: str) -> dict[str, tuple[tuple[str, ...], str | None]]:
    """The model options of one command as click sees them: name -> (flags, env var)."""
    group = typer.main.get_command(cli.app)
    params = group.commands[command].params  # type: ignore[attr-defined]
    return {p.name: (tuple(p.opts), p.envvar) for p in params if p.name in ENV}


def test_every_serving_command_takes_the_same_model_options() -> None:
    """learn, serve, mcp and worker expose exactly the shared flags and env variables."""
    expected = model_params("learn")
    assert set(expected) == {name for name, _ in MODEL_OPTIONS} == set(ENV)
    assert {name: env for name, (_, env) in expected.items()} == ENV
    for command in COMMANDS:
        assert model_params(command) == expected, command


@pytest.mark.parametrize("command", COMMANDS)
def test_help_documents_the_model_options(command: str) -> None:
    """--help names every model flag with its environment variable."""
    result = CliRunner().invoke(cli.app, [command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for flag in ("--extractor", "--llm", "--base-url", "--model"):
        assert flag in result.stdout, (command, flag)
    for env in ENV.values():
        assert env in result.stdout, (command, env)
    assert "DELTAMEM_LLM_API_KEY" in result.stdout


def invocation(command: str, tmp_path: object) -> list[str]:
    db = f"{tmp_path}/m.db"
    if command == "learn":
        path = f"{tmp_path}/e.jsonl"
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(episode_to_dict(make_episode())) + "\n")
        return ["learn", path, "--db", db]
    return [command, "--db", db] + (["--dry-run"] if command == "worker" else [])


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("source", ["flags", "env"])
def test_an_openai_extractor_is_configured_from_flags_or_env(
        command: str, source: str, tmp_path: object, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """`--extractor llm --llm openai` (or the same in DELTAMEM_*) reaches the provider factory
    in every command: without an endpoint it is one clear configuration error, exit 3."""
    args = invocation(command, tmp_path)
    if source == "flags":
        args += ["--extractor", "llm", "--llm", "openai"]
    else:
        monkeypatch.setenv("DELTAMEM_EXTRACTOR", "llm")
        monkeypatch.setenv("DELTAMEM_LLM", "openai")
    with pytest.raises(SystemExit) as info:
        cli.main(args)
    err = capsys.readouterr().err
    assert info.value.code == 3, err
    assert "openai provider needs base_url and model" in err
