"""The MCP face of the memory (``deltamem mcp --db P --space S``; stdio, or streamable HTTP).

Its tools are the operations of :data:`deltamem.formats.operations.OPERATIONS` that MCP offers,
each derived from its row (:func:`derived_tool`): its arguments are the operation's input model
(``tool_input`` where the tool takes other arguments than the REST route), its output schema the
answer model, its description the agent-facing one. Most run the facade method; ``learn`` (steps
or a transcript, with the session's last recall), ``record_outcome`` (the session's last recall
by default) and ``export_skills`` (files under the operator's folder) have a runner here
(:data:`RUNNERS`). A result carries the full JSON as ``structuredContent`` and a short text for
the model (:mod:`~deltamem.faces.server.tool_texts`), the recalled context block first.

One dispatcher, :meth:`ScopedServer.call_tool`, which every ``tools/call`` goes through, checks
an HTTP caller's key for the tool's operation scope (over streamable HTTP the server demands the
REST server's API keys, :mod:`deltamem.faces.server.keys`, and a key must cover the space), and
turns library errors into tool errors carrying the library's message, which says what to do.
``export_skills`` writes only under the folder the operator configured (``export_root``).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from inspect import Parameter, Signature
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from deltamem.engine.memory import DeltaMem
from deltamem.engine.results import Recall
from deltamem.errors import DeltaMemError, EpisodeError
from deltamem.faces.server.http_errors import private_paths, public_message
from deltamem.faces.server.tool_texts import TEXTS, json_text
from deltamem.formats import api, operations
from deltamem.formats.episodes import episode_from_dict
from deltamem.formats.operations import Operation
from deltamem.formats.transcripts import episode_from_messages
from deltamem_launch.handshake import INSTRUCTIONS, SERVER_NAME, SERVER_VERSION

if TYPE_CHECKING:
    from deltamem.faces.server.keys import ApiKey

KEY_STATE = "deltamem_key"  # where the HTTP auth layer leaves the verified key
MAX_SESSIONS = 1_000  # last recalls kept, one per client session (oldest dropped first)
Ctx = Context[Any, Any] | None


def tool_scopes() -> dict[str, str]:
    """The key scope each tool needs over HTTP: its operation's (the REST route's)."""
    return {op.tool_name: op.scope for op in operations.OPERATIONS if op.tool != ""}


class ScopedServer(MCPServer):
    """The MCP server whose one tool dispatcher (:meth:`call_tool`) checks an HTTP caller's key
    for the tool's scope before the tool runs (a tool missing from :func:`tool_scopes` needs
    ``admin``) and reports a library error as a tool error with the library's message, without
    the server's addresses, database file or secrets
    (:func:`~deltamem.faces.server.http_errors.public_message`)."""

    paths: tuple[str, ...] = ()

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Ctx = None) -> Any:
        _check_scope(context, tool_scopes().get(name, "admin"), name)
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if not isinstance(cause, DeltaMemError):
                raise
            raise ToolError(f"Error executing tool {name}: {type(cause).__name__}: "
                            f"{public_message(cause, self.paths)}") from cause


def _check_scope(ctx: Ctx, scope: str, tool: str) -> None:
    """Refuse an HTTP call whose key lacks ``scope``. The key was verified (and checked to
    cover the space) by the HTTP auth layer before the request reached the SDK; a call with no
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


class Sessions:
    """Each client session's last recall (one server over HTTP serves many sessions), for
    ``learn`` and ``record_outcome``; at most :data:`MAX_SESSIONS`, oldest dropped first. A
    session is its MCP session id over HTTP; stdio has one."""

    def __init__(self) -> None:
        self._last: OrderedDict[str, Recall] = OrderedDict()

    @staticmethod
    def key(ctx: Ctx) -> str:
        try:
            headers = ctx.headers if ctx is not None else None
        except ValueError:  # called directly, outside a client request
            headers = None
        return str(headers.get("mcp-session-id", "")) if headers else ""

    def remember(self, ctx: Ctx, recall: Recall) -> None:
        key = self.key(ctx)
        self._last[key] = recall
        self._last.move_to_end(key)
        while len(self._last) > MAX_SESSIONS:
            self._last.popitem(last=False)

    def last(self, ctx: Ctx) -> Recall | None:
        return self._last.get(self.key(ctx))


# A tool's own way to run its operation: (memory, the session's recalls, the validated input,
# the call's context, the folder export_skills may write under) -> the facade's result.
Runner = Callable[[DeltaMem, Sessions, Any, Ctx, "Path | None"], Any]


