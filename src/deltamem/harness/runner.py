"""Run memories against an environment on a fixed episode stream and log every episode.

Protocols (deltamem-spec.md §6.1):

* ``online`` - the paper's main setting: cold start, the memory learns after every episode of
  the evaluation stream, and the next episode sees the updated memory.
* ``warm`` - first build the memory from GOLD trajectories of train-split episodes
  (``env.gold_actions()`` replayed in the environment), then evaluate on held-out episodes,
  frozen (default) or still learning.

The stream is fixed by the seed: the split's episodes are shuffled with ``random.Random(seed)``
and the first ``episodes`` taken, identically for every memory kind. Each memory kind writes
``<out>/<kind>/episodes.jsonl`` (one record per episode) next to its memory file. A rerun with
the same directory skips the episodes already logged and continues from the persisted memory
(an episode interrupted between its memory write and its log line is replayed on resume).
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from deltamem.config import Settings
from deltamem.embed.base import Embedder
from deltamem.errors import ConfigError
from deltamem.harness.agent import AgentConfig, ReActAgent, replay
from deltamem.harness.envs.base import Environment, EpisodeSpec, Reset
from deltamem.harness.factory import make_memory
from deltamem.harness.memories import Memory
from deltamem.llm.base import LLM

PROTOCOLS = ("online", "warm")
LOG_NAME = "episodes.jsonl"


@dataclass(frozen=True)
class RunOptions:
    """Everything about a run except the memory kind and the model.

    Attributes:
        episodes: evaluation episodes.
        seed: fixes the stream (and nothing else: decoding is greedy by default).
        protocol: ``online`` or ``warm``.
        train_episodes: warm start: gold trajectories learned before evaluation.
        freeze: warm start: stop learning during evaluation.
        eval_split / train_split: override the environment's default splits.
        families: restrict multi-task environments to these task families (ScienceWorld tasks,
            ALFWorld types).
        env_options: keyword arguments for ``make_env`` (e.g. TWX ``game_params``).
        extractor: DeltaMem's extractor (``llm`` as in the paper, or ``trace``).
        settings: DeltaMem settings (ablations change them per kind).
        agent: the ReAct loop's settings.
    """

    episodes: int = 5
    seed: int = 0
    protocol: str = "online"
    train_episodes: int = 5
    freeze: bool = True
    eval_split: str | None = None
    train_split: str | None = None
    families: tuple[str, ...] | None = None
    env_options: dict[str, Any] = field(default_factory=dict)
    extractor: str = "llm"
    settings: Settings = field(default_factory=Settings)
    agent: AgentConfig = field(default_factory=AgentConfig)

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise ConfigError(f"protocol must be one of {PROTOCOLS}, got {self.protocol!r}")
        if self.episodes < 1:
            raise ConfigError("episodes must be at least 1")

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form, written to ``config.json`` of the run."""
        out = asdict(self)
        out["families"] = list(self.families) if self.families else None
        return out


def default_splits(env_name: str) -> tuple[str, str]:
    """``(train, eval)`` split names of an environment."""
    if env_name.startswith("alfworld"):
        return "seen", "unseen"
    return "train", "test"


def candidate_specs(env: Environment, env_name: str, split: str,
                    families: Sequence[str] | None, needed: int) -> list[EpisodeSpec]:
    """Every episode of ``split`` the stream may draw from, in the engine's order.

    An environment may list its own episodes with a ``specs(split)`` method (custom adapters);
    the built-in adapters are handled here.
    """
    lister = getattr(env, "specs", None)
    if callable(lister):
        return list(lister(split))
    if env_name.startswith("twx-"):
        game = env_name[len("twx-"):]
        return [EpisodeSpec(game, s, split) for s in env.seeds(split)]  # type: ignore[attr-defined]
    if env_name == "scienceworld":
        from deltamem.harness.envs.scienceworld import episode_specs as sw_specs

        return list(sw_specs(env, split, tasks=families))  # type: ignore[arg-type]
    if env_name.startswith("alfworld"):
        from deltamem.harness.envs.alfworld import episode_specs as alf_specs

        # Generated games: the generator seed is the variation; train and eval are disjoint
        # because they come from different splits (seen/unseen layouts).
        return list(alf_specs(split, max(needed, 1) * 4, task_types=families))
    raise ConfigError(f"no episode stream for environment {env_name!r}")


