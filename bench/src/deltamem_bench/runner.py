"""Run memories against an environment on a fixed episode stream and log every episode.

Protocols:

* ``online`` - the paper's main setting: cold start, the memory learns after every episode of
  the evaluation stream, and the next episode sees the updated memory.
* ``warm`` - first build the memory from GOLD trajectories of train-split episodes
  (``env.gold_actions()`` replayed in the environment), then evaluate on held-out episodes,
  frozen (default) or still learning. The gold trajectories are played once per run and kept
  in ``<out>/gold.jsonl``, so every memory kind, and every resumed or later kind, learns from
  the same ones (:class:`GoldEpisodes`: an engine's gold path may be random).

The stream is fixed by the seed: the split's episodes are shuffled with ``random.Random(seed)``
and the first ``episodes`` taken, identically for every memory kind. Each memory kind writes
``<out>/<kind>/episodes.jsonl`` (one record per episode) next to its memory file. A rerun with
the same directory skips the episodes already logged and continues from the persisted memory
(an episode interrupted between its memory write and its log line is replayed on resume).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from deltamem.config import Settings
from deltamem.core.model import Episode
from deltamem.embed.base import Embedder
from deltamem.errors import ConfigError, EpisodeError
from deltamem.formats.episodes import episode_from_dict, episode_to_dict
from deltamem.llm.base import LLM
from deltamem_bench.agent import AgentConfig, AgentResult, ReActAgent, gold_episode
from deltamem_bench.choice import ChoiceAgent, ChoiceConfig
from deltamem_bench.envs.base import Environment, EpisodeSpec, Reset
from deltamem_bench.factory import make_memory
from deltamem_bench.memories import Memory
from deltamem_bench.registry import Registry, deal, fresh_stream
from deltamem_bench.scorer import Scorer

PROTOCOLS = ("online", "warm")
AGENT_KINDS = ("choice", "react")
LOG_NAME = "episodes.jsonl"
GOLD_NAME = "gold.jsonl"
STREAM_NAME = "stream.json"


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
        agent_kind: ``choice`` (the model ranks admissible actions; the default for the
            embedded model) or ``react`` (the model writes the action; for capable endpoints).
        agent: the ReAct loop's settings.
        choice: the choice agent's settings.
        memory_chars: the context budget every memory gets (the agents cut the block there, the
            long-context baseline fills it).
        fresh: draw the evaluation stream from the split's episodes that no registered run has
            evaluated (see :mod:`deltamem_bench.registry`); the stream drawn is kept in
            ``<out>/stream.json``, so a resumed run plays the same episodes.
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
    agent_kind: str = "choice"
    agent: AgentConfig = field(default_factory=AgentConfig)
    choice: ChoiceConfig = field(default_factory=ChoiceConfig)
    memory_chars: int = 2400
    fresh: bool = False

    def __post_init__(self) -> None:
        if self.agent_kind not in AGENT_KINDS:
            raise ConfigError(f"agent must be one of {AGENT_KINDS}, got {self.agent_kind!r}")
        if self.protocol not in PROTOCOLS:
            raise ConfigError(f"protocol must be one of {PROTOCOLS}, got {self.protocol!r}")
        if self.episodes < 1:
            raise ConfigError("episodes must be at least 1")

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form, written to ``config.json`` of the run."""
        out = asdict(self)
        out["families"] = list(self.families) if self.families else None
        return out


def episode_stream(env: Environment, split: str, count: int, seed: int,
                   families: Sequence[str] | None = None) -> list[EpisodeSpec]:
    """``count`` episodes of ``split``, in a fixed order drawn with ``seed``, families balanced.

    Each family's episodes (ScienceWorld task, ALFWorld task type, TWX game) are shuffled with
    ``seed``, then dealt in turn, one family after the other: any prefix holds every family as
    evenly as it can (40 episodes of ten tasks are four of each). A shuffle of the whole pool
    would follow the split's sizes instead (a task with many variations would fill the stream).
    With one family this is exactly ``random.Random(seed).shuffle`` of the pool.
    """
    pool = list(env.specs(split, count=count, families=families))
    if not pool:
        raise ConfigError(f"{env.name}: split {split!r} has no episodes")
    return deal(pool, count, seed)


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


