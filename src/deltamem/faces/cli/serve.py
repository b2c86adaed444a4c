"""CLI commands for serving and curating a memory: serve, mcp, worker, view, keys, skills, delete,
forget, hook.

The main CLI adds them with ``register(app)``. Options mirror ``deltamem.faces.cli.app`` (``--db``,
``--space``, ``--embedder``, ``--json``); library errors propagate to the main CLI's handler,
which prints one line and exits with its code.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from deltamem._util.extras import require
from deltamem.config import Settings
from deltamem.errors import redacted
from deltamem.faces.cli.options import (
    DEFAULT_DB,
    DbOpt,
    DeferOpt,
    EmbedOpt,
    JsonOpt,
    ModelOptions,
    SpaceOpt,
    command_help,
    emit,
    model_options,
    open_memory,
)
from deltamem.formats.operations import help_of


@model_options
def serve(
    db: DbOpt = DEFAULT_DB,
    host: Annotated[str, typer.Option(help="Interface to bind (loopback by default).")] =
    "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8080,
    embedder: EmbedOpt = None,
    no_keys: Annotated[bool, typer.Option(
        "--no-keys", help="Serve without API keys (only behind your own auth).")] = False,
    max_body: Annotated[int, typer.Option(help="Largest request body in bytes.")] = 1_000_000,
    rate_limit: Annotated[int | None, typer.Option(
        envvar="DELTAMEM_RATE_LIMIT",
        help="Requests per minute per API key (keys may set their own), per server process; "
             "429 above it.")] = None,
    defer: DeferOpt = False,
    consolidate_every: Annotated[float | None, typer.Option(
        envvar="DELTAMEM_CONSOLIDATE_EVERY",
        help="Consolidate due chains in a background thread every N seconds (implies "
             "--defer-consolidation); safe with several replicas.")] = None,
    graceful_timeout: Annotated[int, typer.Option(
        help="On SIGTERM/SIGINT, seconds to let in-flight requests finish.")] = 30,
    workers: Annotated[int, typer.Option(
        envvar="DELTAMEM_WORKERS", min=1,
        help="Server processes sharing the port (one per core you give it); each loads its "
             "own embedder, and rate limits count per process.")] = 1,
    inline_reads: Annotated[bool, typer.Option(
        envvar="DELTAMEM_INLINE_READS",
        help="Run fast reads (recall, show, list, stats) of a SQLite file on the event loop, "
             "without the hop to a worker thread; a read slower than 50 ms sends the next ones "
             "of its space to a thread. PostgreSQL reads always run in a thread.")] = True,
    *,
    models: ModelOptions,
) -> None:
    """Serve the memory over REST (OpenAPI docs at /docs); every space of DB is reachable.

    On PostgreSQL any number of replicas may serve one database (see docs/deployment.md).
    """
    require("server", "deltamem serve")
    import uvicorn

    from deltamem.errors import ConfigError

    if no_keys:
        _warn_no_keys("serve", host, "every route of every space, delete and forget included")
    if workers > 1 and db in (":memory:", "sqlite::memory:"):
        raise ConfigError("--workers > 1 needs a database file or server: each process would "
                          "have its own ':memory:' database")
    config = {"db": db, "embedder": embedder, "models": dataclasses.asdict(models),
              "defer": defer, "require_keys": not no_keys, "max_body": max_body,
              "rate_limit": rate_limit, "consolidate_every": consolidate_every,
              "inline_reads": inline_reads}
    # uvicorn's own access log is off: ours is structured and leaves query strings out.
    options: dict[str, Any] = {"host": host, "port": port, "log_level": "info",
                               "access_log": False,
                               "timeout_graceful_shutdown": graceful_timeout}
    if workers == 1:
        uvicorn.run(_app(config), **options)
        return
    # Each worker process builds the same app from this description (spawned processes
    # inherit the environment); uvicorn shares the bound socket among them.
    from deltamem.faces.env import hand_to_workers

    hand_to_workers(json.dumps(config))
    uvicorn.run(f"{__name__}:app_from_env", factory=True, workers=workers, **options)


def app_from_env() -> Any:
    """The REST app ``serve`` described to its ``--workers`` processes
    (``faces.env.serve_description``)."""
    from deltamem.faces.env import serve_description

    return _app(json.loads(serve_description()))


def _app(config: dict[str, Any]) -> Any:
    from deltamem.faces.server.rest import create_app

    every = config["consolidate_every"]
    app = create_app(config["db"], embedder=config["embedder"],
                     extractor=ModelOptions(**config["models"]).build(),
                     settings=_settings(config["defer"] or every is not None),
                     require_keys=config["require_keys"], max_body_bytes=config["max_body"],
                     rate_limit=config["rate_limit"], consolidate_every=every,
                     inline_reads=config.get("inline_reads", True))
    _log_to_stderr("deltamem.server", "deltamem.worker")
    return app


def _warn_no_keys(command: str, host: str, what: str) -> None:
    """``--no-keys``: refuse a non-loopback address; on loopback, warn loudly on stderr."""
    from deltamem.errors import ConfigError
    from deltamem.faces.server.keys import is_loopback

    if not is_loopback(host):
        raise ConfigError(f"refusing `deltamem {command} --no-keys` on {host!r}: without API "
                          "keys only a loopback address (127.0.0.1, ::1) may be served; create "
                          "keys with `deltamem keys create`")
    typer.echo(f"WARNING: --no-keys: no API key is asked for; any process on this machine "
               f"can use {what}. Use it only behind your own authentication.", err=True)


def _settings(defer: bool) -> Settings:
    settings = Settings.from_env()
    return settings.with_(auto_consolidate=False) if defer else settings


def _log_to_stderr(*names: str) -> None:
    import logging

    for name in names:
        logger = logging.getLogger(name)
        if not logger.handlers:
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(logging.Formatter("%(message)s"))
            logger.addHandler(handler)
            logger.setLevel(logging.INFO)
            logger.propagate = False


@model_options
def mcp(
    db: DbOpt = DEFAULT_DB,
    space: SpaceOpt = "default",
    embedder: EmbedOpt = None,
    transport: Annotated[str, typer.Option(help="stdio or http.")] = "stdio",
    host: Annotated[str, typer.Option(help="Interface for --transport http.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port for --transport http.")] = 8765,
    defer: DeferOpt = False,
    no_keys: Annotated[bool, typer.Option(
        "--no-keys", help="--transport http without API keys (loopback only; warns).")] = False,
    export_dir: Annotated[Path | None, typer.Option(
        envvar="DELTAMEM_EXPORT_DIR",
        help="The only folder export_skills may write under (default: export_skills is "
             "refused).")] = None,
    *,
    models: ModelOptions,
) -> None:
    """Serve one space as an MCP server (recall, learn, record_outcome, show, list, consolidate,
    stats, export_skills).

    Over --transport http every request needs an API key (`deltamem keys create`) that covers
    the space, with the tool's scope, as for `deltamem serve`.
    """
    from deltamem.errors import ConfigError

    require("mcp", "deltamem mcp")
    from deltamem.faces.server.keys import KeyStore
    from deltamem.faces.server.mcp_serve import run_server

    if transport not in ("stdio", "http"):
        raise ConfigError(f"--transport must be stdio or http, got {transport!r}")
    http = transport == "http"
    if http and no_keys:
        _warn_no_keys("mcp", host, f"every tool of space {space!r}")
    elif http and db in (":memory:", "sqlite::memory:"):
        raise ConfigError("API keys need a database file or server; ':memory:' would lose them "
                          "(serve a file, or --no-keys on loopback)")
    with open_memory(db, space, embedder, create=True, extractor=models.build(),
                     auto_consolidate=False if defer else None) as mem:
        keys = KeyStore(mem.store) if http and not no_keys else None
        run_server(mem, transport="http" if http else "stdio", host=host, port=port, keys=keys,
                   export_root=export_dir)


@model_options
def worker(
    db: DbOpt = DEFAULT_DB,
    space: Annotated[list[str] | None, typer.Option(
        "--space", help="Only this space (repeat; default: every space, found at each pass).")
    ] = None,
    embedder: EmbedOpt = None,
    interval: Annotated[float, typer.Option(
        envvar="DELTAMEM_CONSOLIDATE_EVERY", help="Seconds between passes.")] = 30.0,
    once: Annotated[bool, typer.Option("--once", help="Make one pass, then exit.")] = False,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Report what would be consolidated; write nothing (one pass).")
    ] = False,
    k_cons: Annotated[int | None, typer.Option(help="Successes that trigger a merge.")] = None,
    as_json: JsonOpt = False,
    *,
    models: ModelOptions,
) -> None:
    """Consolidate due chains in the background, outside request paths.

    Safe to run several: per space one worker wins the lease and consolidates, the others skip
    it. Pair it with `serve --defer-consolidation`. Stops after the current space on
    SIGTERM/SIGINT. With --once or --dry-run, exits 1 when a space failed (the others still
    ran; the report says why).
    """
    import signal
    import threading

    from deltamem.embed import make_embedder
    from deltamem.engine.memory import DeltaMem
    from deltamem.faces.worker import SpacePass, Worker
    from deltamem.store import open_store

    settings = Settings.from_env().with_(k_cons=k_cons, auto_consolidate=False)
    model = make_embedder(embedder or settings.embedder)
    extractor = models.build()
    store = open_store(db, create=False)  # a worker consolidates what exists; it creates nothing
    memories: dict[str, DeltaMem] = {}

    def memory_for(name: str) -> DeltaMem:
        if name not in memories:
            memories[name] = DeltaMem(store, model, extractor, space=name, settings=settings,
                                      create=False)
        return memories[name]

    def report(passes: list[SpacePass]) -> None:
        emit({"spaces": [p.to_dict() for p in passes]}, as_json, lambda: _print_pass(passes))

    work = Worker(store, memory_for, spaces=space, dry_run=dry_run)
    try:
        if once or dry_run:
            passes = work.run_once()
            report(passes)
            if any(p.status == "error" for p in passes):
                raise typer.Exit(1)  # the pass ran and a space failed: say so to cron and CI
            return
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        _log_to_stderr("deltamem.worker")
        work.run(stop, interval, report)
    finally:
        store.close()


def _print_pass(passes: list[Any]) -> None:
    for done in passes:
        detail = {"consolidated": f"{len(done.consolidated)} chain(s) compiled",
                  "dry-run": f"would compile {len(done.due)} chain(s)",
                  "skipped": "another worker holds it", "idle": "nothing due",
                  "error": done.error or ""}[done.status]
        typer.echo(f"{done.space}: {done.status} ({detail})", err=done.status == "error")
        for entry in done.due if done.status == "dry-run" else []:
            typer.echo(f"  {entry['node']} {entry['tree']} {entry['key']!r} "
                       f"({entry['successes']} successes)")


def view(
    db: DbOpt = DEFAULT_DB,
    space: SpaceOpt = "default",
    out: Annotated[Path, typer.Option("--out", help="HTML file to write.")] = Path("tree.html"),
    embedder: EmbedOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Write both trees as one self-contained HTML page (open it in any browser)."""
    from deltamem.faces.server.viewer import render_viewer

    with open_memory(db, space, embedder) as mem:
        page = render_viewer(mem)
    out.write_text(page, encoding="utf-8")
    emit({"file": str(out), "bytes": len(page.encode())}, as_json,
          lambda: typer.echo(f"wrote {out}"))


