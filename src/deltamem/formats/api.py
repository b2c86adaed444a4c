"""One pydantic model per shape: every input and answer of every face, defined once.

* Inputs: the episode (:class:`EpisodeIn`, :class:`StepIn`) is validated by these models on
  every face (``episodes.episode_from_dict``, hence the CLI's JSON Lines files and the REST learn
  body; the MCP ``learn`` tool's arguments); the request bodies (:class:`RecallRequest`, ...)
  and the MCP tools' arguments share the field types below (:data:`TopK`, :data:`Filters`, ...).
* Answers: the library answers each operation as its model (``deltamem.engine.results``: the
  facade returns it, a subclass where it keeps the engine's detail) and dumps it
  (:meth:`Model.wire`); the REST server documents every route with these models (its OpenAPI
  schema at ``/openapi.json``), the MCP tools publish them as output schemas, the CLI's ``--json``
  prints them, and :class:`deltamem.Client` parses every answer into them. A test validates real
  answers of every face against them, both ways (``tests/server/test_parity.py``).

Unknown fields are ignored when parsing an answer, so an older client keeps working against a
newer server that adds fields; building one (:meth:`Model.build`) refuses them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    create_model,
)

from deltamem._util.jsonsafe import text_problem, value_problem

TreeName = Literal["task", "env"]
KindName = Literal["root", "delta"]
OutcomeName = Literal["success", "failure"]
ActionName = Literal["root", "delta", "dedup"]
# Bounds every face applies to a recall (REST body, MCP tool arguments).
MAX_TOP_K = 100
MAX_BUDGET_TOKENS = 1_000_000
MAX_OUTCOME_NODES = 50
MAX_FILTERS = 16  # core.ranking.MAX_FILTERS
# A filter's value: a JSON scalar (core.ranking.check_filters checks the rest).
FilterScalar = str | int | float | bool | None
# Bounds of an episode (every face: REST, MCP, the CLI's files, episode_from_dict).
MAX_TEXT = 100_000  # characters of one text field
MAX_STEPS = 1_000  # steps of one episode
MAX_BATCH = 1_000  # episodes of one batch
MAX_NODE_ID = 200
MAX_REASON = 4_000
MAX_SKILL_STEPS = 200


def _storable(text: str) -> str:
    problem = text_problem(text)
    if problem:
        raise ValueError(problem)
    return text


def _not_blank(text: str) -> str:
    if not text.strip():
        raise ValueError("must not be empty")
    return text


def _null_is_empty(value: Any) -> Any:
    return "" if value is None else value


def _plain_json(value: dict[str, Any]) -> dict[str, Any]:
    problem = value_problem(value, "meta")
    if problem:
        raise ValueError(problem)
    return value


# -- shared field types ---------------------------------------------------------------------------
# Each input field is declared once here and used by the request models below and by the MCP
# tools' arguments (a face may add its own description; the bounds and checks are these).
# A text a store can hold (no NUL, no lone surrogate), at most MAX_TEXT characters.
Text = Annotated[StrictStr, Field(max_length=MAX_TEXT), AfterValidator(_storable)]
RequiredText = Annotated[Text, Field(min_length=1), AfterValidator(_not_blank)]
OptionalText = Annotated[Text, BeforeValidator(_null_is_empty)]  # omitted or null reads as ""
Number = Annotated[float | None, Field(allow_inf_nan=False)]  # finite; a boolean is no number
# Plain JSON kept with an episode (finite numbers, storable strings, bounded nesting).
Meta = Annotated[dict[str, Any], AfterValidator(_plain_json)]
QueryText = Annotated[str, Field(max_length=MAX_TEXT)]
TopK = Annotated[StrictInt, Field(ge=1, le=MAX_TOP_K)]
BudgetTokens = Annotated[StrictInt, Field(ge=0, le=MAX_BUDGET_TOKENS)]
Filters = Annotated[dict[str, FilterScalar], Field(max_length=MAX_FILTERS)]
NodeId = Annotated[str, Field(min_length=1, max_length=MAX_NODE_ID)]
NodeIds = Annotated[list[NodeId], Field(max_length=MAX_OUTCOME_NODES)]
SkillSteps = Annotated[list[Annotated[str, Field(max_length=MAX_REASON)]],
                       Field(max_length=MAX_SKILL_STEPS)]
Reason = Annotated[str, Field(max_length=MAX_REASON)]


class Model(BaseModel):
    """Base of the wire models: frozen, unknown fields ignored (when a client parses). Each is
    built when first used (``defer_build``): a process that answers one operation, such as the
    hook daemon, does not pay for all of them at import."""

    model_config = ConfigDict(frozen=True, extra="ignore", defer_build=True)

    @classmethod
    def build(cls, **fields: Any) -> Self:
        """The model of these fields, as the library builds an answer: a field the model does
        not declare is an error here (a client parsing an answer ignores one instead)."""
        unknown = sorted(set(fields) - set(cls.model_fields))
        if unknown:
            raise TypeError(f"{cls.__name__} has no field {unknown[0]!r}")
        return cls(**fields)

    def wire(self) -> dict[str, Any]:
        """The JSON answer: the fields that were given, in the model's order."""
        return self.model_dump(mode="json", exclude_unset=True)


