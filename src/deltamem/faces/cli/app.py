"""The ``deltamem`` command line: one thin command per facade method.

Every command takes ``--db`` (default ``$DELTAMEM_DB`` or ``./deltamem.db``), ``--space`` and
``--json``. Every error prints one line, ``error: ...``, to stderr and exits with a documented
code (never a traceback):

====  ==================================================================================
code  meaning
====  ==================================================================================
0     success
1     the command ran and reports a problem (``check`` found one, ``forget`` without --yes)
2     bad input: unknown command or option, a missing or invalid argument, a bad episode
3     configuration: unknown embedder or provider, a missing optional extra
4     not found: no such node, space or key
5     the store refused (schema, embedder mismatch, a collision, inconsistent data)
6     an LLM provider failed
7     the model's answer never validated (memory unchanged)
8     a file could not be read or written (missing, a folder that does not exist, not UTF-8)
70    internal error: a bug in deltamem (``DELTAMEM_DEBUG=1`` shows the traceback)
130   interrupted
====  ==================================================================================
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import Progress
from rich.table import Column, Table
from rich.text import Text

from deltamem.config import Settings
from deltamem.core.model import Episode, NodeKind, Outcome, Tree
from deltamem.core.ranking import filters_from_pairs
from deltamem.engine.results import BatchResult, LearnResult
from deltamem.errors import (
    ConfigError,
    DeltaMemError,
    EpisodeError,
    ExtractionError,
    NodeNotFound,
    PatchError,
    ProviderError,
    SpaceNotFound,
    StoreError,
    redacted,
)
from deltamem.faces.cli.options import (
    DEFAULT_DB,
    CreateOpt,
    DbOpt,
    EmbedOpt,
    FilterOpt,
    JsonOpt,
    ModelOptions,
    SpaceOpt,
    command_help,
    emit,
    model_options,
    open_memory,
)
from deltamem.faces.env import debug
from deltamem.formats import api
from deltamem.formats.episodes import read_episodes
from deltamem.formats.operations import help_of

app = typer.Typer(no_args_is_help=True, add_completion=False,
                  help="DeltaMem: incremental experience memory for LLM agents.")
err = Console(stderr=True)
out = Console()


def _print_version(value: bool) -> None:
    if value:
        from deltamem import __version__

        typer.echo(f"deltamem {__version__}")
        raise typer.Exit(0)


@app.callback()
def _options(
    version: Annotated[bool, typer.Option(
        "--version", callback=_print_version, is_eager=True,
        help="Print the version and exit.")] = False,
) -> None:
    """DeltaMem: incremental experience memory for LLM agents."""

# Library exceptions -> exit codes, in one place.
EXIT_CODES: dict[type[DeltaMemError], int] = {
    EpisodeError: 2, ConfigError: 3, NodeNotFound: 4, SpaceNotFound: 4, StoreError: 5,
    PatchError: 5, ProviderError: 6, ExtractionError: 7,
}
EXIT_USAGE = 2  # unknown command or option, missing or invalid argument
EXIT_FILE = 8  # a file could not be read or written
EXIT_INTERNAL = 70  # a bug: please report it
EXIT_INTERRUPTED = 130

TauTask = Annotated[float | None, typer.Option("--tau-task", help="Task-tree threshold.")]
TauEnv = Annotated[float | None, typer.Option("--tau-env", help="Environment-tree threshold.")]
Penalty = Annotated[float | None, typer.Option("--penalty", help="Failure penalty lambda.")]
SceneOpt = Annotated[str | None, typer.Option(
    "--scene", help="Scene plug-in: text-games (default; or DELTAMEM_SCENE), coding, plain.")]


@app.command(help=command_help("learn", """From FILE (JSON Lines, format: README), one
transaction per episode (--strict: one for the file).

