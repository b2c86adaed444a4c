"""Options and output shared by every ``deltamem`` command module (cli, cli_serve, cli_bench)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Annotated, Any

import typer

from deltamem.config import Settings
from deltamem.memory import DeltaMem

DEFAULT_DB = "deltamem.db"

DbOpt = Annotated[str, typer.Option("--db", envvar="DELTAMEM_DB",
                                    help="SQLite path, sqlite:PATH or postgresql://... URL.")]
SpaceOpt = Annotated[str, typer.Option("--space", envvar="DELTAMEM_SPACE",
                                       help="Namespace inside the database.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]
EmbedOpt = Annotated[str | None, typer.Option("--embedder", envvar="DELTAMEM_EMBEDDER",
                                              help="minilm (default), static, st:<model>.")]


def emit(data: Any, as_json: bool, human: Callable[[], None]) -> None:
    """Print ``data`` as one JSON line with ``--json``, else call the human-readable printer."""
    if as_json:
        sys.stdout.write(json.dumps(data, ensure_ascii=False) + "\n")
    else:
        human()


def open_memory(db: str, space: str, embedder: str | None, *, extractor: str = "trace",
                llm: Any = None, **settings: Any) -> DeltaMem:
    """Open the memory a command works on; ``settings`` override ``DELTAMEM_*`` (None: keep)."""
    return DeltaMem.open(db, space=space, embedder=embedder, extractor=extractor, llm=llm,
                         settings=Settings.from_env().with_(**settings))