def request_body(model: type[BaseModel], **fields: Any) -> dict[str, Any]:
    """The JSON body of a request to ``model`` as a client sends it: the given fields that are
    not None. Not validated here (the server answers a bad one with a 422 naming the field), but
    a field the model does not declare is an error."""
    unknown = sorted(set(fields) - set(model.model_fields))
    if unknown:
        raise TypeError(f"{model.__name__} has no field {unknown[0]!r}")
    return {name: value for name, value in fields.items() if value is not None}


# -- errors ---------------------------------------------------------------------------------------
class ErrorDetail(Model):
    type: str = Field(description="The error class, e.g. EpisodeError, NodeNotFound.")
    message: str = Field(description="What went wrong and what to do about it.")
    field: str | None = Field(None, description="The field to blame, when there is one.")


class ErrorBody(Model):
    """Every error answer (4xx and 5xx) has this body."""

    error: ErrorDetail


# -- requests -------------------------------------------------------------------------------------
# Like the answers, each request model is built when first used (``defer_build``).
class RecallRequest(BaseModel):
    """Body of ``POST /v1/spaces/{space}/recall``."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    task: QueryText = Field("", description="The goal (task-tree key).")
    env: QueryText = Field("", description="The scene (env-tree key).")
    top_k: TopK | None = Field(None, description="Candidates reported per tree.")
    explain: StrictBool = Field(False, description="Add every scoring term per candidate.")
    budget_tokens: BudgetTokens | None = Field(
        None, description="Cap the context at this many tokens (most useful parts first).")
    filters: Filters | None = Field(
        None,
        description="Only nodes written by an episode whose meta has every key with an equal "
                    "value (exact JSON equality), e.g. {\"user\": \"alice\", \"project\": "
                    "\"shop\"}. Scoping keys: user, agent, run, project; any other key works "
                    "the same.")


def _pairs(value: Any) -> Any:
    """Filters given as ``key=value`` texts (a query string's repeated ``filters``), as a dict;
    a bad pair is left for the dict check to refuse."""
    if not isinstance(value, list | tuple):
        return value
    out: dict[str, Any] = {}
    for pair in value:
        key, sep, text = str(pair).partition("=")
        if not sep or not key:
            raise ValueError(f"filter {pair!r} must be key=value, e.g. user=alice")
        if key in out:
            raise ValueError(f"filter {key!r} is given twice; give each key once")
        out[key] = text
    return out


# Filters of a listing: a JSON object, or key=value texts (a query string's repeated `filters`).
ListFilters = Annotated[Filters, BeforeValidator(_pairs)]


class NoInput(BaseModel):
    """The input of an operation that takes none beyond the space (and a path's node id)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)


class ListRequest(BaseModel):
    """Query of ``GET /v1/spaces/{space}/nodes``."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    tree: TreeName | None = Field(None, description="Only this tree: 'task' skills or 'env' "
                                                    "scene knowledge.")
    kind: KindName | None = Field(None, description="Only roots or only deltas.")
    outcome: OutcomeName | None = Field(None, description="Only successes or only failure "
                                                          "lessons.")
    contains: str = Field("", max_length=10_000, description=(
        "Only nodes whose key contains this text (case-insensitive)."))
    limit: int | None = Field(None, ge=1, description="At most this many rows (all when "
                                                      "omitted).")
    filters: ListFilters | None = Field(None, description=(
        "Only nodes whose episode meta has every key with an equal value, e.g. {\"user\": "
        "\"alice\"}; in a query string, key=value, repeatable (the values are strings)."))


class ConsolidateRequest(BaseModel):
    """Query of ``POST /v1/spaces/{space}/consolidate``."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    dry_run: bool = Field(False, description="Only report the chains that are due.")


class OutcomeRequest(BaseModel):
    """Body of ``POST /v1/spaces/{space}/outcome``."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    nodes: NodeIds = Field(
        min_length=1,
        description="Node ids to count the outcome on (e.g. the nodes a recall matched).")
    success: StrictBool = Field(description="Whether following the memory worked.")


class StepIn(BaseModel):
    """One step of an episode: what the agent did and what came back."""

    model_config = ConfigDict(extra="forbid", defer_build=True, strict=True)

    action: RequiredText = Field(description="The action taken, e.g. 'open door to kitchen'.")
    observation: OptionalText = Field("", description="What the environment answered.")
    thought: Text | None = Field(None, description="The agent's reasoning before the action, "
                                                   "if any.")
    reward: Number = Field(None, description=(
        "What the environment's score did on this step (its change), if it reports one."))


class EpisodeIn(BaseModel):
    """One finished episode: the one validator of an episode's JSON on every face (the REST
    body, the MCP ``learn`` tool, the CLI's JSON Lines files, ``episode_from_dict``); an error
    names the bad field."""

    model_config = ConfigDict(extra="forbid", defer_build=True, strict=True)

    task: RequiredText = Field(description="The goal: the task-tree key.")
    env: OptionalText = Field("", description="The scene description: the environment-tree key.")
    success: bool = Field(description="Whether the goal was achieved.")
    score: Number = Field(None, description="The episode's reward or score, if any.")
    steps: list[StepIn] = Field(default_factory=list, max_length=MAX_STEPS,
                                description="Every step, in order.")
    meta: Meta = Field(default_factory=dict, description=(
        "Kept with the episode (plain JSON), e.g. {\"user\": \"alice\"}; recall and list "
        "can filter on it."))


class EpisodesIn(BaseModel):
    """A batch: every episode is validated before any is learned."""

    model_config = ConfigDict(extra="forbid", defer_build=True, strict=True)

    episodes: list[EpisodeIn] = Field(max_length=MAX_BATCH)


class FunctionIn(BaseModel):
    model_config = ConfigDict(defer_build=True)

    name: str = Field(min_length=1, max_length=200)
    arguments: str | dict[str, Any] = Field("", description="JSON text or an object.")


class ToolCallIn(BaseModel):
    model_config = ConfigDict(defer_build=True)

    id: str | None = Field(None, max_length=200)
    type: Literal["function"] = "function"
    function: FunctionIn


class MessageIn(BaseModel):
    """One chat message in the OpenAI format (assistant tool calls, tool results)."""

    model_config = ConfigDict(defer_build=True)

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None
    tool_calls: list[ToolCallIn] | None = Field(None, max_length=MAX_STEPS)
    tool_call_id: str | None = Field(None, max_length=200)


def learn_tool_input() -> type[BaseModel]:
    """The MCP ``learn`` tool's arguments: an episode as steps, or as the transcript. Built from
    :class:`EpisodeIn` as it is now, so a field added to the episode reaches the tool too."""
    episode = EpisodeIn.model_fields

    def field(name: str, description: str, optional: bool = True) -> Any:
        info = episode[name]
        kind: Any = (Annotated[(info.annotation, *info.metadata)] if info.metadata
                     else info.annotation)
        return (kind | None if optional else kind,
                Field(None if optional else info.default, description=description))

    return create_model(
        "LearnToolIn", __config__=ConfigDict(extra="forbid"),
        success=(bool, Field(description="Whether the goal was achieved.")),
        task=(Text | None, Field(None, description="The goal of the episode (required with "
                                                   "`steps`).")),
        steps=field("steps", "Every step, in order."),
        messages=(list[MessageIn] | None, Field(None, max_length=4 * MAX_STEPS, description=(
            "The transcript, instead of `steps`."))),
        env=field("env", "A short description of the scene.", optional=False),
        score=field("score", "Optional reward or score.", optional=False),
        meta=field("meta", "Optional metadata kept with the nodes."))


class OutcomeToolIn(BaseModel):
    """The MCP ``record_outcome`` tool's arguments (the session's last recall by default)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    success: StrictBool = Field(description="Whether following the memory worked.")
    node_ids: NodeIds | None = Field(None, description=(
        "Node ids to count; default: the nodes the last recall matched."))


class ExportSkillsIn(BaseModel):
    """The MCP ``export_skills`` tool's arguments."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    dir: str = Field(min_length=1, max_length=4096, description=(
        "Folder to write into (created if missing), inside the server's export folder."))
    layout: Literal["skills", "memory-md"] = Field("skills", description="File layout.")


# -- usage ----------------------------------------------------------------------------------------
class UsageOut(Model):
    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    llm_calls_saved: int
    embed_calls: int
    embed_texts: int
    wall_ms: float
    total_tokens: int


# -- recall ---------------------------------------------------------------------------------------
class SkillOut(Model):
    activation: str
    steps: list[str]
    termination: str


class KnowledgeOut(Model):
    trigger: str
    facts: list[str]


class LessonOut(Model):
    situation: str
    failed: list[str] = Field(description="Each failed step with the reply that showed it.")
    worked: list[str] = Field(description="Steps of the failed attempt that worked.")
    untried: list[str]


class LinkOut(Model):
    """One node of the recalled chain, root first."""

    id: str
    kind: KindName
    outcome: OutcomeName
    similarity: float
    score: float


class TreeRecallOut(Model):
    matched: bool
    node: str | None = Field(description="The matched node (the end of the chain).")
    score: float | None
    chain: list[LinkOut]

    @property
    def node_id(self) -> str | None:
        """The matched node's id (as the library's ``TreeRecall.node_id``)."""
        return self.node


LESSON_HELP = "Only when the match is a failure."


class TaskRecallOut(TreeRecallOut):
    skill: SkillOut | None = Field(description="The chain's successful prefix, composed.")
    lesson: LessonOut | None = Field(None, description=LESSON_HELP)


class EnvRecallOut(TreeRecallOut):
    knowledge: KnowledgeOut | None
    lesson: LessonOut | None = Field(None, description=LESSON_HELP)


class CandidateOut(Model):
    id: str
    similarity: float
    failure: bool
    discredited: bool = Field(description="A success scored as a failure: its record is mostly "
                                          "failures.")
    penalty: float
    score: float
    depth: int
    clears_threshold: bool


class TreeExplainOut(Model):
    tree: TreeName
    key: str
    threshold: float
    penalty: float
    matched: bool
    candidates: list[CandidateOut]


class ExplainOut(Model):
    task: TreeExplainOut
    env: TreeExplainOut


class RecallOut(Model):
    task: TaskRecallOut
    env: EnvRecallOut
    context: str = Field(description="The text to put in the agent's prompt ('' if nothing).")
    context_tokens: int = Field(description="Length of the context (deltamem's token estimate).")
    usage: UsageOut
    explain: ExplainOut | None = Field(None, description="Only with explain=true.")


# -- learn ----------------------------------------------------------------------------------------
class WriteOut(Model):
    action: ActionName
    node: str | None
    parent: str | None
    note: str | None = None


class ConsolidationOut(Model):
    source: str
    root: str | None = Field(description="The new root (None in a dry run).")
    tree: TreeName
    chain: list[str]
    note: str


class LearnOut(Model):
    episode: str
    task: WriteOut
    env: WriteOut
    recalled: list[str] = Field(description="Nodes the agent was handed that counted the outcome.")
    consolidated: list[ConsolidationOut]
    deferred: list[str] = Field(default=[], description="Nodes whose due consolidation failed "
                                "(the model or store); the episode is stored, do not resend it.")
    usage: UsageOut


class BatchResultOut(LearnOut):
    index: int = Field(description="Position in the batch.")
    line: int | None = Field(None, description="The episode's line in its file (the CLI's "
                                               "`learn FILE` only).")


class BatchErrorOut(Model):
    """A bad line the CLI's ``learn FILE`` skipped (nothing of it was learned)."""

    line: int
    field: str | None = Field(description="The field to blame, when there is one.")
    error: str = Field(description="What is wrong with the line.")


