"""CLI commands for serving and curating a memory: serve, mcp, view, keys, skills, delete, forget.

The main CLI adds them with ``register(app)``. Options mirror ``deltamem.cli`` (``--db``,
``--space``, ``--embedder``, ``--json``); library errors propagate to the main CLI's handler,
which prints one line and exits with its code.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from deltamem.cli_options import (
    DEFAULT_DB,
    DbOpt,
    EmbedOpt,
    JsonOpt,
    SpaceOpt,
    emit,
    open_memory,
)
from deltamem.extras import require


def serve(
    db: DbOpt = DEFAULT_DB,
    host: Annotated[str, typer.Option(help="Interface to bind (loopback by default).")] =
    "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8080,
    embedder: EmbedOpt = None,
    extractor: Annotated[str, typer.Option(help="trace (no model) or llm.")] = "trace",
    no_keys: Annotated[bool, typer.Option(
        "--no-keys", help="Serve without API keys (only behind your own auth).")] = False,
    max_body: Annotated[int, typer.Option(help="Largest request body in bytes.")] = 1_000_000,
) -> None:
    """Serve the memory over REST (OpenAPI docs at /docs); every space of DB is reachable."""
    require("server", "deltamem serve")
    import uvicorn

    from deltamem.server.rest import create_app

    app = create_app(db, embedder=embedder, extractor=extractor, require_keys=not no_keys,
                     max_body_bytes=max_body)
    _log_requests_to_stderr()
    # uvicorn's own access log is off: ours is structured and leaves query strings out.
    uvicorn.run(app, host=host, port=port, log_level="info", access_log=False)


def _log_requests_to_stderr() -> None:
    import logging

    logger = logging.getLogger("deltamem.server")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False


def mcp(
    db: DbOpt = DEFAULT_DB,
    space: SpaceOpt = "default",
    embedder: EmbedOpt = None,
    transport: Annotated[str, typer.Option(help="stdio or http.")] = "stdio",
    host: Annotated[str, typer.Option(help="Interface for --transport http.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port for --transport http.")] = 8765,
) -> None:
    """Serve one space as an MCP server (recall, learn, record_outcome, show, list, consolidate,
    stats, export_skills)."""
    from deltamem.errors import ConfigError

    require("mcp", "deltamem mcp")
    from deltamem.server.mcp import run_server

    if transport not in ("stdio", "http"):
        raise ConfigError(f"--transport must be stdio or http, got {transport!r}")
    with open_memory(db, space, embedder) as mem:
        run_server(mem, transport="stdio" if transport == "stdio" else "http", host=host,
                   port=port)


def view(
    db: DbOpt = DEFAULT_DB,
    space: SpaceOpt = "default",
    out: Annotated[Path, typer.Option("--out", help="HTML file to write.")] = Path("tree.html"),
    embedder: EmbedOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Write both trees as one self-contained HTML page (open it in any browser)."""
    from deltamem.server.viewer import render_viewer

    with open_memory(db, space, embedder) as mem:
        page = render_viewer(mem)
    out.write_text(page, encoding="utf-8")
    emit({"file": str(out), "bytes": len(page.encode())}, as_json,
          lambda: typer.echo(f"wrote {out}"))


