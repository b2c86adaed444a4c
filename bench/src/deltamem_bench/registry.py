"""The registry of evaluated episodes: which (environment, split, family, variation) any
registered run has evaluated, so that a later run can draw episodes no rule has seen.

The registry is a committed JSON Lines file (``results/registry.jsonl`` by default), one record
per episode and run::

    {"env": "twx-twc", "split": "test", "task_name": "twc", "variation": 20439,
     "stream_seed": 0, "run": "docs/results.md twx-twc-warm (v1-v8)"}

An episode is identified by ``(env, split, task_name, variation)``: the same variation with other
generation parameters (TextWorldExpress ``game_params``, a step limit) counts as seen, which errs
on the side of caution. ``stream_seed`` and ``run`` say where the record came from.

A *fresh* stream (:func:`fresh_stream`) draws the split's episodes by seed, exactly as
:func:`~deltamem_bench.runner.episode_stream` does, from the pool without the registered ones.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import zip_longest
from pathlib import Path
from typing import Any

from deltamem.errors import ConfigError
from deltamem_bench.envs.base import Environment, EpisodeSpec

DEFAULT_REGISTRY = Path("results") / "registry.jsonl"
FIELDS = ("env", "split", "task_name", "variation")

EpisodeKey = tuple[str, str, str, int]


def episode_key(env: str, spec: EpisodeSpec) -> EpisodeKey:
    """The registry's identity of one episode."""
    return env, spec.split, spec.task_name, int(spec.variation)


@dataclass(frozen=True)
class Entry:
    """One registry line: an episode, the stream seed that drew it and the run that used it."""

    env: str
    split: str
    task_name: str
    variation: int
    stream_seed: int
    run: str

    @property
    def key(self) -> EpisodeKey:
        """The episode's identity (without seed and run)."""
        return self.env, self.split, self.task_name, self.variation

    def to_dict(self) -> dict[str, Any]:
        """The JSON line's fields."""
        return {"env": self.env, "split": self.split, "task_name": self.task_name,
                "variation": self.variation, "stream_seed": self.stream_seed, "run": self.run}


class Registry:
    """The evaluated episodes recorded in one JSON Lines file (missing file: empty).

    Raises:
        ConfigError: a line of the file is not a registry record.
    """

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.entries: list[Entry] = []
        if self.path.exists():
            for number, line in enumerate(self.path.read_text(encoding="utf-8").splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    raw = json.loads(line)
                    self.entries.append(Entry(str(raw["env"]), str(raw["split"]),
                                              str(raw["task_name"]), int(raw["variation"]),
                                              int(raw.get("stream_seed", 0)),
                                              str(raw.get("run", ""))))
                except (ValueError, KeyError, TypeError) as exc:
                    raise ConfigError(f"{self.path}:{number} is not a registry record "
                                      f"({exc})") from exc
        self._keys = {e.key for e in self.entries}
        self._lines = {(e.key, e.stream_seed, e.run) for e in self.entries}

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def __len__(self) -> int:
        return len(self.entries)

    def episodes(self, env: str | None = None, split: str | None = None) -> set[EpisodeKey]:
        """The registered episodes, optionally of one environment and split."""
        return {k for k in self._keys
                if (env is None or k[0] == env) and (split is None or k[1] == split)}

    def runs_of(self, key: EpisodeKey) -> list[str]:
        """The runs that registered ``key`` (empty when none did)."""
        return [e.run for e in self.entries if e.key == key]

    def reserve(self, env: str, specs: Iterable[EpisodeSpec]) -> None:
        """Count ``specs`` as registered for the fresh draws of this object, without writing
        them (a registration draws entry after entry, then writes them all)."""
        self._keys |= {episode_key(env, s) for s in specs}

    def add(self, env: str, specs: Iterable[EpisodeSpec], *, stream_seed: int, run: str) -> int:
        """Append ``specs`` as evaluated by ``run`` (a line already there is not repeated);
        return the number of lines written."""
        new: list[Entry] = []
        for spec in specs:
            entry = Entry(env, spec.split, spec.task_name, int(spec.variation), stream_seed, run)
            line = (entry.key, stream_seed, run)
            if line not in self._lines:
                self._lines.add(line)
                new.append(entry)
        if new:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as handle:
                for entry in new:
                    handle.write(json.dumps(entry.to_dict()) + "\n")
            self.entries += new
            self._keys |= {e.key for e in new}
        return len(new)


def deal(pool: Sequence[EpisodeSpec], count: int, seed: int) -> list[EpisodeSpec]:
    """``count`` episodes of ``pool``: each family shuffled with ``seed``, then dealt in turn
    (see :func:`deltamem_bench.runner.episode_stream`, which is this over a split's pool)."""
    rng = random.Random(seed)
    groups: dict[str, list[EpisodeSpec]] = {}
    for spec in pool:
        groups.setdefault(spec.task_name, []).append(spec)
    for group in groups.values():
        rng.shuffle(group)
    dealt = [spec for turn in zip_longest(*groups.values()) for spec in turn if spec is not None]
    return dealt[:count]


def fresh_stream(env: Environment, env_name: str, split: str, count: int, seed: int,
                 registry: Registry, families: Sequence[str] | None = None) -> list[EpisodeSpec]:
    """``count`` episodes of ``split`` that no registered run has evaluated, drawn by ``seed``.

    Environments that generate episodes on demand (ALFWorld's generator seeds) are asked for a
    pool large enough to hold ``count`` unregistered ones.

    Raises:
        ConfigError: fewer than ``count`` unregistered episodes are left in the split.
    """
    known = registry.episodes(env_name, split)
    pool = [s for s in env.specs(split, count=count + len(known), families=families)
            if episode_key(env_name, s) not in known]
    if len(pool) < count:
        raise ConfigError(f"{env_name}: only {len(pool)} episodes of split {split!r} are not in "
                          f"{registry.path}; {count} asked")
    return deal(pool, count, seed)