class BatchOut(Model):
    episodes: int
    results: list[BatchResultOut]
    errors: list[BatchErrorOut] = Field(description=(
        "Bad lines the CLI skipped; always empty over REST, where a batch is all or nothing."))
    usage: UsageOut


class OutcomeOut(Model):
    nodes: list[str] = Field(description="The nodes whose counters were bumped.")
    success: bool
    consolidated: list[ConsolidationOut]
    deferred: list[str] = Field(default=[], description="Nodes whose due consolidation failed; "
                                "the outcome is counted, do not resend it.")


class ConsolidateOut(Model):
    dry_run: bool = Field(description="True: nothing was compiled, only the due chains listed.")
    consolidated: list[ConsolidationOut]


# -- inspection -----------------------------------------------------------------------------------
class SkillExperience(SkillOut):
    type: Literal["skill"]


class KnowledgeExperience(KnowledgeOut):
    type: Literal["knowledge"]


class LessonExperience(LessonOut):
    type: Literal["lesson"]


Experience = Annotated[SkillExperience | KnowledgeExperience | LessonExperience,
                       Field(discriminator="type")]


class NodeStatsOut(Model):
    hits: int
    successes: int
    failures: int
    depth: int
    consolidated: bool
    consolidated_root: bool
    lineage: list[str]
    episode: str | None
    created_at: float
    key: str


