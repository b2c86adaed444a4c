"""The MCP face of the memory (``deltamem mcp --db P --space S``; stdio, or streamable HTTP).

Eight tools: ``recall``, ``learn``, ``record_outcome``, ``show``, ``list``, ``consolidate``,
``stats``, ``export_skills``. Each has a description written for the model that calls it, an
input schema with bounds, an output schema, and annotations (read-only, destructive,
idempotent). A result carries the full JSON as ``structuredContent``, checked against the same
wire model of :mod:`deltamem.formats.api` that the REST server and the CLI answer with (its output
schema) and a short text for the model, the recalled context block first. Library errors
reach the agent as tool errors carrying the library's message, which says what to do.

Over streamable HTTP the server demands the REST server's API keys (``Authorization: Bearer
dmk_...``, :mod:`deltamem.faces.server.keys`): a key must cover the space, and each tool needs its
scope (``read`` for recall/show/list/stats, ``write`` for learn/record_outcome/consolidate and
export_skills). ``export_skills`` writes only under the folder the operator configured
(``export_root``); without one it is refused.
"""

from __future__ import annotations

import functools
import json
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, ParamSpec

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from deltamem._util.jsonsafe import text_problem
from deltamem.core.model import NodeKind, Outcome, Tree, experience_from_dict
from deltamem.core.render import render_experience
from deltamem.engine.memory import DeltaMem
from deltamem.engine.results import Recall, consolidation_report, node_listing
from deltamem.errors import ConfigError, DeltaMemError, EpisodeError
from deltamem.faces.server.http_errors import private_paths, public_message
from deltamem.faces.server.keys import is_loopback
from deltamem.formats import api
from deltamem.formats.api import MAX_STEPS
from deltamem.formats.episodes import episode_from_dict
from deltamem.formats.transcripts import episode_from_messages

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

    from deltamem.faces.server.keys import ApiKey, KeyStore

P = ParamSpec("P")
# The key scope each tool needs over HTTP (the REST server's scopes).
TOOL_SCOPES = {"recall": "read", "show": "read", "list": "read", "stats": "read",
               "learn": "write", "record_outcome": "write", "consolidate": "write",
               "export_skills": "write", "correct": "write", "forget_node": "admin"}
KEY_STATE = "deltamem_key"  # where the HTTP auth layer leaves the verified key