class GoldEpisodes:
    """The warm start's gold episodes of one run, played once and shared by every memory kind.

    Why: an engine's gold path need not be fixed by the episode. TextWorldExpress's Coin
    Collector gold agent walks at random (the same seed gave paths of 5 and 3 steps, one after
    the other) and ScienceWorld's picks among valid answers (the same find-living-thing
    variation, reset twice, focused on a butterfly, then on a blue jay), so arms that each
    replayed them learned from different trajectories, and a rerun from others again. The
    first request for a train index plays the gold path and appends it to ``path``; later ones
    (another kind, a resumed run) read it back.
    """

    def __init__(self, env: Environment, path: Path) -> None:
        self.env = env
        self.path = path
        self._episodes: dict[int, tuple[dict[str, Any], Episode]] = {}
        for number, record in enumerate(read_log(path), 1):
            try:
                episode = episode_from_dict(record["episode"], where=f"{path}:{number}")
                self._episodes[int(record["index"])] = (record["spec"], episode)
            except (KeyError, TypeError, ValueError, EpisodeError) as exc:
                raise ConfigError(f"{path}:{number} is not a gold record ({exc}); "
                                  "remove the file to replay the gold paths") from exc

    def get(self, index: int, spec: EpisodeSpec) -> Episode:
        """The gold episode of train ``index`` (played now if no kind has played it yet).

        Raises:
            ConfigError: the record of ``index`` is for another episode (another stream), or
                the environment has no gold path.
        """
        want = _spec_dict(spec)
        known = self._episodes.get(index)
        if known is not None:
            if known[0] != want:
                raise ConfigError(f"{self.path} was written for another episode stream "
                                  f"(train {index}: {known[0]} != {want})")
            return known[1]
        episode = gold_episode(self.env, spec)
        record = {"index": index, "spec": want, "episode": episode_to_dict(episode)}
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
        self._episodes[index] = (want, episode)
        return episode


class KindRun:
    """One memory kind's run over the planned episodes, appending to its log."""

    def __init__(self, kind: str, memory: Memory, agent: Agent, env: Environment,
                 directory: Path, gold: GoldEpisodes) -> None:
        self.kind = kind
        self.memory = memory
        self.agent = agent
        self.env = env
        self.gold = gold
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
        episode = self.gold.get(index, spec)
        update = self.memory.update(episode, {})
        self._append({
            "phase": "train", "index": index, "kind": self.kind, "spec": _spec_dict(spec),
            "task": episode.task, "success": episode.success, "score": episode.score,
            "steps": len(episode.steps), "written": update.written,
            "usage": {"memory": update.usage.to_dict()}, "memory_size": self.memory.size(),
            "wall_s": round(time.perf_counter() - started, 3),
        })

    def evaluate(self, index: int, spec: EpisodeSpec, *, learn: bool) -> bool:
        """Play ``spec`` with the memory's context, then (if ``learn``) update the memory.

        Returns False when the episode was already logged (a resumed run), True otherwise.
        """
        if self._check("eval", index, spec):
            return False
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
                            "thought": s.thought, "reward": s.reward, "raw": raw}
                           for s, raw in zip(episode.steps, result.raw, strict=False)],
            "recall": _public(info), "memory_chars": len(text), "memory_text": text,
            "written": written,
            "usage": {"agent": result.usage.to_dict(), "memory": memory_usage},
            "agent_stats": {k: episode.meta[k] for k in
                            ("tokens_evaluated", "tokens_cached", "tokens_per_s")
                            if k in episode.meta},
            "memory_size": self.memory.size(),
            "wall_s": round(time.perf_counter() - started, 3),
        })
        return True


class Agent(Protocol):
    """What the runner needs of an agent (the ReAct and the choice agent both fit)."""

    def run(self, env: Environment, spec: EpisodeSpec,
            memory: str | Callable[[Reset], str] = "") -> AgentResult:
        """Play ``spec`` with ``memory`` injected and return the recorded episode."""
        ...


def make_agent(llm: LLM | None, scorer: Scorer | None, env: Environment,
               options: RunOptions) -> Agent:
    """The agent ``options.agent_kind`` asks for, over ``llm`` (react) or ``scorer`` (choice)."""
    if options.agent_kind == "choice":
        if scorer is None:
            raise ConfigError("the choice agent needs a local model scorer (--llm local)")
        return ChoiceAgent(scorer, env, options.choice)
    if llm is None:
        raise ConfigError("the react agent needs an LLM")
    return ReActAgent(llm, env, options.agent)


