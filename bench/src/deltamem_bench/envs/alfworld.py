"""Generated ALFWorld games as a harness environment (env name ``alfworld-generated``).

These are **generated ALFWorld games** (see :mod:`deltamem_bench.envs.alfworld_gen`): the real
ALFWorld/TextWorld PDDL engine, text and action space, on scenes generated from the assets the
``alfworld`` wheel ships, because the official game files cannot be downloaded offline. Results
on them are not comparable with published ALFWorld numbers.

Keys follow the authors' reference code: the reset text minus its banner is split on the literal
"Your task is to:" into ``scene`` (the room description) and ``task`` (the goal sentence,
prefix included). Success is the engine's ``won``; the step budget is 30 as in the paper.

Progress (``Transition.score``) is **plan progress**: the share of the planner's shortest plan
from the start state that the agent has closed, ``1 - remaining / initial`` plan length, where
``remaining`` is Fast Downward's shortest plan from the current state (1.0 when won, never below
0). Going to the right receptacle or taking the right object shortens the plan; a detour that
must be undone lengthens it. ALFWorld's own "goal conditions met" counts satisfied conjuncts of
the PDDL goal instead; the two agree on 0 and 1, and plan progress also moves before any goal
condition holds.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from deltamem.errors import ConfigError
from deltamem_bench.envs.alfworld_engine import open_engine
from deltamem_bench.envs.alfworld_gen import SPLITS, TASK_TYPES, generate_game
from deltamem_bench.envs.base import EnvError, EpisodeSpec, Reset, StepCounter, Transition

DEFAULT_MAX_STEPS = 30
TASK_MARKER = "Your task is to:"
_BANNER = re.compile(r"^\s*-= Welcome to TextWorld, ALFRED! =-\s*")
# "You arrive at loc 12. " names an internal navigation point, not anything the agent can use;
# the paper's agent strips it too.
_ARRIVE = re.compile(r"^You arrive at loc \d+\.\s*")


def split_task(text: str) -> tuple[str, str]:
    """Split an ALFWorld start text into (scene, task) on "Your task is to:" (spec §2.1)."""
    at = text.find(TASK_MARKER)
    if at < 0:
        return "", text.strip()
    return text[:at].strip(), text[at:].strip()


INSTRUCTION = (
    "You are an agent in a household. Each turn, answer with exactly one line:\n"
    "Action: <one action>\n"
    "You may write one line 'Thought: ...' before it. Actions: go to RECEP, take OBJ from RECEP, "
    "put OBJ in/on RECEP, open RECEP, close RECEP, use OBJ, clean OBJ with RECEP, heat OBJ with "
    "RECEP, cool OBJ with RECEP, examine OBJ, look, inventory. 'Nothing happens' means the "
    "action was not valid."
)


class AlfworldGeneratedEnvironment:
    """Plays generated ALFWorld games through ``AlfredInfos(AlfredDemangler(PddlEnv))``.

    Args:
        max_steps: Actions per episode before ``done`` is forced (30 as in the paper).
        cache_dir: Where generated games are stored (default: the generator's cache folder).
        strip_location: Remove the "You arrive at loc N." prefix from observations.
        plan_progress: Ask the planner for plan progress after every step (about 12 ms a
            step); False leaves ``Transition.score`` at 0 until the game is won (1.0), for
            callers that need only ``won`` (the memory-quality probe).
    """

    name = "alfworld-generated"
    instruction = INSTRUCTION
    fallback_action = "look"
    splits = ("seen", "unseen")
    irreversible: tuple[str, ...] = ()

    def __init__(self, *, max_steps: int = DEFAULT_MAX_STEPS,
                 cache_dir: Path | str | None = None, strip_location: bool = True,
                 plan_progress: bool = True) -> None:
        self.max_steps = max_steps
        self.cache_dir = cache_dir
        self.strip_location = strip_location
        self._engine: Any = open_engine(with_plan=plan_progress, shared=False)
        self._counter = StepCounter()
        self._game: Path | None = None
        self._walkthrough: list[str] = []
        self._state: Any = None
        self._plan = 0  # length of the planner's plan from the start state
        self._score = 0.0
        self._closed = False

    def specs(self, split: str, *, count: int,
              families: Sequence[str] | None = None) -> list[EpisodeSpec]:
        """Generated games of ``split``: ``4 * count`` generator seeds, cycling task types.

        Train and eval never share a game: the seen and unseen splits use disjoint floor plans;
        ``dev`` (to tune on: ``--eval-split dev``) uses the seen floor plans with its own
        generator stream, never an unseen one.
        """
        return list(episode_specs(split, max(count, 1) * 4, task_types=families))

    @property
    def game_file(self) -> Path | None:
        """The ``.tw-pddl`` file of the loaded episode."""
        return self._game

    def load(self, spec: EpisodeSpec) -> None:
        """Generate (or reuse) the game ``spec`` names (seed, task type, split) and load it."""
        self._check_open()
        path = generate_game(spec.variation, spec.task_name, spec.split, self.cache_dir)
        self.load_file(path)

    def load_file(self, path: Path | str) -> None:
        """Load a ``.tw-pddl`` game file directly (generated or any ALFWorld-format game)."""
        self._check_open()
        path = Path(path)
        data = json.loads(path.read_text())
        self._engine.load(str(path))
        self._game = path
        self._walkthrough = [str(c) for c in data.get("walkthrough") or []]
        self._state = None
        self._plan = 0
        self._counter.finish()

    def reset(self) -> Reset:
        """Start the loaded game; the banner is dropped and the rest split into scene and task."""
        self._check_open()
        if self._game is None:
            raise EnvError(f"{self.name}: no game loaded; call load(EpisodeSpec(...)) first")
        self._state = self._engine.reset()
        self._plan = len(self._state.get("policy_commands") or ())
        self._score = 0.0
        text = _BANNER.sub("", str(self._state.feedback)).strip()
        scene, task = split_task(text)
        self._counter.start()
        return Reset(task=task, scene=scene, observation=text, admissible=self.admissible())

    def step(self, action: str) -> Transition:
        """Play ``action``; unknown commands answer "Nothing happens." as in ALFWorld."""
        self._check_open()
        out_of_steps = self._counter.tick(self.name, self.max_steps)
        self._state, _score, _done = self._engine.step(action)
        won = bool(self._state["won"])
        observation = str(self._state.feedback).strip()
        if self.strip_location:
            observation = _ARRIVE.sub("", observation)
        done = won or out_of_steps
        if done:
            self._counter.finish()
        return Transition(observation=observation, score=self._progress(won), done=done, won=won)

    def _progress(self, won: bool) -> float:
        """Plan progress after the last step (see the module docstring); the previous value
        when the planner found no plan from the current state."""
        remaining = self._state.get("policy_commands")
        if won:
            self._score = 1.0
        elif remaining and self._plan:
            self._score = max(0.0, 1.0 - len(remaining) / self._plan)
        return self._score

    def admissible(self) -> list[str] | None:
        """The engine's admissible commands in the current state."""
        self._check_open()
        if self._state is None:
            raise EnvError(f"{self.name}: call reset() first")
        return [str(c) for c in self._state["admissible_commands"]]

    def gold_actions(self) -> list[str] | None:
        """Fast Downward's winning plan from the start state (stored when the game was made)."""
        self._check_open()
        if self._game is None:
            raise EnvError(f"{self.name}: no game loaded")
        return list(self._walkthrough) or None

    def close(self) -> None:
        """Drop the engine. Safe to call twice."""
        if not self._closed:
            self._closed = True
            self._engine.close()

    def _check_open(self) -> None:
        if self._closed:
            raise EnvError(f"{self.name}: environment was closed; make a new one")


def episode_specs(split: str, count: int, *, task_types: Sequence[str] | None = None,
                  start: int = 0) -> Iterator[EpisodeSpec]:
    """A fixed stream of ``count`` generated games, cycling through ``task_types``.

    Episode ``i`` has task type ``task_types[i % len(task_types)]`` and seed ``start + i``.
    """
    if split not in SPLITS:
        raise ConfigError(f"unknown ALFWorld split {split!r}; use one of {SPLITS}")
    kinds = list(task_types) if task_types is not None else list(TASK_TYPES)
    for kind in kinds:
        if kind not in TASK_TYPES:
            raise ConfigError(f"unknown ALFWorld task type {kind!r}; known: {list(TASK_TYPES)}")
    for i in range(count):
        yield EpisodeSpec(task_name=kinds[i % len(kinds)], variation=start + i, split=split)