INSTRUCTIONS = (
    "deltamem is an experience memory of skills (how tasks were done) and scene knowledge "
    "(what holds in an environment). Before a task, call `recall` with the goal and a short "
    "description of the scene, and read the returned context before you plan. After the task, "
    "call `learn` with what you did (the steps, or the transcript of messages) and whether it "
    "worked; if you only followed a recalled memory, `record_outcome` counts the result instead."
)

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
    paths = private_paths(getattr(mem.store, "path", ""))

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
    whatever the tool's own signature. A tool missing from :data:`TOOL_SCOPES` needs
    ``admin``."""

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Context[Any, Any] | None = None) -> Any:
        _check_scope(context, TOOL_SCOPES.get(name, "admin"), name)
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


FILTERS_HELP = ("Only memories learned from episodes whose meta has every key with an equal "
                "value, e.g. {\"user\": \"alice\", \"project\": \"shop\"} (keys such as "
                "user, agent, run, project; exact match).")
MAX_SESSIONS = 1_000  # last recalls kept, one per client session (oldest dropped first)


def _client_key(ctx: Context | None) -> str:
    """Which client a call comes from: its MCP session id over HTTP; stdio has one client."""
    try:
        headers = ctx.headers if ctx is not None else None
    except ValueError:  # called directly, outside a client request
        headers = None
    return str(headers.get("mcp-session-id", "")) if headers else ""


def _hint(*, read_only: bool, destructive: bool = False, idempotent: bool = False,
          title: str) -> ToolAnnotations:
    return ToolAnnotations(title=title, read_only_hint=read_only, destructive_hint=destructive,
                           idempotent_hint=idempotent, open_world_hint=False)


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


def build_server(mem: DeltaMem, *, name: str = "deltamem",
                 export_root: str | Path | None = None) -> MCPServer:
    """An MCP server exposing ``mem`` (one space) as its ten tools.

    Args:
        export_root: the folder ``export_skills`` may write under (None: the tool is refused).
    """
    server: MCPServer = ScopedServer(name=name, instructions=INSTRUCTIONS)
    _experience_tools(server, mem)
    _inspection_tools(server, mem,
                      None if export_root is None else Path(export_root).expanduser().resolve())
    _correction_tools(server, mem)
    return server


def _experience_tools(server: MCPServer, mem: DeltaMem) -> None:
    """recall, learn and record_outcome; each client session's last recall is kept for the
    other two (one server over HTTP serves many sessions)."""
    guard = _library_errors(mem)
    last: OrderedDict[str, Recall] = OrderedDict()

    def remember(ctx: Context | None, recall: Recall) -> None:
        key = _client_key(ctx)
        last[key] = recall
        last.move_to_end(key)
        while len(last) > MAX_SESSIONS:
            last.popitem(last=False)

    @server.tool(annotations=_hint(read_only=True, idempotent=True, title="Recall experience"),
                 description=(
        "Call this BEFORE starting a task. Returns what past episodes taught about it: a skill "
        "(numbered steps that worked for a similar goal), warnings from similar attempts that "
        "failed, and facts about a similar scene. The text result starts with the context "
        "block to read before planning; structuredContent holds the matched node ids and "
        "scores. Give the goal in `task` and a short description of where you are in `env`; "
        "either may be empty. Nothing matched means the memory has no similar experience yet."))
    @guard
    def recall(
        task: Annotated[api.QueryText, Field(description=(
            "The goal, e.g. 'fix the failing login test'."))] = "",
        env: Annotated[api.QueryText, Field(description=(
            "A short description of the scene, e.g. 'python repo with pytest'."))] = "",
        top_k: Annotated[api.TopK, Field(description="Candidates scored per tree.")] = 1,
        budget_tokens: Annotated[api.BudgetTokens | None, Field(description=(
            "Keep the context within about this many tokens; the most useful parts come "
            "first."))] = None,
        explain: Annotated[bool, Field(description=(
            "Also return every scoring term (similarity, failure penalty, threshold)."))] = False,
        filters: Annotated[api.Filters | None, Field(description=FILTERS_HELP)] = None,
        ctx: Context | None = None,
    ) -> Annotated[CallToolResult, api.RecallOut]:
        result = mem.recall(task, env, top_k=top_k, budget_tokens=budget_tokens,
                            filters=filters)
        remember(ctx, result)
        data = result.to_dict(explain=explain)
        return _result(api.RecallOut, data, recall_text(data))

    @server.tool(annotations=_hint(read_only=False, title="Learn from an episode"),
                 description=(
        "Call this AFTER every attempt at a task, successful or not, so the memory learns from "
        "it. Give either `steps` (each action with what you observed) or `messages` (the "
        "transcript in the OpenAI chat format, with assistant tool_calls and tool results; the "
        "first user message is the task unless `task` is given), plus `success`. The memory "
        "stores only what is new: a new root, an exact delta under a similar experience, or "
        "nothing for a duplicate. Failed attempts become warnings for next time."))
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
        ctx: Context | None = None,
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
        recalled = last.get(_client_key(ctx))
        data = mem.learn(episode, recalled).to_dict()
        text = (f"learned episode {data['episode']}: {_write_text('task', data['task'])}; "
                f"{_write_text('env', data['env'])}{_consolidation_text(data['consolidated'])}")
        return _result(api.LearnOut, data, text)

    @server.tool(annotations=_hint(read_only=False, title="Record the outcome of a recall"),
                 description=(
        "Count a success or a failure on the nodes the last `recall` returned (or on the given "
        "node ids), when you followed a recalled memory but have no transcript to `learn` "
        "from. Do not call it for an episode you also pass to `learn`: learning already counts "
        "the outcome. Successes make a memory rank as proven; a chain that keeps succeeding is "
        "compiled into a standalone skill."))
    @guard
    def record_outcome(
        success: Annotated[bool, Field(description="Whether following the memory worked.")],
        node_ids: Annotated[api.NodeIds | None, Field(description=(
            "Node ids to count; default: the nodes the last recall matched."))] = None,
        ctx: Context | None = None,
    ) -> Annotated[CallToolResult, api.OutcomeOut]:
        target: Recall | list[str] | None = (
            node_ids if node_ids is not None else last.get(_client_key(ctx)))
        if target is None:
            raise ToolError("no recall to score yet: call recall first, or pass node_ids")
        record = mem.record_outcome(target, success)
        data = record.to_dict()
        word = "success" if success else "failure"
        text = (f"counted a {word} on {', '.join(data['nodes']) or 'no node (nothing matched)'}"
                f"{_consolidation_text(data['consolidated'])}")
        return _result(api.OutcomeOut, data, text)


def _inspection_tools(server: MCPServer, mem: DeltaMem, export_root: Path | None) -> None:
    """show, list, consolidate, stats and export_skills."""
    guard = _library_errors(mem)

    @server.tool(annotations=_hint(read_only=True, idempotent=True, title="Show a node"),
                 description=(
        "Show one memory node by id (from recall, learn or list): its chain from the root, "
        "its full composed experience, its own patch, its children and counters."))
    @guard
    def show(node_id: Annotated[api.NodeId, Field(description=(
            "A node id such as 't-1a2b3c4d5e6f7a8b'."))],
             ctx: Context | None = None) -> Annotated[CallToolResult, api.ShowOut]:
        data = mem.show(node_id)
        body = render_experience(experience_from_dict(data["experience"]))
        text = (f"{data['id']}: {data['tree']} {data['kind']} ({data['outcome']}), chain "
                f"{' > '.join(data['chain'])}\n{body}")
        return _result(api.ShowOut, data, text)

    @server.tool(name="list", annotations=_hint(read_only=True, idempotent=True,
                                                 title="List nodes"),
                 description=(
        "List memory nodes (id, tree, kind, outcome, key, counters) to find ids for show. "
        "Filter by tree ('task' skills or 'env' scene knowledge), kind, outcome, or a text the "
        "key contains."))
    @guard
    def list_(
        tree: Annotated[TreeName | None, Field(description="Only this tree.")] = None,
        kind: Annotated[Literal["root", "delta"] | None, Field(
            description="Only roots or only deltas.")] = None,
        outcome: Annotated[Literal["success", "failure"] | None, Field(
            description="Only successes or only failure lessons.")] = None,
        contains: Annotated[str, Field(max_length=500, description=(
            "Only nodes whose key contains this text (case-insensitive)."))] = "",
        limit: Annotated[int, Field(ge=1, le=500, description="At most this many rows.")] = 50,
        filters: Annotated[api.Filters | None, Field(description=FILTERS_HELP)] = None,
        ctx: Context | None = None,
    ) -> Annotated[CallToolResult, api.NodeListOut]:
        data = node_listing(mem.list_nodes(Tree(tree) if tree else None,
                                           kind=NodeKind(kind) if kind else None,
                                           outcome=Outcome(outcome) if outcome else None,
                                           contains=contains, filters=filters), limit)
        lines = [f"{r['id']}  {r['tree']} {r['kind']} {r['outcome']}  {r['key'][:80]}"
                 for r in data["nodes"]]
        left = data["total"] - len(data["nodes"])
        more = f"\n... {left} more" if left else ""
        return _result(api.NodeListOut, data, ("\n".join(lines) or "no nodes") + more)

    @server.tool(annotations=_hint(read_only=False, idempotent=True,
                                   title="Consolidate chains"),
                 description=(
        "Compile every frequently successful chain of experiences into a new standalone root "
        "skill (the chain stays). With dry_run=true nothing is written and the result lists the "
        "chains that are due. Safe to call any time; a second call compiles nothing new."))
    @guard
    def consolidate(dry_run: Annotated[bool, Field(description=(
            "Only report what is due."))] = False, ctx: Context | None = None,
                    ) -> Annotated[CallToolResult, api.ConsolidateOut]:
        data = consolidation_report(mem.consolidate(dry_run=dry_run), dry_run=dry_run)
        done = data["consolidated"]
        verb = "due" if dry_run else "compiled"
        text = f"{len(done)} chain(s) {verb}" + "".join(
            f"\n{c['source']} ({c['tree']}, chain of {len(c['chain'])})"
            + (f" -> {c['root']}" if c["root"] else "") for c in done)
        return _result(api.ConsolidateOut, data, text)

    @server.tool(annotations=_hint(read_only=True, idempotent=True, title="Memory statistics"),
                 description=(
        "Size and shape of the memory: nodes per tree, roots, deltas, failure lessons, depth, "
        "episodes learned, and stored vs flat characters."))
    @guard
    def stats(ctx: Context | None = None) -> Annotated[CallToolResult, api.StatsOut]:
        data = mem.stats()
        text = (f"{data['episodes']} episode(s); task tree {data['task']['nodes']} node(s) "
                f"({data['task']['roots']} roots, {data['task']['failures']} failure lessons); "
                f"env tree {data['env']['nodes']} node(s); stored {data['stored_chars']} chars "
                f"vs flat {data['flat_chars']}")
        return _result(api.StatsOut, data, text)

    @server.tool(annotations=_hint(read_only=False, destructive=True, idempotent=True,
                                   title="Export skills as files"),
                 description=(
        "Write the memory's skills and scene knowledge as Markdown files into a folder on the "
        "machine running this server, inside the export folder its operator configured (a "
        "relative `dir` is taken under it). layout='skills': one <slug>/SKILL.md per skill "
        "root plus knowledge/*.md (the agent-skills layout); layout='memory-md': a MEMORY.md "
        "index with one file per skill chain and knowledge files per scene. Existing files of "
        "the same names are overwritten."))
    @guard
    def export_skills(
        dir: Annotated[str, Field(min_length=1, max_length=4096, description=(
            "Folder to write into (created if missing), inside the server's export folder."))],
        layout: Annotated[Literal["skills", "memory-md"], Field(
            description="File layout.")] = "skills",
        ctx: Context | None = None,
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


async def _serve_stdio(server: MCPServer) -> None:
    """``server.run("stdio")``, except that a request the SDK would drop unanswered gets a
    JSON-RPC error (see :class:`_Answering`)."""
    from mcp.server.stdio import stdio_server

    lowlevel = getattr(server, "_lowlevel_server", None)  # what MCPServer.run_stdio_async uses
    if lowlevel is None:  # pragma: no cover - another SDK layout: its own loop
        await server.run_stdio_async()
        return
    async with stdio_server() as (read_stream, write_stream):
        await lowlevel.run(_Answering(read_stream, write_stream), write_stream,
                           lowlevel.create_initialization_options())


class _Answering:
    """The SDK's stdio read stream, answering what the SDK would drop: a line that is JSON (as
    Python reads it) holding a request id, which the SDK's stricter parser refuses -- a string
    with a lone surrogate -- and so never answers, leaving the client waiting forever."""

    def __init__(self, inner: Any, write: Any):
        self._inner, self._write = inner, write

    def __getattr__(self, name: str) -> Any:  # e.g. the sender's context
        return getattr(self._inner, name)

    async def receive(self) -> Any:
        while True:
            item = await self._inner.receive()
            if not await self._answered(item):
                return item

    def __aiter__(self) -> _Answering:
        return self

    async def __anext__(self) -> Any:
        while True:
            item = await self._inner.__anext__()
            if not await self._answered(item):
                return item

    async def _answered(self, item: Any) -> bool:
        answer = unanswered_request(item) if isinstance(item, Exception) else None
        if answer is not None:
            await self._write.send(answer)
        return answer is not None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _Answering:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        return bool(await self._inner.__aexit__(*exc))


def unanswered_request(exc: Exception) -> Any:
    """The JSON-RPC error answering a request line the SDK could not parse, or None when the
    line is no request with a usable id (the SDK's own handling stands)."""
    from mcp import types
    from mcp.shared.message import SessionMessage

    try:
        first = exc.errors()[0] if hasattr(exc, "errors") else {}
    except (IndexError, TypeError):
        return None
    raw = first.get("input") if isinstance(first, dict) else None
    if first.get("type") != "json_invalid" or not isinstance(raw, str):
        return None
    try:
        request = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(request, dict) or not isinstance(request.get("method"), str):
        return None
    rid = request.get("id")
    if isinstance(rid, bool) or not (isinstance(rid, str) and text_problem(rid) is None
                                     or isinstance(rid, int) and abs(rid) < 2**53):
        return None
    try:
        json.dumps(request, ensure_ascii=False).encode("utf-8")
        why = f"the request is not strict JSON ({first.get('msg', 'invalid JSON')})"
    except UnicodeEncodeError:
        why = "a string in the request holds a lone surrogate (not valid Unicode text)"
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=rid, error=types.ErrorData(
        code=types.INVALID_PARAMS, message=f"invalid params: {why}")))


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


