"""Reading episodes from JSON (DESIGN.md §5) with errors that name the line and the field."""

from __future__ import annotations

import gzip
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, cast

from deltamem._util import jsonsafe
from deltamem.core.model import Episode, Step
from deltamem.errors import EpisodeError

MAX_TEXT = 100_000
MAX_STEPS = 1_000


def episode_from_dict(data: Any, *, where: str | None = None) -> Episode:
    """Validate a decoded JSON object and build an :class:`Episode`.

    Raises:
        EpisodeError: naming ``where`` and the offending field.
    """
    if not isinstance(data, dict):
        raise EpisodeError(f"an episode must be a JSON object, got {_kind(data)}", where=where)
    known = {"task", "env", "steps", "success", "score", "meta"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise EpisodeError(f"unknown field {unknown[0]!r} (allowed: {sorted(known)})",
                           where=where, field=unknown[0])
    task = _text(data, "task", where, required=True)
    env = _text(data, "env", where)
    success = data.get("success")
    if not isinstance(success, bool):
        raise EpisodeError(f"field 'success' must be true or false, got {_kind(success)}",
                           where=where, field="success")
    score = _number(data.get("score"), where, "score")
    meta = data.get("meta", {})
    if not isinstance(meta, dict):
        raise EpisodeError(f"field 'meta' must be an object, got {_kind(meta)}",
                           where=where, field="meta")
    episode = Episode(task=task, env=env, steps=_steps(data.get("steps", []), where),
                      success=success, score=score, meta=meta)
    check_episode(episode, where=where)
    return episode


def check_episode(episode: Episode, *, where: str | None = None) -> None:
    """Refuse an episode that a store could not hold exactly (the same rule on every backend).

    Every text must be Unicode without NUL characters, the score and every step reward finite,
    and ``meta`` plain JSON (finite numbers, at most ``jsonsafe.MAX_NESTING`` levels deep).

    Raises:
        EpisodeError: naming the offending field.
    """
    texts = [("task", episode.task), ("env", episode.env)]
    for i, step in enumerate(episode.steps):
        texts += [(f"steps[{i}].action", step.action), (f"steps[{i}].observation",
                                                        step.observation)]
        if step.thought is not None:
            texts.append((f"steps[{i}].thought", step.thought))
    for name, text in texts:
        problem = jsonsafe.text_problem(text) if isinstance(text, str) else "is not a string"
        if problem:
            raise EpisodeError(f"field '{name}' {problem}", where=where, field=name)
    numbers = [("score", episode.score)] + [(f"steps[{i}].reward", step.reward)
                                            for i, step in enumerate(episode.steps)]
    for name, number in numbers:
        if number is not None and not math.isfinite(number):
            raise EpisodeError(f"field '{name}' must be a finite number", where=where, field=name)
    problem = jsonsafe.value_problem(episode.meta, "meta")
    if problem:
        raise EpisodeError(f"field {problem}", where=where, field="meta")


def _number(raw: Any, where: str | None, name: str) -> float | None:
    if raw is None:
        return None
    try:
        value = float(raw) if isinstance(raw, int | float) and not isinstance(raw, bool) \
            else math.nan
    except OverflowError:  # an integer too large for a float
        value = math.inf
    if not math.isfinite(value):
        raise EpisodeError(f"field '{name}' must be a finite number or null, got {_kind(raw)}",
                           where=where, field=name)
    return value


def _steps(raw: Any, where: str | None) -> tuple[Step, ...]:
    if not isinstance(raw, list):
        raise EpisodeError(f"field 'steps' must be a list, got {_kind(raw)}",
                           where=where, field="steps")
    if len(raw) > MAX_STEPS:
        raise EpisodeError(f"field 'steps' has {len(raw)} items; at most {MAX_STEPS}",
                           where=where, field="steps")
    steps = []
    for i, item in enumerate(raw):
        name = f"steps[{i}]"
        if not isinstance(item, dict):
            raise EpisodeError(f"field '{name}' must be an object, got {_kind(item)}",
                               where=where, field=name)
        extra = sorted(set(item) - {"action", "observation", "thought", "reward"})
        if extra:
            raise EpisodeError(f"unknown field '{name}.{extra[0]}'", where=where,
                               field=f"{name}.{extra[0]}")
        action = _text(item, "action", where, required=True, prefix=name)
        observation = _text(item, "observation", where, prefix=name)
        thought = item.get("thought")
        if thought is not None:
            thought = _text(item, "thought", where, prefix=name)
        reward = _number(item.get("reward"), where, f"{name}.reward")
        steps.append(Step(action=action, observation=observation, thought=thought,
                          reward=reward))
    return tuple(steps)


def _text(data: dict[str, Any], key: str, where: str | None, *, required: bool = False,
          prefix: str = "") -> str:
    name = f"{prefix}.{key}" if prefix else key
    if key not in data or data[key] is None:
        if required:
            raise EpisodeError(f"missing required field '{name}'", where=where, field=name)
        return ""
    value = data[key]
    if not isinstance(value, str):
        raise EpisodeError(f"field '{name}' must be a string, got {_kind(value)}",
                           where=where, field=name)
    if required and not value.strip():
        raise EpisodeError(f"field '{name}' must not be empty", where=where, field=name)
    if len(value) > MAX_TEXT:
        raise EpisodeError(f"field '{name}' is {len(value)} characters; at most {MAX_TEXT}",
                           where=where, field=name)
    return value


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def episode_to_dict(episode: Episode) -> dict[str, Any]:
    """The JSON form accepted by :func:`episode_from_dict`."""
    steps = []
    for s in episode.steps:
        step: dict[str, Any] = {"action": s.action, "observation": s.observation}
        if s.thought is not None:
            step["thought"] = s.thought
        if s.reward is not None:
            step["reward"] = s.reward
        steps.append(step)
    return {"task": episode.task, "env": episode.env, "success": episode.success,
            "score": episode.score, "steps": steps, "meta": episode.meta}


def read_episodes(path: str | Path) -> Iterator[tuple[int, Episode | EpisodeError]]:
    """Yield ``(line_number, episode or error)`` for every non-blank line of a JSONL file.

    A path ending in ``.gz`` is read gzip-compressed. Errors are yielded, not raised, so a caller
    can decide whether one bad line stops the file. Raises ``EpisodeError`` only when the file
    cannot be read at all.
    """
    p = Path(path)
    try:
        handle = _open(p)
    except OSError as exc:
        raise EpisodeError(f"cannot read episodes: {exc.strerror or exc}", where=str(p)) from exc
    with handle:
        yield from _parse_lines(p, _lines(p, handle))


def _open(p: Path) -> IO[bytes]:
    if p.suffix == ".gz":
        return cast(IO[bytes], gzip.open(p, "rb"))  # noqa: SIM115 - the caller closes it
    return p.open("rb")


def _lines(p: Path, handle: IO[bytes]) -> Iterator[bytes]:
    try:
        yield from handle
    except (OSError, EOFError) as exc:  # a damaged or cut-off .gz file
        raise EpisodeError(f"cannot read episodes: {exc}", where=str(p)) from exc


def _parse_lines(p: Path, lines: Iterator[bytes]) -> Iterator[tuple[int, Episode | EpisodeError]]:
    for lineno, raw in enumerate(lines, 1):
        where = f"{p}:{lineno}"
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            yield lineno, EpisodeError("line is not valid UTF-8", where=where)
            continue
        if not line.strip():
            continue
        try:
            data = jsonsafe.loads(line)
        except json.JSONDecodeError as exc:
            yield lineno, EpisodeError(f"invalid JSON ({exc.msg} at column {exc.colno})",
                                       where=where)
            continue
        except ValueError as exc:  # NaN, Infinity, nesting
            yield lineno, EpisodeError(f"invalid JSON ({exc})", where=where)
            continue
        try:
            yield lineno, episode_from_dict(data, where=where)
        except EpisodeError as exc:
            yield lineno, exc