class ShowOut(Model):
    id: str
    tree: TreeName
    kind: KindName
    outcome: OutcomeName
    parent: str | None
    chain: list[str] = Field(description="Node ids, root first.")
    experience: Experience = Field(description="The composed experience of the chain.")
    patch: list[list[Any]] | None = Field(
        description='A delta\'s own patch operations, e.g. ["splice", "steps", 1, 1, ["x"]].')
    children: list[str]
    stats: NodeStatsOut
    meta: dict[str, Any]


class NodeRowOut(Model):
    id: str
    tree: TreeName
    kind: KindName
    outcome: OutcomeName
    key: str
    parent: str | None
    depth: int
    hits: int
    successes: int
    failures: int
    consolidated_root: bool


class NodeListOut(Model):
    nodes: list[NodeRowOut]
    total: int = Field(description="Matching nodes before the limit.")
    truncated: bool


class TreeStatsOut(Model):
    nodes: int
    roots: int
    deltas: int
    failures: int
    consolidated_roots: int
    max_depth: int
    by_depth: dict[str, int]
    stored_chars: int = 0  # the tree's node rows (texts kept once per space not included)


class TextsStatsOut(Model):
    """The steps and facts a space keeps once (``store.texts``)."""

    count: int
    chars: int


class StatsOut(Model):
    task: TreeStatsOut
    env: TreeStatsOut
    episodes: int
    texts: TextsStatsOut | None = None
    stored_chars: int
    flat_chars: int
    compression: float | None