StepList = Annotated[api.SkillSteps | None, Field(
    description="The skill's steps, replacing the recalled ones.")]


def _correction_tools(server: MCPServer, mem: DeltaMem) -> None:
    """correct and forget_node: the agent sets a memory right from inside the session."""
    guard = _library_errors(mem)

    @server.tool(annotations=_hint(read_only=False, title="Correct a memory"), description=(
        "Correct a memory node (an id from recall, learn or list) when it is wrong: "
        "success=true/false sets its outcome right (a 'failed' lesson that in fact worked, or "
        "a skill that in fact failed), steps=[...] replaces a skill's steps, wrong=true "
        "retracts it so recall shows none of it. Give exactly one, and a short reason. The "
        "correction supersedes the node in recall; the old one is kept as its history."))
    @guard
    def correct(
        node_id: Annotated[api.NodeId, Field(description="The node.")],
        success: Annotated[bool | None, Field(description="The outcome set right.")] = None,
        steps: StepList = None,
        wrong: Annotated[bool, Field(description="Retract the experience.")] = False,
        reason: Annotated[api.Reason, Field(description="Why.")] = "",
    ) -> Annotated[CallToolResult, api.CorrectionOut]:
        data = mem.correct(node_id, success=success, steps=steps, wrong=wrong,
                           reason=reason).to_dict()
        text = f"corrected {data['of']} ({data['kind']}): {data['node']} now supersedes it"
        return _result(api.CorrectionOut, data, text)

    @server.tool(annotations=_hint(read_only=False, destructive=True, idempotent=True,
                                   title="Forget a memory node"), description=(
        "Delete a memory node and its whole subtree for good (no history kept): for a memory "
        "that must not be kept at all. To set a memory right instead, use correct."))
    @guard
    def forget_node(node_id: Annotated[api.NodeId, Field(description=(
            "The node; its subtree goes with it."))]) -> Annotated[CallToolResult, api.DeleteOut]:
        data = api.DeleteOut.build(deleted=mem.delete(node_id)).wire()
        return _result(api.DeleteOut, data, f"deleted {len(data['deleted'])} node(s)")


