"""The memory's vocabulary: experiences, episodes and nodes.

Pure data, no I/O. Every type here is a frozen, hashable dataclass, so it can be compared,
diffed and cached freely; the one mutable part, an episode's or a node's ``meta`` dict, is left
out of comparison and hashing. Conversion to and from plain JSON-able dicts lives next to each
type so that every adapter (SQLite, Postgres, REST, export files) agrees on one wire form.

There are three kinds of experience:

* ``Skill``      -- procedural memory in the task tree: when it applies (activation), what to do
                    (steps) and when it is done (termination).
* ``Knowledge``  -- declarative memory in the environment tree: where it applies (trigger) and what
                    is true there (facts).
* ``Lesson``     -- a failed episode in the task tree: the situation, the steps that failed (with
                    the reply that showed it), the steps that worked, and what was left untried.
                    Lessons warn; they never instruct.

Each experience declares its scalar (text) fields and its list fields; ``delta.py`` diffs them
generically field by field.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar, TypeAlias


class Tree(StrEnum):
    """Which residual tree a node lives in."""

    TASK = "task"
    ENV = "env"


class NodeKind(StrEnum):
    """A root holds a full experience; a delta holds a patch against the chain above it."""

    ROOT = "root"
    DELTA = "delta"


class Outcome(StrEnum):
    """Outcome of the experience a node encodes. Environment nodes are always successes."""

    SUCCESS = "success"
    FAILURE = "failure"


@dataclass(frozen=True, slots=True)
class Skill:
    """Procedural skill: (activation, steps, termination) -- the paper's (alpha, pi, omega)."""

    activation: str
    steps: tuple[str, ...] = ()
    termination: str = ""

    TYPE: ClassVar[str] = "skill"
    SCALARS: ClassVar[tuple[str, ...]] = ("activation", "termination")
    LISTS: ClassVar[tuple[str, ...]] = ("steps",)


@dataclass(frozen=True, slots=True)
class Knowledge:
    """Declarative scene knowledge: a trigger (where it applies) and facts (what holds there)."""

    trigger: str
    facts: tuple[str, ...] = ()

    TYPE: ClassVar[str] = "knowledge"
    SCALARS: ClassVar[tuple[str, ...]] = ("trigger",)
    LISTS: ClassVar[tuple[str, ...]] = ("facts",)


@dataclass(frozen=True, slots=True)
class Lesson:
    """Failure record: the situation, what failed (and why), what worked, what was left untried.

    ``worked`` comes last so that records written before it existed still construct positionally.
    """

    situation: str
    failed: tuple[str, ...] = ()
    untried: tuple[str, ...] = ()
    worked: tuple[str, ...] = ()

    TYPE: ClassVar[str] = "lesson"
    SCALARS: ClassVar[tuple[str, ...]] = ("situation",)
    LISTS: ClassVar[tuple[str, ...]] = ("failed", "worked", "untried")


Experience: TypeAlias = Skill | Knowledge | Lesson
EXPERIENCE_TYPES: dict[str, type[Skill] | type[Knowledge] | type[Lesson]] = {
    cls.TYPE: cls for cls in (Skill, Knowledge, Lesson)
}


def experience_to_dict(exp: Experience) -> dict[str, Any]:
    """Plain-JSON form of an experience, tagged with its ``type``."""
    out: dict[str, Any] = {"type": exp.TYPE}
    for name in exp.SCALARS:
        out[name] = getattr(exp, name)
    for name in exp.LISTS:
        out[name] = list(getattr(exp, name))
    return out


def experience_from_dict(data: dict[str, Any]) -> Experience:
    """Inverse of :func:`experience_to_dict`; raises ``ValueError`` naming the bad field."""
    kind = data.get("type")
    cls = EXPERIENCE_TYPES.get(str(kind))
    if cls is None:
        raise ValueError(f"experience.type must be one of {sorted(EXPERIENCE_TYPES)}, got {kind!r}")
    kwargs: dict[str, Any] = {}
    for name in cls.SCALARS:
        value = data.get(name, "")
        if not isinstance(value, str):
            raise ValueError(f"experience.{name} must be a string, got {type(value).__name__}")
        kwargs[name] = value
    for name in cls.LISTS:
        items = data.get(name, [])
        if not isinstance(items, list | tuple) or not all(isinstance(i, str) for i in items):
            raise ValueError(f"experience.{name} must be a list of strings")
        kwargs[name] = tuple(items)
    return cls(**kwargs)