def delete(
    node_id: Annotated[str, typer.Argument(
        help=help_of("delete", "node_id") + " Its whole subtree goes with it.")],
    db: DbOpt = DEFAULT_DB,
    space: SpaceOpt = "default",
    embedder: EmbedOpt = None,
    as_json: JsonOpt = False,
) -> None:
    with open_memory(db, space, embedder) as mem:
        deleted = mem.delete(node_id)
    emit(deleted.wire(), as_json, lambda: typer.echo(f"deleted {len(deleted.deleted)} node(s)"))


def forget(
    db: DbOpt = DEFAULT_DB,
    space: SpaceOpt = "default",
    yes: Annotated[bool, typer.Option("--yes", help="Confirm: delete the whole space.")] = False,
    embedder: EmbedOpt = None,
    as_json: JsonOpt = False,
) -> None:
    if not yes:
        typer.echo(f"refusing to forget space {space!r} without --yes", err=True)
        raise typer.Exit(1)
    with open_memory(db, space, embedder) as mem:
        forgot = mem.forget()
    emit(forgot.wire(), as_json,
         lambda: typer.echo(f"forgot {forgot.deleted_nodes} node(s) of space {space!r}"))


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
    from deltamem.faces.server.keys import open_keys

    keys = open_keys(db)
    try:
        record, secret = keys.create(space or ["default"], name=name, scopes=scope,
                                      rate_limit=rate_limit)
    finally:
        keys.close()
    emit({**record.to_dict(), "key": secret}, as_json, lambda: typer.echo(
        f"{secret}\n(key id {record.id}, spaces {', '.join(record.spaces)}, scopes "
        f"{', '.join(record.scopes)}; store it now: it is not shown again)"))


