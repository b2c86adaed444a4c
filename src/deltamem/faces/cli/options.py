"""Options and output shared by every ``deltamem`` command module (and plugins such as bench).

The extractor/LLM options are defined once, here (:data:`MODEL_OPTIONS`), and added to every
command that extracts or compiles (``learn``, ``serve``, ``mcp``, ``worker``) by the
:func:`model_options` decorator, so each of them takes the same flags and environment variables.
"""

from __future__ import annotations

import functools
import inspect
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Annotated, Any, TypeVar

import typer

from deltamem.config import Settings
from deltamem.engine.memory import DeltaMem, check_space
from deltamem.extract.base import Extractor
from deltamem.formats.operations import help_of

F = TypeVar("F", bound=Callable[..., Any])

# The command of each operation of the table (deltamem.formats.operations): its help is the
# operation's summary, then what the command adds (:func:`command_help`), and each option or
# argument named as an input of the operation takes that input's help (``help_of``; a test holds
# every command here to it). ``learn_many`` is an option, ``learn --strict``: its help is the
# operation's summary.
OPERATION_COMMANDS: dict[str, str] = {
    "recall": "recall", "learn": "learn", "learn_many": "learn --strict",
    "record_outcome": "outcome",
    "correct": "correct", "forget_fact": "forget-fact", "consolidate": "consolidate",
    "list_nodes": "list", "show": "show", "stats": "stats", "delete": "delete",
    "forget": "forget", "export": "export", "import_": "import",
    "export_skills": "skills export",
}
# A command's own name for an input of its operation (the CLI's spelling of a repeated option).
OPTION_FIELDS: dict[str, str] = {"step": "steps", "node_ids": "nodes"}


def command_help(operation: str, more: str = "") -> str:
    """The help of the command of ``operation``: the table's summary, then ``more`` (what the
    command adds: its files, its confirmations, its human output)."""
    return help_of(operation) + (f"\n\n{more}" if more else "")

DEFAULT_DB = "deltamem.db"

DbOpt = Annotated[str, typer.Option("--db", envvar="DELTAMEM_DB",
                                    help="SQLite path, sqlite:PATH or postgresql://... URL.")]
SpaceOpt = Annotated[str, typer.Option("--space", envvar="DELTAMEM_SPACE",
                                       help="Namespace inside the database.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]
FilterOpt = Annotated[list[str] | None, typer.Option(
    "--filter", metavar="KEY=VALUE",
    help="Only nodes whose episode meta has KEY equal to the string VALUE (repeatable: every "
         "filter must match), e.g. --filter user=alice --filter project=shop.")]
EmbedOpt = Annotated[str | None, typer.Option("--embedder", envvar="DELTAMEM_EMBEDDER",
                                              help="minilm (default), static, st:<model>.")]
DeferOpt = Annotated[bool, typer.Option(
    "--defer-consolidation",
    help="Learn answers without compiling due chains; leave them to `deltamem worker` (or "
         "DELTAMEM_AUTO_CONSOLIDATE=false).")]


@dataclass(frozen=True, slots=True)
class ModelOptions:
    """What a command extracts and compiles with: the values of the shared model flags."""

    extractor: str = "trace"
    llm: str | None = None
    base_url: str | None = None
    model: str | None = None

    def build(self) -> Extractor:
        """The extractor these options name (``llm`` builds its model now; errors say why)."""
        from deltamem.extract import make_extractor

        return make_extractor(self.extractor, llm=self.llm, base_url=self.base_url,
                              model=self.model)


PANEL = "Extraction model (shared by learn, serve, mcp, worker)"
# One definition of the model flags: (parameter, annotation). Defaults are ModelOptions'.
MODEL_OPTIONS: tuple[tuple[str, Any], ...] = (
    ("extractor", Annotated[str, typer.Option(
        "--extractor", envvar="DELTAMEM_EXTRACTOR", rich_help_panel=PANEL,
        help="trace (no model) or llm (extract and compile with a model).")]),
    ("llm", Annotated[str | None, typer.Option(
        "--llm", envvar="DELTAMEM_LLM", rich_help_panel=PANEL,
        help="Model provider for --extractor llm: local (in-process SmolLM2, the default), "
             "local:<gguf path>, openai (any OpenAI-compatible endpoint) or anthropic "
             "(Anthropic's Messages API; --base-url defaults to https://api.anthropic.com). "
             "The API key is read from DELTAMEM_LLM_API_KEY, never from a flag.")]),
    ("base_url", Annotated[str | None, typer.Option(
        "--base-url", envvar="DELTAMEM_LLM_BASE_URL", rich_help_panel=PANEL,
        help="Endpoint of --llm openai or anthropic, e.g. http://127.0.0.1:8000/v1 (alone, "
             "implies --llm openai).")]),
    ("model", Annotated[str | None, typer.Option(
        "--model", envvar="DELTAMEM_LLM_MODEL", rich_help_panel=PANEL,
        help="Model name for --llm openai or anthropic (e.g. claude-sonnet-4-5), or the GGUF "
             "file of --llm local.")]),
)


def model_options(command: F) -> F:
    """Give a command the shared model flags; it receives them as ``models: ModelOptions``."""
    signature = inspect.signature(command, eval_str=True)
    own = [p for p in signature.parameters.values() if p.name != "models"]
    defaults = {f.name: f.default for f in fields(ModelOptions)}
    added = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=defaults[name],
                               annotation=annotation) for name, annotation in MODEL_OPTIONS]

    @functools.wraps(command)
    def wrapper(**kwargs: Any) -> Any:
        models = ModelOptions(**{name: kwargs.pop(name) for name, _ in MODEL_OPTIONS})
        return command(**kwargs, models=models)

    keyword = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own]
    wrapper.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[*keyword, *added])
    return wrapper  # type: ignore[return-value]


def emit(data: Any, as_json: bool, human: Callable[[], None]) -> None:
    """Print ``data`` as one JSON line with ``--json``, else call the human-readable printer."""
    if as_json:
        sys.stdout.write(json.dumps(data, ensure_ascii=False) + "\n")
    else:
        human()


CreateOpt = Annotated[bool, typer.Option(
    "--create/--no-create", help="Create the database and space if missing (--no-create: they "
                                 "must exist, so a mistyped --space is an error).")]


def open_memory(db: str, space: str, embedder: str | None, *, create: bool = False,
                extractor: str | Extractor = "trace", llm: Any = None,
                **settings: Any) -> DeltaMem:
    """Open the memory a command works on; ``settings`` override ``DELTAMEM_*`` (None: keep).

    Readers leave ``create`` False: a missing database or space is then ``SpaceNotFound``, and
    nothing (not even a directory) is created. Writers pass True.
    """
    return DeltaMem.open(db, space=check_space(space), embedder=embedder, extractor=extractor,
                         llm=llm, settings=Settings.from_env().with_(**settings), create=create)
