"""ScienceWorld (the official ``scienceworld`` package: 30 tasks, train/dev/test variations).

One JVM per process at a time, and a fresh one for every episode: the engine's world for a
task and variation depends on what its JVM loaded before (chemistry-mix variation 27, loaded
again after three other episodes, lists its room's cups in another order and names its valid
actions differently; rerun in a new process, 4 of DeltaMem's 40 test episodes played
differently). So :meth:`ScienceWorldEnvironment.load` starts a new JVM and an episode is a
function of its spec: every memory arm plays the same world. A fresh JVM alone was not enough
on another machine (see ``CONSTANT_IDENTITY_HASH``): the engine is started with constant
identity hashes, so the world is the same on every machine too. The price is a cold engine every
episode: the no-memory agent's 12-step episodes took 18.5 s instead of 12.2 s (measured on the
2-core VM, 40 test episodes). Every :class:`ScienceWorldEnvironment` in a process shares that
one server; only one of them may drive it at a time, and an adapter whose episode was replaced
by another adapter's ``load`` raises :class:`EnvError` instead of playing the wrong game.

Scores: the engine reports progress in 0..1 (negative when the task is failed, e.g. focusing on
the wrong object). :class:`Transition.score` clips it to 0..1; success is ``score >= 1`` as in the
paper. The split lists come from the package itself
(``get_variations_train/dev/test``); the paper's ETO/MPO index files are not shipped with it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from deltamem.errors import ConfigError
from deltamem_bench.envs.base import (
    EnvError,
    EpisodeSpec,
    Reset,
    StepCounter,
    Transition,
    clip_score,
)

SPLITS = ("train", "dev", "test")
DEFAULT_MAX_STEPS = 30
DEFAULT_SIMPLIFICATION = "easy"

# The engine keeps a room's objects in hash sets of identity-hashed objects, so the order it
# lists them in (and the names of its valid actions) follows the JVM's identity hashes, which
# HotSpot draws per thread: in a fresh JVM chemistry-mix variation 27 listed its cups in one
# order on this VM and in another on the CI machine. A constant identity hash (HotSpot's
# ``hashCode=2``) makes the order the order of creation, the same on every machine; it costs
# about 7 ms a step and 5 ms an action list (measured: 31 against 24 ms, 58 against 53 ms).
CONSTANT_IDENTITY_HASH = "-XX:+UnlockExperimentalVMOptions -XX:hashCode=2"

_lock = threading.Lock()
_server: Any = None  # the shared scienceworld.ScienceWorldEnv (untyped package)
_owner: object | None = None  # the adapter whose episode is loaded in the shared server


def _shared_server() -> Any:
    """Start the process-wide ScienceWorld JVM on first use and return it."""
    global _server
    with _lock:
        if _server is None:
            try:
                from scienceworld import ScienceWorldEnv
            except ImportError as exc:  # the harness extra is optional
                raise ConfigError(
                    "ScienceWorld needs the 'scienceworld' package and Java: "
                    "pip install 'deltamem[harness]'"
                ) from exc
            # envStepLimit is the engine's own cut-off; ours (max_steps) is enforced in Python,
            # so set the engine's high enough never to fire first.
            with _jvm_options(CONSTANT_IDENTITY_HASH):
                _server = ScienceWorldEnv("", envStepLimit=10_000)
        return _server


@contextmanager
def _jvm_options(options: str) -> Iterator[None]:
    """Hand ``options`` to the JVMs started inside the block (the package's launcher takes
    none), through the JVM's documented ``JAVA_TOOL_OPTIONS`` variable."""
    before = os.environ.get("JAVA_TOOL_OPTIONS")
    os.environ["JAVA_TOOL_OPTIONS"] = f"{before} {options}" if before else options
    try:
        yield
    finally:
        if before is None:
            del os.environ["JAVA_TOOL_OPTIONS"]
        else:
            os.environ["JAVA_TOOL_OPTIONS"] = before


def _restart_server() -> Any:
    """Stop the shared JVM, if any, and start a fresh one (see the module docstring: why)."""
    shutdown_jvm()
    return _shared_server()


