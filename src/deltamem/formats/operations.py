"""Every operation of the memory, declared once, as a value.

One :class:`Operation` per facade method a remote caller may run: its name (the
:class:`~deltamem.DeltaMem` method, the client method, the REST route's name and, unless it says
otherwise, the MCP tool), the model of its input and of its answer (:mod:`deltamem.formats.api`),
its HTTP method and path under ``/v1/spaces/{space}``, the API-key scope it needs, whether it is
safe to send twice, and the description an agent reads. The faces are derived from
:data:`OPERATIONS`:

* the REST server adds one route per operation (``deltamem.faces.server.rest``);
* the MCP server one tool per operation it offers, and checks the scope in its one dispatcher
  (``deltamem.faces.server.mcp``);
* :class:`deltamem.Client` and :class:`deltamem.AsyncClient` send each one
  (``deltamem.client``), and the TypeScript client is generated from the REST server's OpenAPI
  document, which carries each operation's name and idempotence;
* :class:`deltamem.AsyncDeltaMem` offloads each one (``deltamem.engine.aio``);
* the CLI takes its help texts from here; the parity test runs every operation on every face.

Adding an operation: write the facade method (keyword arguments named as the input model's
fields, plus ``node_id`` for a path holding one, returning the answer model: the library and the
clients answer the same shape, and no face shapes a result itself), its models in
:mod:`deltamem.formats.api`, and one row below. A row marked ``custom`` for a face is written
by hand there (learning takes an episode or a batch, export streams JSON Lines); a row with a
``tool_input`` has an MCP runner.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

from deltamem.formats import api

Scope = Literal["read", "write", "admin"]
Face = Literal["rest", "mcp", "client"]
PREFIX = "/v1/spaces/{space}"
# The help of the node id a path carries (REST's path parameter, the CLI's NODE_ID argument).
NODE_ID_HELP = "A node id, e.g. 't-1a2b3c4d5e6f7a8b'."
_PATH_FIELD = re.compile(r"{(\w+)}")


@dataclass(frozen=True)
class Operation:
    """One operation of the memory (see the module docstring).

    Attributes:
        name: the facade method, client method and REST route name.
        request: the model of its input (the path's ``node_id`` aside).
        answer: the model of its answer.
        method: the HTTP method.
        path: the route under ``/v1/spaces/{space}``; ``{node_id}`` in it is an input too.
        scope: the API-key scope a caller needs.
        idempotent: safe to send twice (a client may retry it after a lost answer).
        summary: one line, for the REST docs and the CLI's help (face-neutral: the CLI's help
            is this line, then what the command adds).
        description: what an agent reads (the MCP tool's description).
        tool: the MCP tool's name (``name`` by default); ``""``: not an MCP tool.
        title: the MCP tool's title.
        destructive: it deletes (an MCP hint).
        query: its input travels as query parameters (GET and DELETE always do).
        custom: faces that write this operation by hand.
        tool_input: the MCP tool's input model when it is not ``request``, or a function
            building it (the MCP server runs such a tool with its own runner).
    """

    name: str
    request: type[BaseModel]
    answer: type[api.Model]
    method: Literal["GET", "POST", "DELETE"]
    path: str
    scope: Scope
    idempotent: bool
    summary: str
    description: str
    tool: str | None = None
    title: str = ""
    destructive: bool = False
    query: bool = False
    custom: frozenset[Face] = frozenset()
    tool_input: type[BaseModel] | Callable[[], type[BaseModel]] | None = None

    @property
    def tool_name(self) -> str:
        return self.name if self.tool is None else self.tool

    @property
    def tool_model(self) -> type[BaseModel]:
        """The MCP tool's input model."""
        given = self.tool_input
        return self.request if given is None else given if isinstance(given, type) else given()

    @property
    def route(self) -> str:
        """The full REST path, ``/v1/spaces/{space}...``."""
        return PREFIX + self.path

    @property
    def path_fields(self) -> tuple[str, ...]:
        """The inputs the path carries (``node_id``)."""
        return tuple(_PATH_FIELD.findall(self.path))

    @property
    def in_query(self) -> bool:
        return self.query or self.method != "POST"

    def on(self, face: Face) -> bool:
        """Whether ``face`` derives this operation from the table (else: by hand, or not)."""
        return face not in self.custom and (face != "mcp" or self.tool != "")

    def arguments(self, request: BaseModel, path: Mapping[str, str] = {}) -> dict[str, Any]:
        """The facade method's keyword arguments for a validated ``request``."""
        return {**{name: path[name] for name in self.path_fields},
                **{name: getattr(request, name) for name in type(request).model_fields}}

    def run(self, mem: Any, request: BaseModel, path: Mapping[str, str] = {}) -> Any:
        """Run the operation on ``mem`` (a :class:`~deltamem.DeltaMem`): the facade's result."""
        return getattr(mem, self.name)(**self.arguments(request, path))

    def answer_of(self, result: Any) -> api.Model:
        """The facade's result, checked to be this operation's answer model (the facade
        returns answers; no face converts one)."""
        if not isinstance(result, self.answer):
            raise TypeError(f"{self.name} answered a {type(result).__name__}, not its answer "
                            f"model {self.answer.__name__}")
        return result


def _custom(*faces: Face) -> frozenset[Face]:
    return frozenset(faces)


FILTERS_HELP = ("Only memories learned from episodes whose meta has every key with an equal "
                "value, e.g. {\"user\": \"alice\", \"project\": \"shop\"} (keys such as "
                "user, agent, run, project; exact match).")

OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "recall", api.RecallRequest, api.RecallOut, "POST", "/recall", "read", idempotent=True,
        title="Recall experience",
        summary="Recall the skill for `task` and the knowledge for `env`, composed root -> match.",
        description=(
            "Call this BEFORE starting a task. Returns what past episodes taught about it: a "
            "skill (numbered steps that worked for a similar goal), warnings from similar "
            "attempts that failed, and facts about a similar scene. The text result starts with "
            "the context block to read before planning; structuredContent holds the matched "
            "node ids and scores. Give the goal in `task` and a short description of where you "
            "are in `env`; either may be empty. Nothing matched means the memory has no similar "
            "experience yet.")),
    Operation(
        "learn", api.EpisodeIn, api.LearnOut, "POST", "/learn", "write", idempotent=False,
        custom=_custom("rest", "client"), tool_input=api.learn_tool_input,
        title="Learn from an episode",
        summary="Learn finished episodes: one, or a batch (a batch is all or nothing).",
        description=(
            "Call this AFTER every attempt at a task, successful or not, so the memory learns "
            "from it. Give either `steps` (each action with what you observed) or `messages` "
            "(the transcript in the OpenAI chat format, with assistant tool_calls and tool "
            "results; the first user message is the task unless `task` is given), plus "
            "`success`. The memory stores only what is new: a new root, an exact delta under a "
            "similar experience, or nothing for a duplicate. Failed attempts become warnings "
            "for next time.")),
    Operation(
        "learn_many", api.EpisodesIn, api.BatchOut, "POST", "/learn", "write", idempotent=False,
        tool="", custom=_custom("rest", "client"),
        summary="Learn a batch of episodes: every one is validated before any is learned.",
        description="Learn a batch of episodes in one transaction (all or nothing)."),
    Operation(
        "record_outcome", api.OutcomeRequest, api.OutcomeOut, "POST", "/outcome", "write",
        idempotent=False, tool_input=api.OutcomeToolIn, title="Record the outcome of a recall",
        summary="Count a success or a failure on recalled nodes, without learning an episode.",
        description=(
            "Count a success or a failure on the nodes the last `recall` returned (or on the "
            "given node ids), when you followed a recalled memory but have no transcript to "
            "`learn` from. Do not call it for an episode you also pass to `learn`: learning "
            "already counts the outcome. Successes make a memory rank as proven; a chain that "
            "keeps succeeding is compiled into a standalone skill.")),
    Operation(
        "correct", api.CorrectRequest, api.CorrectionOut, "POST", "/nodes/{node_id}/correct",
        "write", idempotent=False, title="Correct a memory",
        summary="Correct a node (its outcome, a skill's steps, or retract it): a new root "
                "supersedes it in recall, with the history kept.",
        description=(
            "Correct a memory node (an id from recall, learn or list) when it is wrong: "
            "success=true/false sets its outcome right (a 'failed' lesson that in fact worked, "
            "or a skill that in fact failed), steps=[...] replaces a skill's steps, wrong=true "
            "retracts it so recall shows none of it. Give exactly one, and a short reason. The "
            "correction supersedes the node in recall; the old one is kept as its history.")),
    Operation(
        "forget_fact", api.ForgetFactRequest, api.CorrectionOut, "POST",
        "/nodes/{node_id}/forget-fact", "write", idempotent=False,
        title="Forget one fact of a scene's knowledge",
        summary="Remove one fact from a scene-knowledge node, keeping the others: a new root "
                "supersedes it in recall, with the history kept.",
        description=(
            "Remove one wrong fact from scene knowledge (an environment node id, e-..., from "
            "recall or list) and keep its other facts: fact is the fact's text, its number as "
            "show lists the facts, or a piece of text only it contains. The new root "
            "supersedes the node in recall; the old one is kept as its history. To retract the "
            "whole node, use correct with wrong=true.")),
    Operation(
        "consolidate", api.ConsolidateRequest, api.ConsolidateOut, "POST", "/consolidate",
        "write", idempotent=True, query=True, title="Consolidate chains",
        summary="Compile every frequently successful chain into a new root (dry_run: only list "
                "the chains that are due).",
        description=(
            "Compile every frequently successful chain of experiences into a new standalone "
            "root skill (the chain stays). With dry_run=true nothing is written and the result "
            "lists the chains that are due. Safe to call any time; a second call compiles "
            "nothing new.")),
    Operation(
        "list_nodes", api.ListRequest, api.NodeListOut, "GET", "/nodes", "read",
        idempotent=True, tool="list", title="List nodes",
        summary="Nodes (id, tree, kind, outcome, key, parent, counters), oldest first, filtered.",
        description=(
            "List memory nodes (id, tree, kind, outcome, key, counters) to find ids for show. "
            "Filter by tree ('task' skills or 'env' scene knowledge), kind, outcome, a text the "
            "key contains, or the episodes' meta; `limit` caps the rows (the total is given).")),
    Operation(
        "show", api.NoInput, api.ShowOut, "GET", "/nodes/{node_id}", "read", idempotent=True,
        title="Show a node",
        summary="A node: its chain, composed experience, own patch and counters.",
        description=(
            "Show one memory node by id (from recall, learn or list): its chain from the root, "
            "its full composed experience, its own patch, its children and counters.")),
    Operation(
        "stats", api.NoInput, api.StatsOut, "GET", "/stats", "read", idempotent=True,
        title="Memory statistics", summary="Tree shapes, episodes, and stored vs flat size.",
        description=(
            "Size and shape of the memory: nodes per tree, roots, deltas, failure lessons, "
            "depth, episodes learned, and stored vs flat characters.")),
    Operation(
        "delete", api.NoInput, api.DeleteOut, "DELETE", "/nodes/{node_id}", "admin",
        idempotent=False, tool="forget_node", title="Forget a memory node", destructive=True,
        summary="Delete a node and its whole subtree in one transaction.",
        description=(
            "Delete a memory node and its whole subtree for good (no history kept): for a "
            "memory that must not be kept at all. To set a memory right instead, use correct.")),
    Operation(
        "forget", api.NoInput, api.ForgetOut, "DELETE", "", "admin", idempotent=False, tool="",
        destructive=True, summary="Delete everything in the space.",
        description="Delete every node and episode of the space."),
    Operation(
        "export", api.NoInput, api.ImportOut, "GET", "/export", "read", idempotent=True,
        tool="", custom=_custom("rest", "client"),
        summary="Export the space as JSON Lines (header, nodes with vectors, episodes), "
                "exactly.",
        description="Export the space as JSON Lines."),
    Operation(
        "import_", api.NoInput, api.ImportOut, "POST", "/import", "admin", idempotent=False,
        tool="", custom=_custom("rest", "client"),
        summary="Load an export (JSON Lines) into the space in one transaction, all or "
                "nothing.",
        description="Import an export's JSON Lines into the space."),
    Operation(
        "export_skills", api.NoInput, api.SkillsExportOut, "POST", "", "write",
        idempotent=True, custom=_custom("rest", "client"), tool_input=api.ExportSkillsIn,
        destructive=True,
        title="Export skills as files",
        summary="Write the skills and scene knowledge as Markdown files (SKILL.md folders or "
                "a MEMORY.md index).",
        description=(
            "Write the memory's skills and scene knowledge as Markdown files into a folder on "
            "the machine running this server, inside the export folder its operator configured "
            "(a relative `dir` is taken under it). layout='skills': one <slug>/SKILL.md per "
            "skill root plus knowledge/*.md (the agent-skills layout); layout='memory-md': a "
            "MEMORY.md index with one file per skill chain and knowledge files per scene. "
            "Existing files of the same names are overwritten.")),
)


def operation(name: str) -> Operation:
    """The operation called ``name`` (KeyError if there is none)."""
    for op in OPERATIONS:
        if op.name == name:
            return op
    raise KeyError(name)


def help_of(name: str, field: str | None = None) -> str:
    """The help text of operation ``name`` (its summary), or of one input: a field of its input
    model (the MCP tool's, where it has its own), or the path's ``node_id`` (the CLI's command,
    argument and option help)."""
    op = operation(name)
    if field is None:
        return op.summary
    if field in op.path_fields:
        return NODE_ID_HELP
    model = op.request if field in op.request.model_fields else op.tool_model
    return model.model_fields[field].description or ""


def by_tool(name: str) -> Operation | None:
    """The operation whose MCP tool is ``name``, or None."""
    return next((op for op in OPERATIONS if op.tool != "" and op.tool_name == name), None)


__all__ = ["NODE_ID_HELP", "OPERATIONS", "Operation", "Scope", "by_tool", "help_of",
           "operation"]