Transport = Literal["stdio", "http"]


class KeyAuth:
    """ASGI layer in front of the MCP HTTP app: every request needs an API key (the REST
    server's, ``Authorization: Bearer dmk_...``) that covers ``space``; 401/403 otherwise, in
    the REST error envelope, and 429 past the key's own request limit. The verified key is left
    in the request state for the tools' scope checks."""

    def __init__(self, app: ASGIApp, keys: KeyStore, space: str):
        from deltamem.faces.server.limits import RateLimiter

        self.app, self.keys, self.space = app, keys, space
        self.limiter = RateLimiter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        import anyio

        token = _bearer(scope)
        key = await anyio.to_thread.run_sync(self.keys.verify, token) if token else None
        if key is None:
            what = "invalid or revoked API key" if token else (
                "missing API key: send 'Authorization: Bearer <key>'")
            await _refuse(send, 401, "Unauthorized", what)
            return
        if not key.covers(self.space):
            await _refuse(send, 403, "Forbidden",
                          f"this API key is not allowed on space {self.space!r}")
            return
        wait = self.limiter.take(key.id, key.rate_limit) if key.rate_limit else None
        if wait is not None:
            await _refuse(send, 429, "RateLimited", f"this API key is limited to "
                          f"{key.rate_limit} requests per minute; retry in {wait} s",
                          retry_after=wait)
            return
        state = scope.setdefault("state", {})
        state[KEY_STATE] = key
        await self.app(scope, receive, send)