def _learn(mem: DeltaMem, sessions: Sessions, given: Any, ctx: Ctx,
           _: Path | None) -> Any:
    if (given.steps is None) == (given.messages is None):
        raise EpisodeError("give exactly one of `steps` or `messages`")
    if given.messages is not None:
        episode = episode_from_messages(
            [m.model_dump(exclude_none=True) for m in given.messages], success=given.success,
            task=given.task, env=given.env, score=given.score, meta=given.meta)
    else:
        episode = episode_from_dict({
            "task": given.task, "env": given.env, "success": given.success,
            "score": given.score, "meta": given.meta or {},
            "steps": [s.model_dump(exclude_none=True) for s in given.steps or []]})
    return mem.learn(episode, sessions.last(ctx))


def _record_outcome(mem: DeltaMem, sessions: Sessions, given: api.OutcomeToolIn, ctx: Ctx,
                    _: Path | None) -> Any:
    target = given.node_ids if given.node_ids is not None else sessions.last(ctx)
    if target is None:
        raise ToolError("no recall to score yet: call recall first, or pass node_ids")
    return mem.record_outcome(target, given.success)


def _export_skills(mem: DeltaMem, _: Sessions, given: api.ExportSkillsIn, __: Ctx,
                   root: Path | None) -> Any:
    from deltamem.faces.skills import export_layout

    try:
        written = export_layout(mem, export_target(root, given.dir), given.layout)
    except (OSError, ValueError) as exc:  # the OS's reason, never an empty message
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        raise ToolError(f"cannot write skills to {given.dir!r}: {reason}") from exc
    return api.SkillsExportOut.build(**written)


RUNNERS: dict[str, Runner] = {"learn": _learn, "record_outcome": _record_outcome,
                              "export_skills": _export_skills}


def build_server(mem: DeltaMem, *, name: str = SERVER_NAME,
                 export_root: str | Path | None = None) -> MCPServer:
    """An MCP server exposing ``mem`` (one space): a tool per operation it offers.

    Args:
        export_root: the folder ``export_skills`` may write under (None: the tool is refused).
    """
    server = ScopedServer(name=name, instructions=INSTRUCTIONS, version=SERVER_VERSION)
    server.paths = private_paths(mem.store.url)
    sessions = Sessions()
    root = None if export_root is None else Path(export_root).expanduser().resolve()
    for op in operations.OPERATIONS:
        if op.on("mcp"):
            server.add_tool(derived_tool(op, mem, sessions, root), name=op.tool_name,
                            title=op.title, description=op.description, annotations=ToolAnnotations(
                                title=op.title, read_only_hint=op.scope == "read",
                                destructive_hint=op.destructive, idempotent_hint=op.idempotent,
                                open_world_hint=False))
    return server


def derived_tool(op: Operation, mem: DeltaMem, sessions: Sessions,
                 export_root: Path | None = None) -> Callable[..., Any]:
    """The MCP tool of ``op``: its arguments are the path's node id and the fields of the
    operation's input model (their bounds and descriptions), its output schema the answer
    model; it runs the facade method (or the tool's runner) and answers with the JSON and a
    short text."""
    model = op.tool_model
    runner = RUNNERS.get(op.name) if op.tool_input is not None else None
    text = TEXTS.get(op.name, json_text)

    def tool(ctx: Ctx = None, **arguments: Any) -> CallToolResult:
        path = {name: arguments.pop(name) for name in op.path_fields}
        given = model.model_validate(arguments)
        result = (runner(mem, sessions, given, ctx, export_root) if runner is not None
                  else op.run(mem, given, path))
        if isinstance(result, Recall):
            sessions.remember(ctx, result)
        data = op.answer_of(result).model_dump(mode="json", exclude_unset=True)
        return CallToolResult(content=[TextContent(type="text", text=text(data))],
                              structured_content=data)

    params = [Parameter(name, Parameter.KEYWORD_ONLY, annotation=Annotated[
        api.NodeId, Field(description="A node id such as 't-1a2b3c4d5e6f7a8b'.")])
        for name in op.path_fields]
    params += [_parameter(name, info) for name, info in model.model_fields.items()]
    params.append(Parameter("ctx", Parameter.KEYWORD_ONLY, default=None, annotation=Ctx))
    tool.__signature__ = Signature(  # type: ignore[attr-defined]
        params, return_annotation=Annotated[CallToolResult, op.answer])
    tool.__name__ = op.tool_name
    return tool


def _parameter(name: str, info: Any) -> Parameter:
    """A tool parameter of one input model field: its type, bounds, default and description."""
    default = (info.get_default(call_default_factory=True) if not info.is_required()
               else Parameter.empty)
    return Parameter(name, Parameter.KEYWORD_ONLY, default=default, annotation=Annotated[(
        info.annotation, *info.metadata, Field(description=info.description))])


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
