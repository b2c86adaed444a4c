"""The MCP face of the memory (``deltamem mcp --db P --space S``; stdio, or streamable HTTP).

Its tools are the operations of :data:`deltamem.formats.operations.OPERATIONS` that MCP offers:
``recall``, ``list``, ``show``, ``stats``, ``consolidate``, ``correct`` and ``forget_node`` are
derived from the table (their arguments are the operation's input model, their output schema its
answer model, their description the agent-facing one), and ``learn`` (steps or a transcript),
``record_outcome`` (the session's last recall) and ``export_skills`` (files under the operator's
folder) are written here. A result carries the full JSON as ``structuredContent`` and a short
text for the model, the recalled context block first. Library errors reach the agent as tool
errors carrying the library's message, which says what to do.

Over streamable HTTP the server demands the REST server's API keys (``Authorization: Bearer
dmk_...``, :mod:`deltamem.faces.server.keys`): a key must cover the space, and each tool needs its
operation's scope, checked in the one dispatcher every call goes through
(:meth:`ScopedServer.call_tool`). ``export_skills`` writes only under the folder the operator
configured (``export_root``); without one it is refused.
"""

from __future__ import annotations

import functools
import json
from collections import OrderedDict
from collections.abc import Callable
from inspect import Parameter, Signature
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, ParamSpec

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from deltamem.core.model import experience_from_dict
from deltamem.core.render import render_experience
from deltamem.engine.memory import DeltaMem
from deltamem.engine.results import Recall
from deltamem.errors import DeltaMemError, EpisodeError
from deltamem.faces.server.http_errors import private_paths, public_message
from deltamem.formats import api, operations
from deltamem.formats.api import MAX_STEPS
from deltamem.formats.episodes import episode_from_dict
from deltamem.formats.operations import Operation
from deltamem.formats.transcripts import episode_from_messages
from deltamem_launch.handshake import INSTRUCTIONS, SERVER_NAME, SERVER_VERSION

if TYPE_CHECKING:

    from deltamem.faces.server.keys import ApiKey

P = ParamSpec("P")


def tool_scopes() -> dict[str, str]:
    """The key scope each tool needs over HTTP: its operation's (the REST route's)."""
    return {op.tool_name: op.scope for op in operations.OPERATIONS if op.tool != ""}


KEY_STATE = "deltamem_key"  # where the HTTP auth layer leaves the verified key


TreeName = Literal["task", "env"]


# -- inputs ---------------------------------------------------------------------------------
class FunctionArg(BaseModel):
    name: str = Field(min_length=1, max_length=200)
    arguments: str | dict[str, Any] = Field("", description="JSON text or an object.")


class ToolCallArg(BaseModel):
    id: str | None = Field(None, max_length=200)
    type: Literal["function"] = "function"
    function: FunctionArg


class MessageArg(BaseModel):
    """One chat message in the OpenAI format (assistant tool calls, tool results)."""

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None
    tool_calls: list[ToolCallArg] | None = Field(None, max_length=MAX_STEPS)
    tool_call_id: str | None = Field(None, max_length=200)


def _result(model: type[api.Model], data: dict[str, Any], text: str) -> CallToolResult:
    """The tool's answer: ``data`` as checked by its wire model (the REST server's and the
    CLI's JSON, :mod:`deltamem.formats.api`), and ``text`` for the model to read."""
    structured = model.model_validate(data).model_dump(mode="json", exclude_unset=True)
    return CallToolResult(content=[TextContent(type="text", text=text)],
                          structured_content=structured)


def _library_errors(mem: DeltaMem) -> Callable[[Callable[P, CallToolResult]],
                                               Callable[P, CallToolResult]]:
    """A decorator turning library errors into tool errors whose message reaches the agent
    (without the server's addresses, ``mem``'s database file or a secret: see
    :func:`~deltamem.faces.server.http_errors.public_message`)."""
    paths = private_paths(mem.store.url)

    def decorate(fn: Callable[P, CallToolResult]) -> Callable[P, CallToolResult]:
        @functools.wraps(fn)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> CallToolResult:
            try:
                return fn(*args, **kwargs)
            except DeltaMemError as exc:
                raise ToolError(f"{type(exc).__name__}: {public_message(exc, paths)}") from exc

        return wrapper

    return decorate


class ScopedServer(MCPServer):
    """The MCP server whose one tool dispatcher (:meth:`call_tool`, which every ``tools/call``
    goes through) checks an HTTP caller's key for the tool's scope before the tool runs,
    whatever the tool's own signature. A tool missing from :func:`tool_scopes` needs
    ``admin``."""

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Context[Any, Any] | None = None) -> Any:
        _check_scope(context, tool_scopes().get(name, "admin"), name)
        return await super().call_tool(name, arguments, context)


