"""The CLI stays hand-written for its human output, but every command of an operation of the
table (``deltamem.formats.operations``) takes its help from the table: the command's help
starts with the operation's summary, and each option or argument named as an input of the
operation starts with that input's description."""

from __future__ import annotations

from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from deltamem.faces.cli.app import app
from deltamem.faces.cli.options import OPERATION_COMMANDS, OPTION_FIELDS
from deltamem.formats.operations import OPERATIONS, help_of, operation


def _command(path: str) -> Any:
    """The click command of ``path`` (``"skills export"``: a subcommand; ``"learn --strict"``:
    an option of the command, which stands for an operation)."""
    command: Any = typer.main.get_command(app)
    for part in path.split():
        if part.startswith("--"):
            [option] = [p for p in command.params if part in p.opts]
            return option
        command = command.commands[part]
    return command


def test_every_operation_of_the_table_has_a_command() -> None:
    assert set(OPERATION_COMMANDS) == {op.name for op in OPERATIONS}


@pytest.mark.parametrize("name", sorted(OPERATION_COMMANDS))
def test_a_commands_help_comes_from_its_operation(name: str) -> None:
    op = operation(name)
    command = _command(OPERATION_COMMANDS[name])
    assert (command.help or "").startswith(op.summary), (name, command.help)
    inputs = {*op.path_fields, *op.request.model_fields, *op.tool_model.model_fields}
    taken = [(param, OPTION_FIELDS.get(param.name or "", param.name or ""))
             for param in getattr(command, "params", ())]
    for param, field in taken:
        if field in inputs:
            given = getattr(param, "help", None) or ""
            assert given.startswith(help_of(name, field)), (name, param.name, given)


def test_the_inputs_a_command_shares_with_its_operation_are_the_ones_checked() -> None:
    """The check above compares what it should: the commands' inputs that are the operations'
    (a renamed option would silently escape it)."""
    shared = {(name, field) for name, path in OPERATION_COMMANDS.items()
              for param in getattr(_command(path), "params", ())
              for field in [OPTION_FIELDS.get(param.name or "", param.name or "")]
              if field in {*operation(name).path_fields, *operation(name).request.model_fields,
                           *operation(name).tool_model.model_fields}}
    assert {("recall", "task"), ("recall", "top_k"), ("list_nodes", "tree"),
            ("list_nodes", "limit"), ("show", "node_id"), ("consolidate", "dry_run"),
            ("record_outcome", "nodes"), ("record_outcome", "success"), ("correct", "steps"),
            ("correct", "wrong"), ("forget_fact", "fact"), ("delete", "node_id"),
            ("export_skills", "layout")} <= shared


def test_help_prints_the_tables_summary() -> None:
    result = CliRunner().invoke(app, ["show", "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert " ".join(help_of("show").split()[:4]) in " ".join(result.output.split())
