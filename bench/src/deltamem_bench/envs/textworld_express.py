"""TextWorldExpress (the ``textworld_express`` package): fast Java re-implementations of
CookingWorld, Coin Collector, TextWorld Commonsense (twc) and five small puzzle games.

Episodes are chosen by (game, seed, fold): the package gives each fold its own seed range
(train 0-999, dev and test further up), listed by ``getValidSeeds{Train,Dev,Test}``. The JVM
starts in about 0.3 s, so each adapter owns its own.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
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

GAMES = ("cookingworld", "coin", "twc", "mapreader", "arithmetic", "sorting", "simonsays",
         "peckingorder")
FOLDS = ("train", "dev", "test")
DEFAULT_MAX_STEPS = 30
INSTRUCTION = (
    "You are an agent in a text game. Each turn, answer with exactly one line:\n"
    "Action: <one action>\n"
    "You may write one line 'Thought: ...' before it. Useful actions: look around, inventory, "
    "move <direction>, open <thing>, close <thing>, take <item>, put <item> in <container>, "
    "examine <thing>. Pick actions from the list of valid actions you are shown."
)


class TextWorldExpressEnvironment:
    """One TextWorldExpress game family, implementing the harness ``Environment`` protocol.

    Args:
        game: One of :data:`GAMES`.
        game_params: TWX generation parameters, e.g. "numLocations=3,includeDoors=0"
            (empty: the game's defaults).
        max_steps: Actions per episode before ``done`` is forced.
    """

    def __init__(self, game: str, *, game_params: str = "",
                 max_steps: int = DEFAULT_MAX_STEPS) -> None:
        if game not in GAMES:
            raise ConfigError(f"unknown TextWorldExpress game {game!r}; known: {list(GAMES)}")
        try:
            from textworld_express import TextWorldExpressEnv
        except ImportError as exc:
            raise ConfigError("TextWorldExpress needs the 'textworld-express' package and "
                              "Java: pip install deltamem-bench") from exc
        self.game = game
        self.game_params = game_params
        self.name = f"twx-{game}"
        self.max_steps = max_steps
        self.instruction = INSTRUCTION
        self.fallback_action = "look around"
        self.splits = ("train", "test")
        self.irreversible: tuple[str, ...] = ()
        self._env: Any = TextWorldExpressEnv(envStepLimit=10_000)
        self._counter = StepCounter()
        self._spec: EpisodeSpec | None = None
        self._started = False
        self._last: dict[str, Any] = {}
        self._closed = False

    def seeds(self, fold: str) -> list[int]:
        """The seeds TextWorldExpress reserves for ``fold`` (train/dev/test)."""
        self._check_open()
        if fold not in FOLDS:
            raise ConfigError(f"unknown TextWorldExpress fold {fold!r}; use one of {FOLDS}")
        getter = {"train": self._env.getValidSeedsTrain, "dev": self._env.getValidSeedsDev,
                  "test": self._env.getValidSeedsTest}[fold]
        return [int(s) for s in getter()]

    def specs(self, split: str, *, count: int,
              families: Sequence[str] | None = None) -> list[EpisodeSpec]:
        """Every seed of fold ``split`` (``count`` and ``families`` do not apply: one game)."""
        return [EpisodeSpec(self.game, seed, split) for seed in self.seeds(split)]

    def load(self, spec: EpisodeSpec) -> None:
        """Select game seed ``spec.variation`` of fold ``spec.split``; ``task_name`` must match."""
        self._check_open()
        if spec.task_name != self.game:
            raise ConfigError(f"this environment plays {self.game!r}, not {spec.task_name!r}")
        if spec.split not in FOLDS:
            raise ConfigError(f"unknown TextWorldExpress fold {spec.split!r}; use one of {FOLDS}")
        self._spec = spec
        self._started = False
        self._counter.finish()

    def reset(self) -> Reset:
        """Generate the episode; ``task`` is the task description, ``scene`` the first look."""
        self._check_open()
        if self._spec is None:
            raise EnvError(f"{self.name}: no episode loaded; call load(EpisodeSpec(...)) first")
        # The gold path is cheap here (a few ms), so it is always generated.
        observation, infos = self._env.reset(seed=self._spec.variation,
                                             gameFold=self._spec.split, gameName=self.game,
                                             gameParams=self.game_params,
                                             generateGoldPath=True)
        self._last = infos
        self._started = True
        self._counter.start()
        return Reset(task=str(infos["taskDescription"]), scene=str(observation),
                     observation=str(observation),
                     admissible=[str(a) for a in infos["validActions"]])

    def step(self, action: str) -> Transition:
        """Play ``action``; success is the engine's ``tasksuccess`` flag."""
        self._check_open()
        out_of_steps = self._counter.tick(self.name, self.max_steps)
        observation, _reward, engine_done, infos = self._env.step(action)
        self._last = infos
        won = bool(infos.get("tasksuccess", False))
        done = bool(engine_done) or won or bool(infos.get("taskfailure", False)) or out_of_steps
        if done:
            self._counter.finish()
        return Transition(observation=str(observation), score=clip_score(infos["score"]),
                          done=done, won=won)

    def admissible(self) -> list[str] | None:
        """Valid actions in the current state (TWX lists them with every step)."""
        self._require_started()
        return [str(a) for a in self._last.get("validActions", [])]

    def gold_actions(self) -> list[str] | None:
        """The engine's gold path for the current episode (available after :meth:`reset`)."""
        self._require_started()
        return [str(a) for a in self._env.getGoldActionSequence()]

    def close(self) -> None:
        """Stop this adapter's JVM. Safe to call twice."""
        if not self._closed:
            self._closed = True
            self._env.close()

    def _check_open(self) -> None:
        if self._closed:
            raise EnvError(f"{self.name}: environment was closed; make a new one")

    def _require_started(self) -> None:
        self._check_open()
        if not self._started:
            raise EnvError(f"{self.name}: call reset() first")


def episode_specs(env: TextWorldExpressEnvironment, fold: str, *, count: int,
                  start: int = 0) -> Iterator[EpisodeSpec]:
    """Yield ``count`` episodes of ``env``'s game from ``fold``, seeds in the package's order."""
    for seed in env.seeds(fold)[start:start + count]:
        yield EpisodeSpec(task_name=env.game, variation=seed, split=fold)
