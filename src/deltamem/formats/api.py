"""The JSON the REST server sends and accepts, as pydantic models (also the CLI's ``--json``).

The server documents every route with these models (its OpenAPI schema at ``/openapi.json``),
and :class:`deltamem.Client` parses every answer into them, so a client gets typed results.
A test validates real answers of every route against them, both ways: a field the server sends
that a model lacks, or one a model declares that the server never sends, fails it.

Unknown fields are ignored when parsing, so an older client keeps working against a newer
server that adds fields.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt

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


class Model(BaseModel):
    """Base of the wire models: frozen, unknown fields ignored."""

    model_config = ConfigDict(frozen=True, extra="ignore")


# -- errors ---------------------------------------------------------------------------------------
class ErrorDetail(Model):
    type: str = Field(description="The error class, e.g. EpisodeError, NodeNotFound.")
    message: str = Field(description="What went wrong and what to do about it.")
    field: str | None = Field(None, description="The field to blame, when there is one.")


class ErrorBody(Model):
    """Every error answer (4xx and 5xx) has this body."""

    error: ErrorDetail


# -- requests -------------------------------------------------------------------------------------
class RecallRequest(BaseModel):
    """Body of ``POST /v1/spaces/{space}/recall``."""

    model_config = ConfigDict(extra="forbid")

    task: str = Field("", max_length=100_000, description="The goal (task-tree key).")
    env: str = Field("", max_length=100_000, description="The scene (env-tree key).")
    top_k: StrictInt | None = Field(None, ge=1, le=MAX_TOP_K,
                                    description="Candidates reported per tree.")
    explain: StrictBool = Field(False, description="Add every scoring term per candidate.")
    budget_tokens: StrictInt | None = Field(
        None, ge=0, le=MAX_BUDGET_TOKENS,
        description="Cap the context at this many tokens (most useful parts first).")
    filters: dict[str, FilterScalar] | None = Field(
        None, max_length=MAX_FILTERS,
        description="Only nodes written by an episode whose meta has every key with an equal "
                    "value (exact JSON equality), e.g. {\"user\": \"alice\", \"project\": "
                    "\"shop\"}. Scoping keys: user, agent, run, project; any other key works "
                    "the same.")


class OutcomeRequest(BaseModel):
    """Body of ``POST /v1/spaces/{space}/outcome``."""

    model_config = ConfigDict(extra="forbid")

    nodes: list[Annotated[str, Field(min_length=1, max_length=200)]] = Field(
        min_length=1, max_length=MAX_OUTCOME_NODES,
        description="Node ids to count the outcome on (e.g. the nodes a recall matched).")
    success: StrictBool = Field(description="Whether following the memory worked.")


class StepIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    action: str = Field(description="What the agent did.")
    observation: str = Field("", description="What the environment answered.")
    thought: str | None = Field(None, description="The agent's reasoning, if any.")
    reward: float | None = Field(None, description=(
        "What the environment's score did on this step (its change), if it reports one."))


class EpisodeIn(BaseModel):
    """One finished episode (the server validates it field by field, naming the bad one)."""

    model_config = ConfigDict(extra="forbid")

    task: str = Field(description="The goal: the task-tree key.")
    env: str = Field("", description="The scene description: the environment-tree key.")
    success: bool
    score: float | None = None
    steps: list[StepIn] = Field(default_factory=list, max_length=1_000)
    meta: dict[str, Any] = Field(default_factory=dict, description="Kept with the episode.")


class EpisodesIn(BaseModel):
    """A batch: every episode is validated before any is learned."""

    model_config = ConfigDict(extra="forbid")

    episodes: list[EpisodeIn] = Field(max_length=1_000)


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
    lesson: LessonOut | None = Field(None, description="Only when the match is a failure.")


class TaskRecallOut(TreeRecallOut):
    skill: SkillOut | None = Field(description="The chain's successful prefix, composed.")


class EnvRecallOut(TreeRecallOut):
    knowledge: KnowledgeOut | None


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


class BatchOut(Model):
    episodes: int
    results: list[BatchResultOut]
    errors: list[dict[str, Any]]
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


class StatsOut(Model):
    task: TreeStatsOut
    env: TreeStatsOut
    episodes: int
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

    model_config = ConfigDict(extra="forbid")

    success: StrictBool | None = Field(None, description=(
        "The outcome set right: true turns a lesson into a skill, false a skill into a lesson."))
    steps: list[Annotated[str, Field(max_length=4000)]] | None = Field(
        None, max_length=200, description="The skill's steps, replacing the recalled ones.")
    wrong: StrictBool = Field(False, description="Retract the experience: recall shows none of it.")
    reason: str = Field("", max_length=4000, description="Why (kept with the correction).")


class CorrectionOut(Model):
    node: str = Field(description="The correction root, which now supersedes the node in recall.")
    of: str = Field(description="The corrected node (kept, as the correction's lineage).")
    kind: Literal["outcome", "steps", "wrong"]
    tree: Literal["task", "env"]
    reason: str
    discredited: list[str] = Field(description=(
        "Success nodes of the same task given the failures that make recall score them as "
        "failures (a correction to failure or wrong)."))