def _check_scope(ctx: Context[Any, Any] | None, scope: str, tool: str) -> None:
    """Refuse an HTTP call whose key lacks ``scope``. The key was verified (and checked to
    cover the space) by :class:`KeyAuth` before the request reached the SDK; a call with no
    HTTP request (stdio, or in process) is the local operator's own."""
    try:
        request = ctx.request_context.request if ctx is not None else None
    except ValueError:  # called directly, outside a client request
        request = None
    state = getattr(request, "scope", {}).get("state") if request is not None else None
    if not isinstance(state, dict) or KEY_STATE not in state:
        return
    key: ApiKey | None = state[KEY_STATE]
    if key is not None and scope not in key.scopes:
        raise ToolError(f"Forbidden: this API key lacks the {scope!r} scope that {tool} needs "
                        f"(it has: {', '.join(key.scopes)})")


MAX_SESSIONS = 1_000  # last recalls kept, one per client session (oldest dropped first)


def _client_key(ctx: Context | None) -> str:
    """Which client a call comes from: its MCP session id over HTTP; stdio has one client."""
    try:
        headers = ctx.headers if ctx is not None else None
    except ValueError:  # called directly, outside a client request
        headers = None
    return str(headers.get("mcp-session-id", "")) if headers else ""


def _hint(op: Operation) -> ToolAnnotations:
    """The tool annotations of an operation: read-only for the read scope, its idempotence and
    whether it deletes."""
    return ToolAnnotations(title=op.title, read_only_hint=op.scope == "read",
                           destructive_hint=op.destructive, idempotent_hint=op.idempotent,
                           open_world_hint=False)


# -- text forms -----------------------------------------------------------------------------
def recall_text(data: dict[str, Any]) -> str:
    """The context block, then one line per tree saying what matched."""
    lines = []
    for tree, label in (("task", "skill"), ("env", "knowledge")):
        t = data[tree]
        if t["matched"]:
            lines.append(f"{label}: {t['node']} (score {t['score']:.2f}, chain of "
                         f"{len(t['chain'])})")
        else:
            lines.append(f"{label}: no match")
    head = data["context"] or "(no memory matched: proceed on your own, then call learn)"
    return head + "\n\n[" + "; ".join(lines) + "]"


def _write_text(tree: str, write: dict[str, Any]) -> str:
    if write["action"] == "dedup":
        return f"{tree}: already known ({write['node']}, counted)"
    where = f" under {write['parent']}" if write["parent"] else ""
    return f"{tree}: new {write['action']} {write['node']}{where}"


def _consolidation_text(items: list[dict[str, Any]]) -> str:
    return "".join(f"; compiled {c['source']} into root {c['root']}" for c in items
                   if c["root"] is not None)


def build_server(mem: DeltaMem, *, name: str = SERVER_NAME,
                 export_root: str | Path | None = None) -> MCPServer:
    """An MCP server exposing ``mem`` (one space): a tool per operation it offers.

    Args:
        export_root: the folder ``export_skills`` may write under (None: the tool is refused).
    """
    server: MCPServer = ScopedServer(name=name, instructions=INSTRUCTIONS,
                                       version=SERVER_VERSION)
    sessions = Sessions()
    for op in operations.OPERATIONS:
        if op.on("mcp"):
            server.add_tool(derived_tool(op, mem, sessions), name=op.tool_name, title=op.title,
                            description=op.description, annotations=_hint(op))
    _session_tools(server, mem, sessions)
    _export_tool(server, mem,
                 None if export_root is None else Path(export_root).expanduser().resolve())
    return server


class Sessions:
    """Each client session's last recall (one server over HTTP serves many sessions), for
    ``learn`` and ``record_outcome``; at most :data:`MAX_SESSIONS`, oldest dropped first."""

    def __init__(self) -> None:
        self._last: OrderedDict[str, Recall] = OrderedDict()

    def remember(self, ctx: Context[Any, Any] | None, recall: Recall) -> None:
        key = _client_key(ctx)
        self._last[key] = recall
        self._last.move_to_end(key)
        while len(self._last) > MAX_SESSIONS:
            self._last.popitem(last=False)

    def last(self, ctx: Context[Any, Any] | None) -> Recall | None:
        return self._last.get(_client_key(ctx))