def episode_stream(env: Environment, env_name: str, split: str, count: int, seed: int,
                   families: Sequence[str] | None = None) -> list[EpisodeSpec]:
    """``count`` episodes of ``split``, in a fixed order drawn with ``seed``."""
    pool = candidate_specs(env, env_name, split, families, count)
    if not pool:
        raise ConfigError(f"{env_name}: split {split!r} has no episodes")
    random.Random(seed).shuffle(pool)
    return pool[:count]


def read_log(path: Path) -> list[dict[str, Any]]:
    """The records of an episode log (an empty list when it does not exist)."""
    if not path.exists():
        return []
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _public(info: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in info.items() if not k.startswith("_")}


def _spec_dict(spec: EpisodeSpec) -> dict[str, Any]:
    return {"task_name": spec.task_name, "variation": spec.variation, "split": spec.split}


class KindRun:
    """One memory kind's run over the planned episodes, appending to its log."""

    def __init__(self, kind: str, memory: Memory, agent: ReActAgent, env: Environment,
                 directory: Path) -> None:
        self.kind = kind
        self.memory = memory
        self.agent = agent
        self.env = env
        self.log = directory / LOG_NAME
        self.done = {(r["phase"], r["index"]): r for r in read_log(self.log)}

    def _check(self, phase: str, index: int, spec: EpisodeSpec) -> bool:
        """True if this episode is already logged (and it is the same episode)."""
        record = self.done.get((phase, index))
        if record is None:
            return False
        if record["spec"] != _spec_dict(spec):
            raise ConfigError(f"{self.log} was written for another episode stream "
                              f"({record['spec']} at {phase} #{index}); use a new --out")
        return True

    def _append(self, record: dict[str, Any]) -> None:
        with self.log.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
        self.done[(record["phase"], record["index"])] = record

    def running_sr(self) -> str:
        """Successes over evaluated episodes so far, e.g. ``"3/5"``."""
        evals = [r for (phase, _), r in self.done.items() if phase == "eval"]
        return f"{sum(bool(r['success']) for r in evals)}/{len(evals)}" if evals else "-"

    def train(self, index: int, spec: EpisodeSpec) -> None:
        """Warm start: learn the gold trajectory of ``spec``."""
        if self._check("train", index, spec):
            return
        started = time.perf_counter()
        self.env.load(spec)
        self.env.reset()
        gold = self.env.gold_actions()
        if not gold:
            raise ConfigError(f"{self.env.name}: no gold trajectory for {spec}; warm start "
                              "needs gold_actions()")
        episode = replay(self.env, spec, gold)
        update = self.memory.update(episode, {})
        self._append({
            "phase": "train", "index": index, "kind": self.kind, "spec": _spec_dict(spec),
            "task": episode.task, "success": episode.success, "score": episode.score,
            "steps": len(episode.steps), "written": update.written,
            "usage": {"memory": update.usage.to_dict()}, "memory_size": self.memory.size(),
            "wall_s": round(time.perf_counter() - started, 3),
        })

    def evaluate(self, index: int, spec: EpisodeSpec, *, learn: bool) -> None:
        """Play ``spec`` with the memory's context, then (if ``learn``) update the memory."""
        if self._check("eval", index, spec):
            return
        started = time.perf_counter()
        recalled: dict[str, Any] = {"text": "", "info": {}}

        def recall(reset: Reset) -> str:
            # The memory keys (task, scene) are known only once the episode has been reset.
            text, info = self.memory.context(reset.task, reset.scene, family=spec.task_name)
            recalled.update(text=text, info=info)
            return text

        result = self.agent.run(self.env, spec, recall)
        text, info = str(recalled["text"]), dict(recalled["info"])
        written: dict[str, Any] = {}
        memory_usage: dict[str, Any] = {}
        if learn:
            update = self.memory.update(result.episode, info)
            written, memory_usage = update.written, update.usage.to_dict()
        episode = result.episode
        self._append({
            "phase": "eval", "index": index, "kind": self.kind, "spec": _spec_dict(spec),
            "task": episode.task, "scene": episode.env, "success": episode.success,
            "score": episode.score, "steps": len(episode.steps), "invalid": result.invalid,
            "snapped": result.snapped, "aborted": result.aborted,
            "trajectory": [{"action": s.action, "observation": s.observation,
                            "thought": s.thought, "raw": raw}
                           for s, raw in zip(episode.steps, result.raw, strict=False)],
            "recall": _public(info), "memory_chars": len(text), "memory_text": text,
            "written": written,
            "usage": {"agent": result.usage.to_dict(), "memory": memory_usage},
            "memory_size": self.memory.size(),
            "wall_s": round(time.perf_counter() - started, 3),
        })