def _bearer(scope: Scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            kind, _, token = value.decode("latin-1").partition(" ")
            return (token.strip() or None) if kind.lower() == "bearer" else None
    return None


async def _refuse(send: Send, status: int, kind: str, message: str, *,
                  retry_after: int | None = None) -> None:
    from deltamem.faces.server.http_errors import error_body

    payload = json.dumps(error_body(kind, message)).encode()
    headers = [(b"content-type", b"application/json"),
               (b"content-length", str(len(payload)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    if retry_after is not None:
        headers.append((b"retry-after", str(retry_after).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


def run_server(mem: DeltaMem, *, transport: Transport = "stdio", host: str = "127.0.0.1",
               port: int = 8765, keys: KeyStore | None = None,
               export_root: str | Path | None = None) -> None:
    """Serve ``mem`` over stdio, or streamable HTTP at ``http://host:port/mcp``.

    Args:
        keys: over HTTP, the API keys every request must present (one that covers this space,
            with each tool's scope). None serves HTTP without keys, which is allowed only on a
            loopback address (``ConfigError`` otherwise).
        export_root: the only folder ``export_skills`` may write under (None: refused).
    """
    server = build_server(mem, export_root=export_root)
    if transport == "stdio":
        import anyio

        anyio.run(_serve_stdio, server)
        return
    if keys is None and not is_loopback(host):
        raise ConfigError(f"refusing to serve MCP without API keys on {host!r}: only a loopback "
                          "address (127.0.0.1, ::1) may go without them")
    import uvicorn

    app: ASGIApp = server.streamable_http_app(host=host)
    if keys is not None:
        app = KeyAuth(app, keys, mem.space)
    uvicorn.run(app, host=host, port=port, log_level="warning")

