"""Reading episodes from JSON (their one shape: :class:`deltamem.formats.api.EpisodeIn`) with
errors that name the line and the field."""

from __future__ import annotations

import gzip
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, cast

from pydantic import ValidationError

from deltamem._util import jsonsafe
from deltamem.core.model import Episode, Step
from deltamem.errors import EpisodeError
from deltamem.formats import api

MAX_TEXT = api.MAX_TEXT
MAX_STEPS = api.MAX_STEPS
EPISODE_FIELDS = tuple(api.EpisodeIn.model_fields)


def episode_from_dict(data: Any, *, where: str | None = None) -> Episode:
    """Validate a decoded JSON object with :class:`deltamem.formats.api.EpisodeIn` (the one episode
    model of every face) and build an :class:`Episode`.

    Raises:
        EpisodeError: naming ``where`` and the offending field.
    """
    try:
        wire = api.EpisodeIn.model_validate(data)
    except ValidationError as exc:
        raise episode_error(exc, where=where) from None
    return episode_from_wire(wire)


def episode_from_wire(wire: api.EpisodeIn) -> Episode:
    """The :class:`Episode` of a validated :class:`deltamem.formats.api.EpisodeIn`."""
    steps = tuple(Step(action=s.action, observation=s.observation, thought=s.thought,
                       reward=s.reward) for s in wire.steps)
    return Episode(task=wire.task, env=wire.env, steps=steps, success=wire.success,
                   score=wire.score, meta=wire.meta)


def episode_error(exc: ValidationError, *, where: str | None = None) -> EpisodeError:
    """The :class:`EpisodeError` for the first problem pydantic found in an episode, worded as
    deltamem words it on every face (``field 'steps[1].action' must be a string, got int``)."""
    first = exc.errors(include_url=False)[0]
    loc = tuple(first.get("loc", ()))
    name = _field_name(loc)
    return EpisodeError(_message(first, loc, name), where=where, field=name or None)


def _field_name(loc: tuple[Any, ...]) -> str:
    name = ""
    for part in loc:
        if isinstance(part, int):
            name += f"[{part}]"
        else:
            name += f".{part}" if name else str(part)
    return name


def _message(error: Any, loc: tuple[Any, ...], name: str) -> str:  # noqa: C901 - one table
    kind, value, ctx = error["type"], error.get("input"), error.get("ctx") or {}
    got = _kind(value)
    if not loc:
        return f"an episode must be a JSON object, got {got}"
    if kind == "extra_forbidden":
        if len(loc) == 1:
            return f"unknown field {name!r} (allowed: {sorted(EPISODE_FIELDS)})"
        return f"unknown field '{name}'"
    if kind == "missing" or (kind == "string_type" and value is None
                             and loc[-1] in ("task", "action")):
        return f"missing required field '{name}'"
    if kind in ("too_short", "string_too_short") and isinstance(value, str):
        return f"field '{name}' must not be empty"
    if kind == "string_unicode":
        return f"field '{name}' {jsonsafe.text_problem(value) or 'is not valid Unicode text'}"
    if kind == "string_too_long":
        return f"field '{name}' is {len(value)} characters; at most {ctx['max_length']}"
    if kind == "too_long":
        return f"field '{name}' has {ctx['actual_length']} items; at most {ctx['max_length']}"
    if kind == "value_error":
        problem = str(ctx.get("error", error["msg"]))
        return f"field {problem}" if loc == ("meta",) else f"field '{name}' {problem}"
    expected = {"string_type": "a string", "bool_type": "true or false", "list_type": "a list",
                "dict_type": "an object", "model_type": "an object",
                "float_type": "a finite number or null",
                "finite_number": "a finite number or null"}.get(kind)
    if expected is not None:
        return f"field '{name}' must be {expected}, got {got}"
    return f"field '{name}': {error['msg']}"


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


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def episode_to_dict(episode: Episode) -> dict[str, Any]:
    """The JSON form accepted by :func:`episode_from_dict` (:class:`deltamem.formats.api.EpisodeIn`;
    a step's ``thought`` and ``reward`` only when set). Not validated: a library episode may be
    longer than the wire accepts."""
    steps = []
    for s in episode.steps:
        step: dict[str, Any] = {"action": s.action, "observation": s.observation}
        if s.thought is not None:
            step["thought"] = s.thought
        if s.reward is not None:
            step["reward"] = s.reward
        steps.append(api.StepIn.model_construct(**step))
    wire = api.EpisodeIn.model_construct(task=episode.task, env=episode.env,
                                         success=episode.success, score=episode.score,
                                         steps=steps, meta=episode.meta)
    return wire.model_dump(exclude_unset=True)


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