def run(env_name: str, memory_kind: str, llm: LLM, episodes: int = 5, seed: int = 0,
        protocol: str = "online", *, out: Path, embedder: Embedder | None = None,
        options: RunOptions | None = None, env: Environment | None = None,
        console: Console | None = None) -> Path:
    """Run one memory kind; return its episode log.

    Args:
        env_name: ``twx-<game>``, ``scienceworld`` or ``alfworld-generated``.
        memory_kind: See :data:`deltamem.harness.factory.ALL_KINDS`.
        llm: The acting model (also the memories' model).
        episodes: Evaluation episodes (overrides ``options.episodes``).
        seed: Stream seed (overrides ``options.seed``).
        protocol: ``online`` or ``warm`` (overrides ``options.protocol``).
        out: Run directory; the kind logs to ``out/<kind>/episodes.jsonl``.
        embedder: Shared embedder (default: ``options.settings.embedder``).
        options: The rest of the run's settings.
        env: A ready environment (default: made from ``env_name``, closed at the end).
        console: Where the progress bar goes (default: stderr).
    """
    base = options or RunOptions()
    opts = RunOptions(**{**base.__dict__, "episodes": episodes, "seed": seed,
                         "protocol": protocol})
    return run_bench(env_name, [memory_kind], llm, out=out, embedder=embedder, options=opts,
                     env=env, console=console)[memory_kind]


def run_bench(env_name: str, kinds: Sequence[str], llm: LLM, *, out: Path,
              embedder: Embedder | None = None, options: RunOptions | None = None,
              env: Environment | None = None,
              console: Console | None = None) -> dict[str, Path]:
    """Run several memory kinds on the same stream; return each kind's episode log."""
    from deltamem.embed import make_embedder
    from deltamem.harness.envs import make_env

    opts = options or RunOptions()
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(
        {"env": env_name, "kinds": list(kinds), "llm": getattr(llm, "name", ""),
         **opts.to_dict()}, indent=2, default=str), encoding="utf-8")
    embedder = embedder or make_embedder(opts.settings.embedder)
    own_env = env is None
    environment = env or make_env(env_name, **opts.env_options)
    logs: dict[str, Path] = {}
    try:
        train_split, eval_split = default_splits(env_name)
        eval_specs = episode_stream(environment, env_name, opts.eval_split or eval_split,
                                    opts.episodes, opts.seed, opts.families)
        train_specs: list[EpisodeSpec] = []
        if opts.protocol == "warm":
            train_specs = episode_stream(environment, env_name, opts.train_split or train_split,
                                         opts.train_episodes, opts.seed, opts.families)
        per_kind = len(train_specs) + len(eval_specs)
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("SR {task.fields[sr]}"), TimeElapsedColumn())
        with Progress(*columns, console=console or Console(stderr=True)) as progress:
            for kind in kinds:
                directory = out / kind
                memory = make_memory(kind, directory, embedder=embedder, llm=llm,
                                     extractor=opts.extractor, settings=opts.settings)
                agent = ReActAgent(llm, env_name, opts.agent)
                runner = KindRun(kind, memory, agent, environment, directory)
                bar = progress.add_task(f"{env_name} · {kind}", total=per_kind, sr="-")
                try:
                    for i, spec in enumerate(train_specs):
                        runner.train(i, spec)
                        progress.advance(bar)
                    for i, spec in enumerate(eval_specs):
                        learn = not (opts.protocol == "warm" and opts.freeze)
                        runner.evaluate(i, spec, learn=learn)
                        progress.update(bar, advance=1, sr=runner.running_sr())
                finally:
                    memory.close()
                logs[kind] = runner.log
    finally:
        if own_env:
            environment.close()
    return logs
