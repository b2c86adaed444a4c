"""The environment port of the evaluation harness: one text game, one episode at a time.

Every adapter (ScienceWorld, TextWorldExpress, generated ALFWorld games) reduces its engine to
the same small surface so the agent loop and the runner never see engine-specific types:

* :meth:`Environment.load` picks an episode (an :class:`EpisodeSpec`),
* :meth:`Environment.reset` starts it and returns the memory keys (``task`` for the task tree,
  ``scene`` for the environment tree, as the authors' reference code keys them),
* :meth:`Environment.step` plays one action and returns a :class:`Transition` whose ``score`` is
  normalised to 0..1 and whose ``won`` is the benchmark's success test.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from deltamem.errors import DeltaMemError


class EnvError(DeltaMemError, RuntimeError):
    """An environment was driven out of order (step before reset, step after done, lost JVM)."""


@dataclass(frozen=True)
class EpisodeSpec:
    """Which episode to play.

    The three fields mean the same thing in every adapter: ``task_name`` is the task family
    (ScienceWorld task, TextWorldExpress game, ALFWorld task type), ``variation`` the instance
    number inside it (ScienceWorld variation index, TWX seed, ALFWorld generator seed) and
    ``split`` the partition it was drawn from (train/dev/test; seen/unseen for ALFWorld).
    """

    task_name: str
    variation: int
    split: str


@dataclass(frozen=True)
class Reset:
    """The start of an episode.

    Attributes:
        task: Goal text; the task-tree key and query.
        scene: Scene description; the environment-tree key and query.
        observation: What the agent is shown first (engine banners removed).
        admissible: Valid actions now, or None where the engine does not list them cheaply.
    """

    task: str
    scene: str
    observation: str
    admissible: list[str] | None


@dataclass(frozen=True)
class Transition:
    """The result of one action.

    Attributes:
        observation: The engine's answer to the action.
        score: Progress in 0..1 after this action (engine score, clipped and normalised).
        done: True when the episode is over (won, lost, or out of steps).
        won: True when the benchmark counts the episode as a success.
    """

    observation: str
    score: float
    done: bool
    won: bool


@runtime_checkable
class Environment(Protocol):
    """A text environment that plays one episode at a time.

    Besides the episode loop, an environment states the facts the runner and the agents need
    about it, so that neither ever dispatches on its name:

    * ``instruction`` - the action help shown to the agent;
    * ``fallback_action`` - what is played when a model gives no usable action;
    * ``splits`` - the ``(train, eval)`` split names;
    * ``irreversible`` - prefixes of actions that end the episode when they name the wrong object
      (ScienceWorld's ``focus on``); an agent plays one only when the task or the memory names
      its object;
    * :meth:`specs` - the episodes of a split;
    * optionally ``worlds`` - how the engine makes an episode's world, where that decides what a
      spec plays; the runner records it in the run's configuration, so a run made otherwise is
      not resumed (ScienceWorld: a fresh engine per episode).
    """

    name: str
    max_steps: int
    instruction: str
    fallback_action: str
    splits: tuple[str, str]
    irreversible: tuple[str, ...]

    def specs(self, split: str, *, count: int,
              families: Sequence[str] | None = None) -> list[EpisodeSpec]:
        """Episodes of ``split`` a stream may draw from (at least ``count`` where the engine
        generates them on demand), restricted to task ``families`` when given."""
        ...

    def load(self, spec: EpisodeSpec) -> None:
        """Select the episode that the next :meth:`reset` starts."""
        ...

    def reset(self) -> Reset:
        """Start (or restart) the loaded episode."""
        ...

    def step(self, action: str) -> Transition:
        """Play one action; ``done`` turns true at the latest after ``max_steps`` actions."""
        ...

    def admissible(self) -> list[str] | None:
        """Valid actions in the current state, or None if the engine cannot list them."""
        ...

    def gold_actions(self) -> list[str] | None:
        """A winning action sequence for the loaded episode, or None if there is none."""
        ...

    def close(self) -> None:
        """Release the engine (JVM, files). Safe to call twice."""
        ...


def clip_score(value: float) -> float:
    """Clamp an engine score into 0..1 (engines report failures as negative scores)."""
    return min(1.0, max(0.0, float(value)))


class StepCounter:
    """Counts actions in an episode and refuses to step outside one.

    Shared by the adapters so that "step before reset", "step after done" and the max-steps
    cut-off behave identically everywhere. The budget is passed on every tick so that changing
    an adapter's ``max_steps`` takes effect at once.
    """

    def __init__(self) -> None:
        self.steps = 0
        self.active = False

    def start(self) -> None:
        """Begin a new episode."""
        self.steps = 0
        self.active = True

    def tick(self, env_name: str, max_steps: int) -> bool:
        """Account for one action; returns True when this action uses up ``max_steps``."""
        if not self.active:
            raise EnvError(
                f"{env_name}: step() called with no running episode; call reset() first "
                "(an episode ends when a Transition has done=True)"
            )
        if max_steps < 1:
            raise ValueError(f"{env_name}: max_steps must be at least 1, got {max_steps}")
        self.steps += 1
        return self.steps >= max_steps

    def finish(self) -> None:
        """Mark the episode as over; further steps raise :class:`EnvError`."""
        self.active = False