def derived_tool(op: Operation, mem: DeltaMem, sessions: Sessions) -> Callable[..., Any]:
    """The MCP tool of ``op``: its arguments are the path's node id and the fields of the
    operation's input model (their bounds and descriptions), its output schema the answer
    model; it runs the facade method and answers with the JSON and a short text."""
    paths = private_paths(mem.store.url)
    text = TEXTS.get(op.name, _json_text)

    def tool(ctx: Context[Any, Any] | None = None, **arguments: Any) -> CallToolResult:
        path = {name: arguments.pop(name) for name in op.path_fields}
        try:
            result = op.run(mem, op.request.model_validate(arguments), path)
            if isinstance(result, Recall):
                sessions.remember(ctx, result)
            data = op.answer_of(result, mem).model_dump(mode="json", exclude_unset=True)
        except DeltaMemError as exc:
            raise ToolError(f"{type(exc).__name__}: {public_message(exc, paths)}") from exc
        return CallToolResult(content=[TextContent(type="text", text=text(data))],
                              structured_content=data)

    params = [Parameter(name, Parameter.KEYWORD_ONLY, annotation=Annotated[
        api.NodeId, Field(description="A node id such as 't-1a2b3c4d5e6f7a8b'.")])
        for name in op.path_fields]
    for name, info in op.request.model_fields.items():
        default = (info.get_default(call_default_factory=True) if not info.is_required()
                   else Parameter.empty)
        params.append(Parameter(name, Parameter.KEYWORD_ONLY, default=default,
                                annotation=Annotated[(info.annotation, *info.metadata,
                                                      Field(description=info.description))]))
    params.append(Parameter("ctx", Parameter.KEYWORD_ONLY, default=None,
                            annotation=Context | None))
    tool.__signature__ = Signature(  # type: ignore[attr-defined]
        params, return_annotation=Annotated[CallToolResult, op.answer])
    tool.__name__ = op.tool_name
    return tool


def _json_text(data: dict[str, Any]) -> str:
    return json.dumps(data, ensure_ascii=False)[:4000]


def _show_text(data: dict[str, Any]) -> str:
    body = render_experience(experience_from_dict(data["experience"]))
    return (f"{data['id']}: {data['tree']} {data['kind']} ({data['outcome']}), chain "
            f"{' > '.join(data['chain'])}\n{body}")


def _list_text(data: dict[str, Any]) -> str:
    rows = data["nodes"][:MAX_LISTED]
    lines = [f"{r['id']}  {r['tree']} {r['kind']} {r['outcome']}  {r['key'][:80]}" for r in rows]
    left = data["total"] - len(rows)
    return ("\n".join(lines) or "no nodes") + (f"\n... {left} more" if left else "")


def _consolidate_text(data: dict[str, Any]) -> str:
    done = data["consolidated"]
    verb = "due" if data["dry_run"] else "compiled"
    return f"{len(done)} chain(s) {verb}" + "".join(
        f"\n{c['source']} ({c['tree']}, chain of {len(c['chain'])})"
        + (f" -> {c['root']}" if c["root"] else "") for c in done)


def _stats_text(data: dict[str, Any]) -> str:
    return (f"{data['episodes']} episode(s); task tree {data['task']['nodes']} node(s) "
            f"({data['task']['roots']} roots, {data['task']['failures']} failure lessons); "
            f"env tree {data['env']['nodes']} node(s); stored {data['stored_chars']} chars "
            f"vs flat {data['flat_chars']}")


MAX_LISTED = 50  # rows of a listing in the text for the model (structuredContent has all)
# The short text each derived tool answers with, for the model to read (JSON for any other).
TEXTS: dict[str, Callable[[dict[str, Any]], str]] = {
    "recall": lambda data: recall_text(data),
    "show": _show_text,
    "list_nodes": _list_text,
    "consolidate": _consolidate_text,
    "stats": _stats_text,
    "correct": lambda data: (f"corrected {data['of']} ({data['kind']}): {data['node']} now "
                             "supersedes it"),
    "delete": lambda data: f"deleted {len(data['deleted'])} node(s)",
}