@keys_app.command("list")
def keys_list(db: DbOpt = DEFAULT_DB, as_json: JsonOpt = False) -> None:
    """List keys (ids, names, spaces, scopes, last use; never the secrets)."""
    from deltamem.faces.server.keys import open_keys

    keys = open_keys(db)
    try:
        rows = [k.to_dict() for k in keys.list()]
    finally:
        keys.close()
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
    from deltamem.faces.server.keys import open_keys

    keys = open_keys(db)
    try:
        done = keys.revoke(key_id)
    finally:
        keys.close()
    emit({"id": key_id, "revoked": done}, as_json,
          lambda: typer.echo(f"revoked {key_id}" if done else f"no active key {key_id}"))
    if not done:
        raise typer.Exit(4)


skills_app = typer.Typer(no_args_is_help=True, help="Skills as SKILL.md folders.")


@skills_app.command("export", help=command_help("export_skills"))
def skills_export(
    out_dir: Annotated[Path, typer.Argument(
        help="Folder to write into (created if missing).")],
    db: DbOpt = DEFAULT_DB,
    space: SpaceOpt = "default",
    layout: Annotated[str, typer.Option(help=help_of("export_skills", "layout") + (
        " skills: <dir>/<slug>/SKILL.md + knowledge/*.md; memory-md: a MEMORY.md index with "
        "one file per composed chain."))] = "skills",
    embedder: EmbedOpt = None,
    as_json: JsonOpt = False,
) -> None:
    from deltamem.faces.skills import export_layout

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
    from deltamem.faces.skills import import_layout

    with open_memory(db, space, embedder, create=True) as mem:
        done = import_layout(mem, src)
    emit(done, as_json, lambda: typer.echo(
        f"imported {len(done['imported'])} root(s), skipped {len(done['skipped'])} duplicate(s)"))