def shutdown_jvm() -> None:
    """Stop the shared ScienceWorld JVM (it also dies with the process)."""
    global _server, _owner
    with _lock:
        if _server is not None:
            _server.close()
        _server = None
        _owner = None


INSTRUCTION = (
    "You are an agent in ScienceWorld, a text simulation of a house with rooms (kitchen, "
    "bathroom, workshop, art studio, greenhouse, outside, foundry, hallway, bedroom, living "
    "room). You can teleport to any room; containers are already open. Each turn, answer with "
    "exactly one line:\nAction: <one action>\nYou may write one line 'Thought: ...' before it. "
    "Actions: look around, look at OBJ, inventory, teleport to LOC, pick up OBJ, put down OBJ, "
    "move OBJ to OBJ, open OBJ, close OBJ, activate OBJ, deactivate OBJ, use OBJ on OBJ, "
    "pour OBJ into OBJ, mix OBJ, focus on OBJ, wait, wait1, read OBJ, connect OBJ to OBJ, "
    "eat OBJ. 'focus on' marks the object the task is about: use it only on that object."
)


def task_names() -> list[str]:
    """The 30 ScienceWorld task names, in the package's order."""
    return list(_shared_server().get_task_names())


class ScienceWorldEnvironment:
    """A ScienceWorld episode driver implementing :class:`~deltamem_bench.envs.base.Environment`.

    Args:
        max_steps: Actions per episode before ``done`` is forced (the paper uses more; 30 keeps
            quick runs quick).
        simplification: ScienceWorld simplification string; "easy" (teleport, open doors and
            containers, self-watering pots, no electrical actions where allowed) as in the paper.
        gold_paths: Ask the engine for a gold path on every ``load`` (costs 0.1-9 s per load
            depending on the task), needed for :meth:`gold_actions`.
        list_admissible: Put the valid-action list into :class:`Reset` (about 70 ms, hundreds
            of entries); :meth:`admissible` works either way.
    """

    name = "scienceworld"
    instruction = INSTRUCTION
    fallback_action = "look around"
    splits = ("train", "test")
    # Focusing on the wrong object ends the episode with a negative score.
    irreversible: tuple[str, ...] = ("focus on",)
    # Recorded in a run's configuration, so that a run whose episodes shared a JVM is not resumed.
    worlds = "a fresh engine per episode, constant identity hashes"

    def __init__(self, *, max_steps: int = DEFAULT_MAX_STEPS,
                 simplification: str = DEFAULT_SIMPLIFICATION, gold_paths: bool = False,
                 list_admissible: bool = False) -> None:
        self.max_steps = max_steps
        self.simplification = simplification
        self.gold_paths = gold_paths
        self.list_admissible = list_admissible
        self._counter = StepCounter()
        self._spec: EpisodeSpec | None = None
        self._splits: dict[str, dict[str, list[int]]] = {}
        self._closed = False

    # -- episode selection ---------------------------------------------------------------

    def variations(self, task_name: str, split: str) -> list[int]:
        """Variation indices of ``task_name`` in ``split`` (train/dev/test), from the package."""
        if split not in SPLITS:
            raise ConfigError(f"unknown ScienceWorld split {split!r}; use one of {SPLITS}")
        if task_name not in self._splits:
            server = self._claim()
            self._check_task(task_name)
            server.load(task_name, 0, self.simplification, generateGoldPath=False)
            self._splits[task_name] = {
                "train": list(server.get_variations_train()),
                "dev": list(server.get_variations_dev()),
                "test": list(server.get_variations_test()),
            }
            # Loading for the split lists replaced whatever episode was loaded.
            self._spec = None
        return self._splits[task_name][split]

    def specs(self, split: str, *, count: int,
              families: Sequence[str] | None = None) -> list[EpisodeSpec]:
        """Every variation of ``split`` of the given tasks (default: all 30), task by task."""
        return list(episode_specs(self, split, tasks=families))

    def load(self, spec: EpisodeSpec) -> None:
        """Load ``spec`` (task name, variation index, split) into the shared engine."""
        self._check_open()
        if spec.variation not in self.variations(spec.task_name, spec.split):
            raise ConfigError(
                f"variation {spec.variation} of {spec.task_name!r} is not in the "
                f"{spec.split!r} split; list them with variations(task, split)"
            )
        server = self._claim(fresh=True)
        server.load(spec.task_name, spec.variation, self.simplification,
                    generateGoldPath=self.gold_paths)
        self._spec = spec
        self._counter.finish()

    # -- playing -------------------------------------------------------------------------

    def reset(self) -> Reset:
        """Start the loaded episode; ``task`` is taskDesc, ``scene`` the first observation."""
        server = self._server_for_episode()
        server.server.reset()
        observation = str(server.server.step("look around"))
        task = str(server.taskdescription())
        self._counter.start()
        admissible = self.admissible() if self.list_admissible else None
        return Reset(task=task, scene=observation, observation=observation,
                     admissible=admissible)

    def step(self, action: str) -> Transition:
        """Play ``action``.

        Calls the Java side directly instead of ``ScienceWorldEnv.step``: that method also
        computes look, inventory and the full valid-action list on every call, which makes a
        step 5-10x slower (measured about 150 ms against 15 ms) for data we do not use.
        """
        server = self._server_for_episode()
        out_of_steps = self._counter.tick(self.name, self.max_steps)
        observation = str(server.server.step(action))
        raw = float(server.server.getScore())
        won = raw >= 1.0
        done = bool(server.server.getCompleted()) or raw < 0 or won or out_of_steps
        if done:
            self._counter.finish()
        return Transition(observation=observation, score=clip_score(raw), done=done, won=won)

    def admissible(self) -> list[str] | None:
        """Valid action strings in the current state (ScienceWorld's action-object combos)."""
        server = self._server_for_episode()
        return [str(a) for a in server.get_valid_action_object_combinations()]

    def gold_actions(self) -> list[str] | None:
        """The engine's gold path for the loaded episode.

        The engine makes gold paths at load time; without ``gold_paths=True`` the episode is
        loaded again with one (which also restarts it: call :meth:`reset` before playing).
        """
        server = self._server_for_episode()
        if not self.gold_paths:
            assert self._spec is not None
            server = self._claim(fresh=True)
            server.load(self._spec.task_name, self._spec.variation, self.simplification,
                        generateGoldPath=True)
            self._counter.finish()
        return [str(a) for a in server.get_gold_action_sequence()]

    def close(self) -> None:
        """Let go of the shared engine (the JVM stays up for other adapters)."""
        global _owner
        with _lock:
            if _owner is self:
                _owner = None
        self._closed = True
        self._spec = None

    # -- helpers -------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise EnvError("this ScienceWorld environment was closed; make a new one")

    def _check_task(self, task_name: str) -> None:
        names = task_names()
        if task_name not in names:
            raise ConfigError(f"unknown ScienceWorld task {task_name!r}; known: {names}")

    def _claim(self, *, fresh: bool = False) -> Any:
        """Take the shared engine for this adapter (a new JVM if ``fresh``)."""
        global _owner
        self._check_open()
        server = _restart_server() if fresh else _shared_server()
        with _lock:
            _owner = self
        return server

    def _server_for_episode(self) -> Any:
        """The shared engine, if it still holds this adapter's episode."""
        self._check_open()
        if self._spec is None:
            raise EnvError("no ScienceWorld episode loaded; call load(EpisodeSpec(...)) first")
        if _owner is not self:
            raise EnvError("another ScienceWorldEnvironment loaded an episode into the shared "
                           "JVM since this one's load(); call load() again")
        return _shared_server()


def episode_specs(env: ScienceWorldEnvironment, split: str, *,
                  tasks: Iterable[str] | None = None,
                  per_task: int | None = None) -> Iterator[EpisodeSpec]:
    """Yield the episodes of ``split``: task by task, variations in ascending order.

    Args:
        env: The environment whose engine lists the variations.
        split: "train", "dev" or "test".
        tasks: Task names to include (default: all 30, in the package's order).
        per_task: Keep only the first ``per_task`` variations of each task.
    """
    for task in (list(tasks) if tasks is not None else task_names()):
        chosen = env.variations(task, split)
        if per_task is not None:
            chosen = chosen[:per_task]
        for variation in chosen:
            yield EpisodeSpec(task_name=task, variation=variation, split=split)