def _session_tools(server: MCPServer, mem: DeltaMem, sessions: Sessions) -> None:
    """learn and record_outcome, which read the session's last recall."""
    guard = _library_errors(mem)
    learn_op, outcome_op = operations.operation("learn"), operations.operation("record_outcome")

    @server.tool(annotations=_hint(learn_op), title=learn_op.title,
                 description=learn_op.description)
    @guard
    def learn(
        success: Annotated[bool, Field(description="Whether the goal was achieved.")],
        task: Annotated[api.Text | None, Field(description=(
            "The goal of the episode (required with `steps`)."))] = None,
        steps: Annotated[list[api.StepIn] | None, Field(max_length=MAX_STEPS, description=(
            "Every step, in order."))] = None,
        messages: Annotated[list[MessageArg] | None, Field(max_length=4 * MAX_STEPS, description=(
            "The transcript, instead of `steps`."))] = None,
        env: Annotated[api.OptionalText, Field(
            description="A short description of the scene.")] = "",
        score: Annotated[api.Number, Field(description="Optional reward or score.")] = None,
        meta: Annotated[api.Meta | None, Field(
            description="Optional metadata kept with the nodes.")] = None,
        ctx: Context[Any, Any] | None = None,
    ) -> Annotated[CallToolResult, api.LearnOut]:
        if (steps is None) == (messages is None):
            raise EpisodeError("give exactly one of `steps` or `messages`")
        if messages is not None:
            episode = episode_from_messages(
                [m.model_dump(exclude_none=True) for m in messages], success=success, task=task,
                env=env, score=score, meta=meta)
        else:
            episode = episode_from_dict({
                "task": task, "env": env, "success": success, "score": score,
                "steps": [s.model_dump(exclude_none=True) for s in steps or []],
                "meta": meta or {}})
        data = mem.learn(episode, sessions.last(ctx)).to_dict()
        text = (f"learned episode {data['episode']}: {_write_text('task', data['task'])}; "
                f"{_write_text('env', data['env'])}{_consolidation_text(data['consolidated'])}")
        return _result(api.LearnOut, data, text)

    @server.tool(annotations=_hint(outcome_op), title=outcome_op.title,
                 description=outcome_op.description)
    @guard
    def record_outcome(
        success: Annotated[bool, Field(description="Whether following the memory worked.")],
        node_ids: Annotated[api.NodeIds | None, Field(description=(
            "Node ids to count; default: the nodes the last recall matched."))] = None,
        ctx: Context[Any, Any] | None = None,
    ) -> Annotated[CallToolResult, api.OutcomeOut]:
        target: Recall | list[str] | None = (
            node_ids if node_ids is not None else sessions.last(ctx))
        if target is None:
            raise ToolError("no recall to score yet: call recall first, or pass node_ids")
        data = mem.record_outcome(target, success).to_dict()
        word = "success" if success else "failure"
        text = (f"counted a {word} on {', '.join(data['nodes']) or 'no node (nothing matched)'}"
                f"{_consolidation_text(data['consolidated'])}")
        return _result(api.OutcomeOut, data, text)


def _export_tool(server: MCPServer, mem: DeltaMem, export_root: Path | None) -> None:
    """export_skills: files written under the operator's export folder only."""
    op = operations.operation("export_skills")

    @server.tool(annotations=_hint(op), title=op.title, description=op.description)
    @_library_errors(mem)
    def export_skills(
        dir: Annotated[str, Field(min_length=1, max_length=4096, description=(
            "Folder to write into (created if missing), inside the server's export folder."))],
        layout: Annotated[Literal["skills", "memory-md"], Field(
            description="File layout.")] = "skills",
    ) -> Annotated[CallToolResult, api.SkillsExportOut]:
        from deltamem.faces.skills import export_layout

        target = export_target(export_root, dir)
        try:
            data = export_layout(mem, target, layout)
        except (OSError, ValueError) as exc:  # the OS's reason, never an empty message
            reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
            raise ToolError(f"cannot write skills to {dir!r}: {reason}") from exc
        text = (f"wrote {len(data['skills'])} skill file(s) and {len(data['knowledge'])} "
                f"knowledge file(s) to {dir}")
        return _result(api.SkillsExportOut, data, text)


def export_target(root: Path | None, dir: str) -> Path:
    """The folder ``export_skills`` writes for ``dir``: inside ``root`` or refused (ToolError).

    A relative ``dir`` is taken under ``root``; an absolute one must lie inside it. Links and
    ``..`` are resolved first, so neither leads out.
    """
    if root is None:
        raise ToolError("export_skills is off: the server's operator has not configured an "
                        "export folder (deltamem mcp --export-dir DIR, or DELTAMEM_EXPORT_DIR)")
    if "\x00" in dir:
        raise ToolError(f"cannot write skills to {dir!r}: a path cannot hold a NUL character")
    try:
        target = (root / Path(dir).expanduser()).resolve()
    except (OSError, RuntimeError) as exc:
        raise ToolError(f"cannot write skills to {dir!r}: {exc}") from exc
    if not target.is_relative_to(root):
        raise ToolError(f"refusing to write skills to {dir!r}: it is outside the export folder "
                        f"{str(root)!r} that the server's operator configured")
    return target