A bad line (invalid JSON, missing or mistyped field, text no store can hold) is reported on
stderr with its line and field, and nothing is written for it. Without --strict the other
lines are still learned and the exit code is 2; with --strict the whole file is learned in
one transaction, so nothing is learned when any line is bad or any episode fails."""))
@model_options
def learn(
    file: Annotated[Path, typer.Argument(help="Episodes as JSON Lines (format: README).")],
    db: DbOpt = DEFAULT_DB,
    space: SpaceOpt = "default",
    strict: Annotated[bool, typer.Option(help=command_help(
        "learn_many", "The whole FILE: nothing is learned if any line is bad."))] = False,
    embedder: EmbedOpt = None,
    tau_task: TauTask = None,
    tau_env: TauEnv = None,
    penalty: Penalty = None,
    scene: SceneOpt = None,
    create: CreateOpt = True,
    as_json: JsonOpt = False,
    *,
    models: ModelOptions,
) -> None:
    parsed = list(read_episodes(file))
    bad = [(line, e) for line, e in parsed if isinstance(e, EpisodeError)]
    for _, error in bad:
        _error(error)
    if strict and bad:
        raise typer.Exit(EXIT_CODES[EpisodeError])
    good = [(i, line, e) for i, (line, e) in enumerate(parsed) if isinstance(e, Episode)]
    with open_memory(db, space, embedder, create=create, extractor=models.build(),
                     tau_task=tau_task, tau_env=tau_env, penalty=penalty, scene=scene) as mem:
        if strict:
            batch = mem.learn_many([e for _, _, e in good])
        else:
            learned: list[LearnResult] = []
            with Progress(console=err, disable=as_json or len(good) < 20 or not err.is_terminal,
                          transient=True) as bar:
                task = bar.add_task("learning", total=len(good))
                for _, _, episode in good:
                    learned.append(mem.learn(episode))
                    bar.advance(task)
            batch = BatchResult.of(learned)
    errors = [api.BatchErrorOut.build(line=line, field=e.field, error=str(e)) for line, e in bad]
    summary = batch.placed([(i, line) for i, line, _ in good], errors).wire()
    emit(summary, as_json, lambda: _print_learn(summary))
    if bad:
        raise typer.Exit(EXIT_CODES[EpisodeError])


def _print_learn(summary: dict[str, Any]) -> None:
    table = Table("#", "task", "env")
    for r in summary["results"]:
        table.add_row(str(r["index"]), _fmt_write(r["task"]), _fmt_write(r["env"]))
    out.print(table)
    out.print(f"learned {summary['episodes']} episode(s); usage {summary['usage']}")


def _fmt_write(w: dict[str, Any]) -> str:
    return f"{w['action']} {w['node'] or ''}".strip()


@app.command(help=help_of("recall"))
def recall(
    task: Annotated[str, typer.Option(help=help_of("recall", "task"))] = "",
    env: Annotated[str, typer.Option(help=help_of("recall", "env"))] = "",
    db: DbOpt = DEFAULT_DB,
    space: SpaceOpt = "default",
    top_k: Annotated[int | None, typer.Option(min=1, help=help_of("recall", "top_k"))] = None,
    explain: Annotated[bool, typer.Option(help=help_of("recall", "explain"))] = False,
    budget_tokens: Annotated[int | None, typer.Option(
        help=help_of("recall", "budget_tokens"))] = None,
    embedder: EmbedOpt = None,
    tau_task: TauTask = None,
    tau_env: TauEnv = None,
    penalty: Penalty = None,
    scene: SceneOpt = None,
    filter_: FilterOpt = None,
    as_json: JsonOpt = False,
) -> None:
    filters = filters_from_pairs(filter_)
    with open_memory(db, space, embedder, tau_task=tau_task, tau_env=tau_env,
                     penalty=penalty, scene=scene) as mem:
        result = mem.recall(task, env, top_k=top_k, budget_tokens=budget_tokens,
                            filters=filters, explain=explain)
    data = result.wire()
    emit(data, as_json, lambda: out.print(result.context or "(no memory matched)",
                                           markup=False, highlight=False, soft_wrap=True))


@app.command(help=command_help("show", """In words: what the node is, its counters and chain,
the composed experience and, for a delta, its change from its parent (--raw / --json: the
stored record)."""))
def show(
    node_id: Annotated[str, typer.Argument(help=help_of("show", "node_id"))],
    db: DbOpt = DEFAULT_DB,
    space: SpaceOpt = "default",
    embedder: EmbedOpt = None,
    raw: Annotated[bool, typer.Option(
        "--raw", help="Print the stored record (patch as JSON arrays) instead of words.")] = False,
    as_json: JsonOpt = False,
) -> None:
    from deltamem.faces.cli.output import show_text

    with open_memory(db, space, embedder) as mem:
        data = mem.show(node_id).wire()
        text = None if as_json or raw else show_text(mem.chain(node_id), data)
    emit(data, as_json, lambda: out.print_json(data=data) if text is None else out.print(
        text, markup=False, highlight=False, soft_wrap=True))


@app.command("list", help=help_of("list_nodes"))
def list_(
    db: DbOpt = DEFAULT_DB,
    space: SpaceOpt = "default",
    tree: Annotated[Tree | None, typer.Option(help=help_of("list_nodes", "tree"))] = None,
    kind: Annotated[NodeKind | None, typer.Option(help=help_of("list_nodes", "kind"))] = None,
    outcome: Annotated[Outcome | None, typer.Option(
        help=help_of("list_nodes", "outcome"))] = None,
    contains: Annotated[str, typer.Option(help=help_of("list_nodes", "contains"))] = "",
    limit: Annotated[int | None, typer.Option(min=1, help=help_of("list_nodes", "limit"))] = None,
    filter_: FilterOpt = None,
    embedder: EmbedOpt = None,
    as_json: JsonOpt = False,
) -> None:
    filters = filters_from_pairs(filter_)
    with open_memory(db, space, embedder) as mem:
        data = mem.list_nodes(tree, kind=kind, outcome=outcome, contains=contains,
                              filters=filters, limit=limit).wire()
    emit(data, as_json, lambda: _print_nodes(data))


def _print_nodes(data: dict[str, Any]) -> None:
    rows = data["nodes"]
    if not rows:
        out.print("(no nodes)")
        return
    # ids are what this listing is for: never cut them; the key column takes what is left.
    table = Table(Column("id", no_wrap=True, min_width=max(len(r["id"]) for r in rows)),
                  "tree", "kind", "outcome", "depth", "hits", "key")
    for r in rows:
        key = r["key"] if len(r["key"]) <= 60 else r["key"][:57] + "..."
        table.add_row(r["id"], r["tree"], r["kind"], r["outcome"], str(r["depth"]),
                      str(r["hits"]), Text(key))  # Text: a key is not rich markup
    out.print(table)
    if data["truncated"]:
        out.print(f"... {data['total'] - len(rows)} more (raise --limit)")


@app.command(help=help_of("stats"))
def stats(
    db: DbOpt = DEFAULT_DB,
    space: SpaceOpt = "default",
    embedder: EmbedOpt = None,
    as_json: JsonOpt = False,
) -> None:
    with open_memory(db, space, embedder) as mem:
        data = mem.stats().wire()
    emit(data, as_json, lambda: _print_stats(data))


def _print_stats(data: dict[str, Any]) -> None:
    table = Table("tree", "nodes", "roots", "deltas", "failures", "consolidated", "max depth")
    for tree in ("task", "env"):
        t = data[tree]
        table.add_row(tree, *(str(t[k]) for k in ("nodes", "roots", "deltas", "failures",
                                                   "consolidated_roots", "max_depth")))
    out.print(table)
    out.print(f"episodes {data['episodes']}  stored {data['stored_chars']} chars  "
              f"flat {data['flat_chars']} chars  ratio {data['compression']}")


@app.command(help=help_of("consolidate"))
def consolidate(
    db: DbOpt = DEFAULT_DB,
    space: SpaceOpt = "default",
    k_cons: Annotated[int | None, typer.Option(help="Successes that trigger a merge.")] = None,
    dry_run: Annotated[bool, typer.Option(help=help_of("consolidate", "dry_run"))] = False,
    embedder: EmbedOpt = None,
    as_json: JsonOpt = False,
) -> None:
    from deltamem.faces.cli.output import progress

    with open_memory(db, space, embedder, k_cons=k_cons) as mem, \
            progress(err, "consolidating", quiet=as_json):
        data = mem.consolidate(dry_run=dry_run).wire()
    verb = "due" if dry_run else "consolidated"
    emit(data, as_json, lambda: out.print(f"{len(data['consolidated'])} chain(s) {verb}"))


@app.command(help=help_of("record_outcome"))
def outcome(
    node_ids: Annotated[list[str], typer.Argument(help=help_of("record_outcome", "nodes"))],
    success: Annotated[bool, typer.Option(
        "--success/--failure", help=help_of("record_outcome", "success"))],
    db: DbOpt = DEFAULT_DB,
    space: SpaceOpt = "default",
    embedder: EmbedOpt = None,
    as_json: JsonOpt = False,
) -> None:
    with open_memory(db, space, embedder) as mem:
        data = mem.record_outcome(node_ids, success).wire()
    word = "success" if success else "failure"
    emit(data, as_json, lambda: out.print(f"counted a {word} on {', '.join(data['nodes'])}"))


@app.command("export", help=command_help("export", "Into FILE."))
def export_(
    file: Annotated[Path, typer.Argument(help="Output JSON Lines file.")],
    db: DbOpt = DEFAULT_DB,
    space: SpaceOpt = "default",
    embedder: EmbedOpt = None,
    as_json: JsonOpt = False,
) -> None:
    from deltamem.faces.cli.output import progress

    with open_memory(db, space, embedder) as mem:
        lines = mem.iter_export()
        first = next(lines)  # a missing space fails before the file is touched
        count = 1
        with file.open("w", encoding="utf-8") as handle, \
                progress(err, f"exporting to {file}", quiet=as_json, unit="records") as advance:
            handle.write(first)
            for line in lines:
                handle.write(line)
                count += 1
                advance()
    emit({"records": count, "file": str(file)}, as_json,
          lambda: out.print(f"exported {count} records to {file}"))


@app.command("import", help=command_help("import_", """From FILE, written by `deltamem
export`. The whole file is verified first (fields, parents, depths, chains, vectors); a bad file
is refused naming its first bad record, and nothing is written."""))
def import_(
    file: Annotated[Path, typer.Argument(help="A file written by `deltamem export`.")],
    db: DbOpt = DEFAULT_DB,
    space: SpaceOpt = "default",
    embedder: EmbedOpt = None,
    create: CreateOpt = True,
    as_json: JsonOpt = False,
) -> None:
    from deltamem.faces.cli.output import counted_lines, progress

    with open_memory(db, space, embedder, create=create) as mem, \
            file.open(encoding="utf-8") as handle, \
            progress(err, f"importing {file}", total=file.stat().st_size,
                     quiet=as_json) as advance:
        counts = mem.import_lines(counted_lines(handle, advance), str(file)).wire()
    emit(counts, as_json, lambda: out.print(f"imported {counts}"))


@app.command()
def check(
    db: DbOpt = DEFAULT_DB,
    space: SpaceOpt = "default",
    embedder: EmbedOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Check both trees' integrity (parents, depths, every chain composes)."""
    with open_memory(db, space, embedder) as mem:
        problems = mem.check()
    emit({"ok": not problems, "problems": problems}, as_json,
          lambda: out.print("ok" if not problems else "\n".join(problems), markup=False))
    if problems:
        raise typer.Exit(1)


