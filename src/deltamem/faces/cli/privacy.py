"""The privacy and correction commands of the ``deltamem`` CLI: ``scrub``, ``correct`` and
``forget-fact`` (thin adapters over the facade)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from deltamem.config import Settings
from deltamem.engine.memory import DeltaMem
from deltamem.faces.cli.options import (
    DEFAULT_DB,
    DbOpt,
    EmbedOpt,
    JsonOpt,
    SpaceOpt,
    command_help,
    emit,
    open_memory,
)
from deltamem.formats.operations import help_of


def scrub(
    db: DbOpt = DEFAULT_DB,
    space: Annotated[str | None, typer.Option(
        "--space", help="Only this space (default: every space of the database).")] = None,
    purge: Annotated[bool, typer.Option(
        "--purge", help="Then drop the old values from the store's files: on PostgreSQL "
        "VACUUM FULL of the tables (each locked while it is rewritten) and WAL checkpoints "
        "(CHECKPOINT needs superuser or pg_checkpoint); SQLite is always compacted.")] = False,
    embedder: EmbedOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Redact secrets in every stored node and episode, in place, then compact the file.

    What was stored before redaction existed (or with DELTAMEM_REDACT=false) is rewritten with
    each secret replaced by [REDACTED:<kind>] and <private> spans dropped; a SQLite file is then
    vacuumed and its WAL truncated, so no byte of the old text remains in either. On PostgreSQL
    the old row versions stay in the table files and the WAL until --purge. Ids, counters and
    the trees' shape are kept. Exports, backups, WAL archives and replicas made before stay as
    they were: delete them (docs/security.md).
    """
    mem = open_memory(db, space, embedder) if space else _any_space(db, embedder)
    with mem:
        counts: dict[str, Any] = dict(mem.scrub(every_space=space is None))
        if purge:
            counts["purged"] = mem.purge()
    emit(counts, as_json, lambda: typer.echo(
        f"scrubbed {counts['spaces']} space(s): {counts['nodes']} node(s) and "
        f"{counts['episodes']} episode(s) redacted"
        + "".join(f"\npurge: {step}" for step in counts.get("purged", []))))


def _any_space(db: str, embedder: str | None) -> DeltaMem:
    """The memory on a space of ``db`` built with ``embedder`` (scrub then visits every space;
    a space of another embedder keeps its vectors)."""
    from deltamem.embed import make_embedder
    from deltamem.errors import SpaceNotFound
    from deltamem.store import open_store

    store = open_store(db, create=False)
    try:
        infos = store.spaces()
    finally:
        store.close()
    if not infos:
        raise SpaceNotFound(f"no space in {db}; nothing to scrub")
    model = make_embedder(embedder or Settings.from_env().embedder)
    same = [i.space for i in infos if (i.embedder, i.dim) == (model.name, model.dim)]
    return open_memory(db, (same or [infos[0].space])[0], embedder, create=False)


def correct(
    node_id: Annotated[str, typer.Argument(help=help_of("correct", "node_id"))],
    success: Annotated[bool | None, typer.Option(
        "--success/--failure", help=help_of("correct", "success"))] = None,
    step: Annotated[list[str] | None, typer.Option(
        "--step", help=help_of("correct", "steps") + " Repeat --step, in order.")] = None,
    wrong: Annotated[bool, typer.Option("--wrong", help=help_of("correct", "wrong"))] = False,
    reason: Annotated[str, typer.Option(help=help_of("correct", "reason"))] = "",
    db: DbOpt = DEFAULT_DB,
    space: SpaceOpt = "default",
    embedder: EmbedOpt = None,
    as_json: JsonOpt = False,
) -> None:
    with open_memory(db, space, embedder) as mem:
        done = mem.correct(node_id, success=success, steps=step, wrong=wrong, reason=reason)
    data = done.wire()
    emit(data, as_json, lambda: typer.echo(
        f"corrected {data['of']} ({data['kind']}): {data['node']} now supersedes it"))


def forget_fact(
    node_id: Annotated[str, typer.Argument(
        help=help_of("forget_fact", "node_id") + " A scene-knowledge node (e-...).")],
    fact: Annotated[str, typer.Argument(help=help_of("forget_fact", "fact"))],
    reason: Annotated[str, typer.Option(help=help_of("forget_fact", "reason"))] = "",
    db: DbOpt = DEFAULT_DB,
    space: SpaceOpt = "default",
    embedder: EmbedOpt = None,
    as_json: JsonOpt = False,
) -> None:
    with open_memory(db, space, embedder) as mem:
        done = mem.forget_fact(node_id, fact, reason=reason)
    data = done.wire()
    emit(data, as_json, lambda: typer.echo(
        f"forgot a fact of {data['of']}: {data['node']} now supersedes it"))


def register(app: typer.Typer) -> None:
    """Add ``scrub``, ``correct`` and ``forget-fact`` to the CLI."""
    app.command()(scrub)
    app.command(help=command_help("correct", """Exactly one of --success/--failure, --step ...,
--wrong. The node stays as the correction's history (deltamem.engine.corrections); to delete a
node outright, use `deltamem delete`."""))(correct)
    app.command("forget-fact", help=command_help("forget_fact", """The node stays as its history
(deltamem.engine.corrections); `deltamem correct --wrong` retracts all of it instead."""))(
        forget_fact)