def delete(
    node_id: Annotated[str, typer.Argument(help="Node id; its whole subtree goes with it.")],
    db: DbOpt = DEFAULT_DB,
    space: SpaceOpt = "default",
    embedder: EmbedOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Delete a node and its subtree, in one transaction."""
    with open_memory(db, space, embedder) as mem:
        deleted = mem.delete(node_id)
    emit({"deleted": deleted}, as_json, lambda: typer.echo(f"deleted {len(deleted)} node(s)"))


def forget(
    db: DbOpt = DEFAULT_DB,
    space: SpaceOpt = "default",
    yes: Annotated[bool, typer.Option("--yes", help="Confirm: delete the whole space.")] = False,
    embedder: EmbedOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Delete every node and episode of the space (asks for --yes)."""
    if not yes:
        typer.echo(f"refusing to forget space {space!r} without --yes", err=True)
        raise typer.Exit(1)
    with open_memory(db, space, embedder) as mem:
        count = mem.forget()
    emit({"space": space, "deleted_nodes": count}, as_json,
          lambda: typer.echo(f"forgot {count} node(s) of space {space!r}"))


keys_app = typer.Typer(no_args_is_help=True, help="API keys of the REST server.")


@keys_app.command("create")
def keys_create(
    db: DbOpt = DEFAULT_DB,
    space: Annotated[list[str] | None, typer.Option(
        "--space", help="A space the key may use (repeat; '*' for all).")] = None,
    scope: Annotated[list[str] | None, typer.Option(
        "--scope", help="read, write or admin (repeat; default read and write).")] = None,
    rate_limit: Annotated[int | None, typer.Option(
        help="Requests per minute for this key (default: the server's --rate-limit).")] = None,
    name: Annotated[str, typer.Option(help="A label, e.g. the agent's name.")] = "",
    as_json: JsonOpt = False,
) -> None:
    """Create a key; it is printed once and never again."""
    from deltamem.server.keys import open_keys

    store = open_keys(db)
    try:
        record, secret = store.create(space or ["default"], name=name, scopes=scope,
                                      rate_limit=rate_limit)
    finally:
        store.close()
    emit({**record.to_dict(), "key": secret}, as_json, lambda: typer.echo(
        f"{secret}\n(key id {record.id}, spaces {', '.join(record.spaces)}, scopes "
        f"{', '.join(record.scopes)}; store it now: it is not shown again)"))


@keys_app.command("list")
def keys_list(db: DbOpt = DEFAULT_DB, as_json: JsonOpt = False) -> None:
    """List keys (ids, names, spaces, scopes, last use; never the secrets)."""
    from deltamem.server.keys import open_keys

    store = open_keys(db)
    try:
        rows = [k.to_dict() for k in store.list()]
    finally:
        store.close()
    emit({"keys": rows}, as_json, lambda: typer.echo("\n".join(
        f"{r['id']}  {'active ' if r['active'] else 'revoked'}  {','.join(r['spaces'])}  "
        f"{','.join(r['scopes'])}  last used {_when(r['last_used_at'])}  {r['name']}"
        for r in rows) or "no keys"))


def _when(at: float | None) -> str:
    import datetime

    if at is None:
        return "never"
    return datetime.datetime.fromtimestamp(at, datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")


@keys_app.command("revoke")
def keys_revoke(key_id: Annotated[str, typer.Argument(help="The key id (not the secret).")],
                db: DbOpt = DEFAULT_DB, as_json: JsonOpt = False) -> None:
    """Revoke a key by id; requests with it get 401 from then on, on every replica."""
    from deltamem.server.keys import open_keys

    store = open_keys(db)
    try:
        done = store.revoke(key_id)
    finally:
        store.close()
    emit({"id": key_id, "revoked": done}, as_json,
          lambda: typer.echo(f"revoked {key_id}" if done else f"no active key {key_id}"))
    if not done:
        raise typer.Exit(4)


skills_app = typer.Typer(no_args_is_help=True, help="Skills as SKILL.md folders.")


@skills_app.command("export")
def skills_export(
    out_dir: Annotated[Path, typer.Argument(help="Folder to write into.")],
    db: DbOpt = DEFAULT_DB,
    space: SpaceOpt = "default",
    layout: Annotated[str, typer.Option(help=(
        "skills: <dir>/<slug>/SKILL.md + knowledge/*.md; memory-md: a MEMORY.md index with "
        "one file per composed chain."))] = "skills",
    embedder: EmbedOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Export skills and scene knowledge as Markdown files (SKILL.md folders or MEMORY.md)."""
    from deltamem.skills import export_layout

    with open_memory(db, space, embedder) as mem:
        written = export_layout(mem, out_dir, layout)
    emit(written, as_json, lambda: typer.echo(
        f"wrote {len(written['skills'])} skill file(s) and {len(written['knowledge'])} "
        f"knowledge file(s) to {out_dir}"))


@skills_app.command("import")
def skills_import(
    src: Annotated[Path, typer.Argument(help=(
        "A folder of skill folders, one SKILL.md, or a MEMORY.md export folder."))],
    db: DbOpt = DEFAULT_DB,
    space: SpaceOpt = "default",
    embedder: EmbedOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Import skill files as roots, in one transaction (identical roots skipped)."""
    from deltamem.skills import import_layout

    with open_memory(db, space, embedder) as mem:
        done = import_layout(mem, src)
    emit(done, as_json, lambda: typer.echo(
        f"imported {len(done['imported'])} root(s), skipped {len(done['skipped'])} duplicate(s)"))


def register(app: typer.Typer) -> None:
    """Add serve, mcp, view, delete, forget and the keys/skills groups to the main CLI."""
    for command in (serve, mcp, view, delete, forget):
        app.command()(command)
    app.add_typer(keys_app, name="keys")
    app.add_typer(skills_app, name="skills")