def hook(
    event: Annotated[str, typer.Argument(
        help="session-start, user-prompt, stop or session-end.")],
    db: DbOpt = DEFAULT_DB,
    space: SpaceOpt = "default",
    embedder: EmbedOpt = None,
    budget_tokens: Annotated[int | None, typer.Option(
        help="Cap the context a hook adds at this many tokens (default: DELTAMEM_SESSION_"
             "START_TOKENS 200, DELTAMEM_USER_PROMPT_TOKENS 250; 0: off).")] = None,
    scope: Annotated[str | None, typer.Option(
        help="project, user or global (default: DELTAMEM_SCOPE, else user).")] = None,
) -> None:
    """Run a Claude Code / Codex hook: read its JSON on stdin, print the JSON it reads back.

    ``stop`` queues the turn for the background learner and returns at once; the recall hooks
    ask the warm hook daemon, started on demand (``deltamem.integrations.hookd``;
    ``DELTAMEM_HOOK_DAEMON=0`` runs everything in this process). ``deltamem-hook`` is the same
    command without the start-up cost of this CLI.

    A failing hook prints one line and exits 1 (a warning in both clients): it never exits 2,
    which would block the agent.
    """
    import json

    from deltamem.integrations.hookd import cold
    from deltamem_hook import daemon_enabled
    from deltamem_hook import run as run_warm

    try:
        payload = json.loads(sys.stdin.read() or "{}")
        if not isinstance(payload, dict):
            raise ValueError("the hook input must be a JSON object")
        options: dict[str, Any] = {"db": db, "space": space, "embedder": embedder,
                                   "budget_tokens": budget_tokens, "scope": scope}
        try:
            if not daemon_enabled():
                raise LookupError("daemon off")
            out = run_warm(event, payload, **options)
        except LookupError:
            out = cold(event, payload, **options)
    except Exception as exc:  # a hook must not break the agent's session; say why, exit 1
        typer.echo(redacted(f"error: deltamem hook {event}: {type(exc).__name__}: {exc}"),
                   err=True)
        raise typer.Exit(1) from exc
    if out:
        typer.echo(json.dumps(out, ensure_ascii=False))


def register(app: typer.Typer) -> None:
    """Add serve, mcp, worker, view, delete, forget, hook and the keys/skills groups to the
    CLI."""
    for command in (serve, mcp, worker, view, hook):
        app.command()(command)
    app.command(help=command_help("delete"))(delete)
    app.command(help=command_help("forget", "Asks for --yes."))(forget)
    app.add_typer(keys_app, name="keys")
    app.add_typer(skills_app, name="skills")