class SkillsExportOut(Model):
    """What ``skills export`` wrote (paths relative to ``dir``)."""

    dir: str
    layout: Literal["skills", "memory-md"]
    skills: list[str]
    knowledge: list[str]
    index: str | None = Field(None, description="The MEMORY.md index (memory-md layout).")
    lessons: list[str] | None = Field(None, description="Failure lessons (memory-md layout).")


# -- admin ----------------------------------------------------------------------------------------
class DeleteOut(Model):
    deleted: list[str]


class ForgetOut(Model):
    space: str
    deleted_nodes: int


class ImportOut(Model):
    nodes: int
    episodes: int


class HealthOut(Model):
    status: Literal["ok"]


class ReadyOut(Model):
    status: Literal["ready", "unavailable"]
    spaces: int | None = None
    error: str | None = None


# -- corrections ----------------------------------------------------------------------------------
class CorrectRequest(BaseModel):
    """Body of ``POST /v1/spaces/{space}/nodes/{node_id}/correct``: exactly one of ``success``,
    ``steps`` or ``wrong`` (see ``deltamem.engine.corrections``)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    success: StrictBool | None = Field(None, description=(
        "The outcome set right: true turns a lesson into a skill, false a skill into a lesson."))
    steps: SkillSteps | None = Field(
        None, description="The skill's steps, replacing the recalled ones.")
    wrong: StrictBool = Field(False, description="Retract the experience: recall shows none of it.")
    reason: Reason = Field("", description="Why (kept with the correction).")


class ForgetFactRequest(BaseModel):
    """Body of ``POST /v1/spaces/{space}/nodes/{node_id}/forget-fact``."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    fact: Annotated[str, Field(min_length=1, max_length=MAX_REASON)] = Field(description=(
        "The fact: its text, its number as `show` lists the composed facts (1-based), or a "
        "piece of text only it contains."))
    reason: Reason = Field("", description="Why (kept with the correction).")


class CorrectionOut(Model):
    node: str = Field(description="The correction root, which now supersedes the node in recall.")
    of: str = Field(description="The corrected node (kept, as the correction's lineage).")
    kind: Literal["outcome", "steps", "wrong", "fact"]
    tree: Literal["task", "env"]
    reason: str
    discredited: list[str] = Field(description=(
        "Success nodes of the same task given the failures that make recall score them as "
        "failures (a correction to failure or wrong)."))