def check_config(out: Path, config: dict[str, Any]) -> None:
    """Refuse to resume ``out`` with a configuration other than the one that wrote it.

    Only the kinds and the number of episodes may change (a new arm plays the same stream; more
    episodes extend it, since the stream is a prefix of one shuffled order); any other change
    would relabel old results with new settings. A memory setting added after the run was
    written counts as unchanged at its default (new settings default to the old behaviour:
    ``ann_from`` switches a scan to approximate only past 400,000 nodes).
    """
    path = out / "config.json"
    if not path.exists():
        return
    old = json.loads(path.read_text(encoding="utf-8"))
    # An option added after the run was written counts as unchanged at its default.
    for key, value in json.loads(json.dumps(RunOptions().to_dict(), default=str)).items():
        old.setdefault(key, value)
    if isinstance(old.get("settings"), dict):
        defaults = json.loads(json.dumps(asdict(Settings()), default=str))
        old["settings"] = {**{k: v for k, v in defaults.items()
                              if k not in old["settings"]}, **old["settings"]}
        # ``flat`` left the library's settings (the flat arm sets its placement rule instead);
        # a run written before that recorded it as false for every arm.
        if old["settings"].get("flat") is False:
            del old["settings"]["flat"]
    # Pins were first recorded on 2026-12-04; a run written before has none to compare.
    unrecorded = {k for k in ("pins",) if k not in old}
    changed = sorted(k for k in set(old) | set(config)
                     if k not in ("kinds", "episodes", *unrecorded)
                     and old.get(k) != config.get(k))
    if changed:
        raise ConfigError(f"{out} holds a run with another configuration (changed: "
                          f"{', '.join(changed)}); use a new --out or the same options")


def _specs(records: Sequence[dict[str, Any]]) -> list[EpisodeSpec]:
    return [EpisodeSpec(str(r["task_name"]), int(r["variation"]), str(r["split"]))
            for r in records]


def plan_streams(env: Environment, env_name: str, opts: RunOptions, out: Path | None, *,
                 registry: Registry | None = None,
                 planned: dict[str, Any] | None = None) -> tuple[list[EpisodeSpec],
                                                                  list[EpisodeSpec]]:
    """The run's evaluation and training streams, kept in ``<out>/stream.json``.

    ``planned`` (a registration's ``{"eval": [...], "train": [...]}``) is played as it is;
    ``out`` None draws without looking at a run directory (a registration does);
    otherwise the streams are drawn by ``opts.seed`` (from the unregistered episodes of
    ``registry`` when ``opts.fresh``). A run directory that already holds a stream plays it
    again when fresh (the registry may have grown since).

    Raises:
        ConfigError: a fresh stream without a registry.
    """
    train_split, eval_split = env.splits
    path = out / STREAM_NAME if out is not None else None
    kept = json.loads(path.read_text(encoding="utf-8")) if path and path.exists() else None
    if planned is not None:
        eval_specs, train_specs = _specs(planned["eval"]), _specs(planned.get("train", []))
    elif opts.fresh and kept is not None:
        # The registry may have grown since the stream was drawn (by this very run's
        # registration), so the kept stream is played, never a new draw.
        if len(kept["eval"]) < opts.episodes:
            raise ConfigError(f"{out} holds a fresh stream of {len(kept['eval'])} episodes; a "
                              "fresh stream is not extended (use a new --out)")
        eval_specs = _specs(kept["eval"])[:opts.episodes]
        train_specs = _specs(kept["train"])
    else:
        split = opts.eval_split or eval_split
        if opts.fresh:
            if registry is None:
                raise ConfigError("a fresh stream needs a registry of evaluated episodes")
            eval_specs = fresh_stream(env, env_name, split, opts.episodes, opts.seed, registry,
                                      opts.families)
        else:
            eval_specs = episode_stream(env, split, opts.episodes, opts.seed, opts.families)
        train_specs = []
        if opts.protocol == "warm":
            train_specs = episode_stream(env, opts.train_split or train_split,
                                         opts.train_episodes, opts.seed, opts.families)
    return eval_specs, train_specs


def keep_stream(out: Path, eval_specs: Sequence[EpisodeSpec],
                train_specs: Sequence[EpisodeSpec]) -> None:
    """Write the run's streams to ``<out>/stream.json``, refusing a directory that holds
    another one (more or fewer episodes of the same draw are the same stream)."""
    path = out / STREAM_NAME
    stream = {"eval": [_spec_dict(s) for s in eval_specs],
              "train": [_spec_dict(s) for s in train_specs]}
    if path.exists():
        kept = json.loads(path.read_text(encoding="utf-8"))
        for key in ("eval", "train"):
            n = min(len(kept.get(key, [])), len(stream[key]))
            if kept.get(key, [])[:n] != stream[key][:n]:
                raise ConfigError(f"{out} was drawn for another episode stream; use a new --out")
        if len(kept.get("eval", [])) > len(stream["eval"]):
            return  # a shorter rerun keeps the longer record
    path.write_text(json.dumps(stream, indent=1), encoding="utf-8")