@app.command()
def calibrate(
    file: Annotated[Path, typer.Argument(help="Labelled episodes as JSON Lines.")],
    task_group: Annotated[str, typer.Option(
        help="Label of an episode's task: meta.<key> or 'text'.")] = "meta.task_name",
    env_group: Annotated[str, typer.Option(
        help="Label of an episode's scene: meta.<key>, 'first-sentence' or 'text'.")
    ] = "first-sentence",
    beta: Annotated[float, typer.Option(
        help="Recall weight of the F-beta score (2: a miss costs more than a near match).")
    ] = 2.0,
    split: Annotated[list[str] | None, typer.Option(
        help="Only episodes whose meta.split is this (repeatable), e.g. --split train: "
             "thresholds are chosen on train or dev episodes, never test ones.")] = None,
    embedder: EmbedOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Choose tau_task and tau_env for an embedder from labelled episodes.

    Episodes with the same label should match each other. For each threshold the top-1 retrieval
    precision/recall/F-beta is computed (each episode queries all the others, and all the others
    but its own group, as an unseen task); the recommendation is the middle of the best plateau
    (see deltamem.engine.calibrate). Set the result with
    DELTAMEM_TAU_TASK / DELTAMEM_TAU_ENV.
    """
    from deltamem.embed import make_embedder
    from deltamem.engine.calibrate import calibrate_episodes, in_splits
    from deltamem.faces.cli.output import progress

    episodes = [e for _, e in read_episodes(file) if not isinstance(e, EpisodeError)]
    if split:
        episodes = in_splits(episodes, split)
    model = make_embedder(embedder or Settings.from_env().embedder)
    with progress(err, f"calibrating on {len(episodes)} episodes", quiet=as_json):
        result = calibrate_episodes(episodes, model, task_group=_grouper(task_group, "task"),
                                    env_group=_grouper(env_group, "env"), beta=beta)
    data = {**result.to_dict(), "episodes": len(episodes), "splits": split or None}
    emit(data, as_json, lambda: _print_calibration(data))


def _grouper(spec: str, field: str) -> Callable[[Any], Any]:
    from deltamem.extract.trace import first_sentence

    if spec.startswith("meta."):
        key = spec.removeprefix("meta.")
        return lambda e: e.meta.get(key)
    if spec == "text":
        return lambda e: getattr(e, field)
    if spec == "first-sentence":
        return lambda e: first_sentence(getattr(e, field), 300)
    raise ConfigError(f"unknown group {spec!r}; use meta.<key>, 'text' or 'first-sentence'")


def _print_calibration(data: dict[str, Any]) -> None:
    for tree in ("task", "env"):
        cal = data.get(tree)
        if not cal:
            out.print(f"{tree}: not enough labelled episodes")
            continue
        out.print(f"{tree}: recommended tau {cal['tau']} (best top-1 F-beta {cal['f1']:.3f}; "
                  f"same-group mean cos {cal['within_mean']:.3f}, other {cal['between_mean']:.3f})")
        out.print(f"  export DELTAMEM_TAU_{tree.upper()}={cal['tau']}")


@app.command()
def migrate(
    source: Annotated[str, typer.Option("--from", help="Source: sqlite:PATH, a path or URL.")],
    target: Annotated[str, typer.Option("--to", help="Target: postgresql://... or a path.")],
    space: Annotated[str | None, typer.Option(help="One space (default: all).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Copy whole spaces between stores exactly (nodes, vectors, counters, episodes)."""
    from deltamem.faces.cli.output import progress
    from deltamem.store.copy import copy_spaces

    with progress(err, f"migrating {space or 'every space'}", quiet=as_json):
        counts = copy_spaces(source, target, space=space)
    emit({"migrated": counts}, as_json, lambda: out.print(f"migrated {counts}"))


PLUGIN_GROUP = "deltamem.plugins"


def _register_subcommands() -> None:
    # Serving lives in its own module. Other distributions add commands through the
    # ``deltamem.plugins`` entry-point group: each entry is a ``register(app)`` callable
    # (deltamem-bench adds ``deltamem bench`` this way).
    from importlib.metadata import entry_points

    from deltamem.faces.cli import privacy, serve

    serve.register(app)
    privacy.register(app)
    for entry in entry_points(group=PLUGIN_GROUP):
        entry.load()(app)


_register_subcommands()


def main(argv: list[str] | None = None) -> None:
    """Console entry point: every error becomes one ``error: ...`` line and an exit code.

    No traceback reaches the user: usage errors, library errors and file errors are mapped by
    :func:`exit_code_for`; anything else is reported as an internal error (exit 70) whose
    traceback ``DELTAMEM_DEBUG=1`` shows.
    """
    interrupts: tuple[type[BaseException], ...] = (KeyboardInterrupt, *_click_classes("Abort"))
    try:
        code = app(args=argv, prog_name="deltamem", standalone_mode=False)
    except typer.Exit as exc:
        code = exc.exit_code
    except _click_classes("NoArgsIsHelpError"):
        code = 0  # the help text was printed
    except interrupts:
        _error("interrupted")
        code = EXIT_INTERRUPTED
    except Exception as exc:
        if debug() and exit_code_for(exc) == EXIT_INTERNAL:
            raise
        _error(describe(exc))
        code = exit_code_for(exc)
    sys.exit(code if isinstance(code, int) else 0)


def _click_classes(name: str) -> tuple[type[BaseException], ...]:
    """``name`` from typer's vendored click and from click itself, whichever are installed."""
    found: list[type[BaseException]] = []
    for module in ("typer._click.exceptions", "click.exceptions"):
        try:
            found.append(getattr(importlib.import_module(module), name))
        except (ImportError, AttributeError):
            continue
    return tuple(found)


def exit_code_for(exc: BaseException) -> int:
    """The documented exit code of an error (see ``EXIT_CODES`` and the module docstring)."""
    if isinstance(exc, _click_classes("ClickException")):
        return EXIT_USAGE
    if isinstance(exc, DeltaMemError):
        for kind, code in EXIT_CODES.items():
            if isinstance(exc, kind):
                return code
        return 1
    if isinstance(exc, OSError | UnicodeDecodeError):
        return EXIT_FILE
    return EXIT_INTERNAL


def describe(exc: BaseException) -> str:
    """The one-line message for an error."""
    if isinstance(exc, _click_classes("ClickException")):
        message = exc.format_message()  # type: ignore[attr-defined]
        ctx = getattr(exc, "ctx", None)
        command = ctx.command_path if ctx is not None else "deltamem"
        return f"{message} (see '{command} --help')"
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"{exc.filename}: {exc.strerror or exc}"
    if isinstance(exc, UnicodeDecodeError):
        return f"the file is not UTF-8 text ({exc.reason} at byte {exc.start})"
    if exit_code_for(exc) == EXIT_INTERNAL:
        return (f"internal error {type(exc).__name__}: {exc} (a bug in deltamem; "
                "DELTAMEM_DEBUG=1 shows the traceback)")
    return str(exc)


def _error(message: object) -> None:
    """One unwrapped line on stderr (rich would wrap long paths across lines)."""
    text = redacted(" ".join(str(message).split()))
    sys.stderr.write(f"error: {text}\n")


if __name__ == "__main__":  # pragma: no cover
    main()