def experience_chars(exp: Experience) -> int:
    """Size of an experience as serialised JSON characters (the unit of ``stats``)."""
    return len(json.dumps(experience_to_dict(exp), ensure_ascii=False, separators=(",", ":")))


@dataclass(frozen=True, slots=True)
class Step:
    """One agent turn: the action taken, what the environment answered, optional reasoning.

    ``reward`` is what the environment's score did on this step (its change), when the
    environment reports a score; ``None`` when it does not. The trace extractor reads it to tell
    a rewarded placement from one that earned nothing.
    """

    action: str
    observation: str = ""
    thought: str | None = None
    reward: float | None = None


@dataclass(frozen=True, slots=True)
class Episode:
    """A finished attempt at a task, as the agent hands it to the memory."""

    task: str
    env: str = ""
    steps: tuple[Step, ...] = ()
    success: bool = False
    score: float | None = None
    meta: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    @property
    def outcome(self) -> Outcome:
        return Outcome.SUCCESS if self.success else Outcome.FAILURE

    @classmethod
    def from_messages(cls, messages: Iterable[Mapping[str, Any]], *, success: bool,
                      task: str | None = None, env: str = "", score: float | None = None,
                      meta: dict[str, Any] | None = None, project: str | None = None) -> Episode:
        """An episode from an OpenAI-style chat transcript (assistant tool calls, tool results).

        The task is the first user message unless ``task`` is given; each tool call is a step
        whose observation is its tool result (the rules: :mod:`deltamem.formats.transcripts`; a
        guide with a coding and a web agent: docs/agents.md). ``env`` describes where the agent
        worked: the environment tree's key. ``project`` (a coding agent's repository root)
        makes the key that project's (``scenes.project``) and records it in ``meta``, so that
        its knowledge is scoped to it (``integrations.coding_memory``).

        Raises:
            EpisodeError: no task, no step, or a message that is not an object.
        """
        if not _MESSAGE_READERS:  # pragma: no cover - `import deltamem` registers it
            raise RuntimeError("no transcript reader: import deltamem.formats.transcripts first")
        return _MESSAGE_READERS[-1](messages, success=success, task=task, env=env, score=score,
                                    meta=meta, project=project)


# The reader behind Episode.from_messages: deltamem.formats.transcripts.episode_from_messages,
# registered by that module when it is imported (``import deltamem`` does, and so does importing any
# of its modules, since the package comes first). The core names no module above it.
_MESSAGE_READERS: list[Callable[..., Episode]] = []


def register_message_reader(reader: Callable[..., Episode]) -> None:
    """Make ``reader`` the implementation of :meth:`Episode.from_messages`."""
    _MESSAGE_READERS.append(reader)


@dataclass(frozen=True, slots=True)
class Node:
    """One node of a residual tree, as stored.

    A root carries ``content`` (a full experience); a delta carries ``patch`` (the exact edit from
    its parent's composed experience to its own). ``key`` is the text that was embedded for
    retrieval: the task goal in the task tree, the scene description in the environment tree.
    """

    id: str
    tree: Tree
    kind: NodeKind
    outcome: Outcome
    key: str
    parent_id: str | None = None
    depth: int = 1
    content: Experience | None = None
    patch: Any = None  # delta.Patch; typed loosely here to keep model.py free of delta imports
    hits: int = 0
    successes: int = 0
    failures: int = 0
    consolidated: bool = False
    lineage: tuple[str, ...] = ()
    episode_id: str | None = None
    created_at: float = 0.0
    meta: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    @property
    def is_root(self) -> bool:
        return self.kind is NodeKind.ROOT

    @property
    def is_consolidated_root(self) -> bool:
        """True for roots compiled from a chain by consolidation (they keep their lineage)."""
        return self.is_root and bool(self.lineage)