def run_bench(env_name: str, kinds: Sequence[str], llm: LLM | None, *, out: Path,
              scorer: Scorer | None = None, embedder: Embedder | None = None,
              options: RunOptions | None = None, env: Environment | None = None,
              console: Console | None = None, registry: Registry | None = None,
              planned: dict[str, Any] | None = None,
              extra_config: dict[str, Any] | None = None) -> dict[str, Path]:
    """Run several memory kinds on the same stream; return each kind's episode log.

    ``llm`` acts (react agent) and serves the memories that need a model (the LLM extractor,
    AWM, ReasoningBank); ``scorer`` acts for the choice agent. A rerun into the same ``out``
    resumes; a changed configuration is refused (see :func:`check_config`). ``registry`` is
    the registry of evaluated episodes a fresh stream avoids; ``planned`` a registration's
    streams, played as they are (see :func:`plan_streams`). ``extra_config`` is recorded in
    ``config.json`` with the options (and so must match on resume): the pins of what changes
    trajectories besides the options (model hash, llama.cpp build, package versions) and the
    registration a registered run plays.
    """
    from deltamem.embed import make_embedder
    from deltamem_bench.envs import make_env

    opts = options or RunOptions()
    out.mkdir(parents=True, exist_ok=True)
    own_env = env is None
    environment = env or make_env(env_name, **opts.env_options)
    stream = console or Console(stderr=True)
    logs: dict[str, Path] = {}
    try:
        eval_specs, train_specs = plan_streams(environment, env_name, opts, out,
                                               registry=registry, planned=planned)
        actor = scorer.name if opts.agent_kind == "choice" and scorer else getattr(llm, "name", "")
        config = json.loads(json.dumps({"env": env_name, "llm": actor, **opts.to_dict(),
                                        **(extra_config or {})}, default=str))
        if len({spec.task_name for spec in [*eval_specs, *train_specs]}) > 1:
            # Why: runs written before the families were balanced drew another stream from the
            # same options; the key makes resuming one of them a changed configuration. A
            # one-family stream is the same either way and carries no key.
            config["stream"] = "families in turn"
        if not getattr(environment, "irreversible", ()):
            # Why: the focus rule acts only on irreversible actions; without any, runs written
            # before the rule existed play the same and resume.
            config.get("choice", {}).pop("focus_guard", None)
        worlds = getattr(environment, "worlds", None)
        if worlds:
            # Why: ScienceWorld runs written while its episodes shared one JVM played worlds that
            # depended on the episodes before; the key makes resuming one a changed configuration.
            config["worlds"] = worlds
        check_config(out, config)
        keep_stream(out, eval_specs, train_specs)
        previous = json.loads((out / "config.json").read_text(encoding="utf-8")).get(
            "kinds", []) if (out / "config.json").exists() else []
        all_kinds = list(dict.fromkeys([*previous, *kinds]))
        (out / "config.json").write_text(json.dumps({**config, "kinds": all_kinds}, indent=2),
                                         encoding="utf-8")
        embedder = embedder or make_embedder(opts.settings.embedder)
        gold = GoldEpisodes(environment, out / GOLD_NAME)
        per_kind = len(train_specs) + len(eval_specs)
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("SR {task.fields[sr]}"), TimeElapsedColumn())
        live = stream.is_terminal
        with Progress(*columns, console=stream, disable=not live) as progress:
            for kind in kinds:
                directory = out / kind
                memory = make_memory(kind, directory, embedder=embedder, llm=llm,
                                     extractor=opts.extractor, settings=opts.settings,
                                     budget_chars=opts.memory_chars)
                agent = make_agent(llm, scorer, environment, opts)
                runner = KindRun(kind, memory, agent, environment, directory, gold)
                bar = progress.add_task(f"{env_name} · {kind}", total=per_kind, sr="-")
                try:
                    for i, spec in enumerate(train_specs):
                        runner.train(i, spec)
                        progress.advance(bar)
                    for i, spec in enumerate(eval_specs):
                        learn = not (opts.protocol == "warm" and opts.freeze)
                        fresh = runner.evaluate(i, spec, learn=learn)
                        progress.update(bar, advance=1, sr=runner.running_sr())
                        if fresh and not live:
                            # Why: a log or CI sees progress even without a terminal.
                            record = runner.done[("eval", i)]
                            stream.print(f"{env_name} · {kind}: episode {i + 1}/"
                                         f"{len(eval_specs)} {spec.task_name}#{spec.variation}"
                                         f" success={record['success']} "
                                         f"score={record['score']:.2f} "
                                         f"steps={record['steps']} SR {runner.running_sr()} "
                                         f"({record['wall_s']:.0f} s)", soft_wrap=True)
                finally:
                    memory.close()
                logs[kind] = runner.log
    finally:
        if own_env:
            environment.close()
    return logs
