"""Ask a model for a JSON object and get back a validated pydantic object, or an error.

Small and local models wrap JSON in prose or code fences, leave raw newlines inside strings, use
single quotes or trailing commas. :func:`parse_json_object` repairs exactly those slips with a
ladder of small, string-aware text fixes and nothing else: it never guesses field values from
prose. :func:`ask_structured` validates the result against a pydantic model, gives the model one
chance (by default) to correct itself from the validation errors, and otherwise raises
:class:`~deltamem.errors.ExtractionError`. It never returns a half-parsed object.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from deltamem._util.usage import Usage
from deltamem.errors import ExtractionError
from deltamem.llm.base import LLM, Message

T = TypeVar("T", bound=BaseModel)

MAX_RAW_CHARS = 100_000  # a longer answer is runaway generation, not an experience
_FEEDBACK_RAW_CHARS = 1500  # how much of a bad answer is echoed back on retry
_MAX_REPORTED_ERRORS = 6

_FENCE = re.compile(r"```[ \t]*[A-Za-z0-9_-]*[ \t]*\r?\n?(.*?)(?:```|\Z)", re.DOTALL)
_CONTROL = re.compile("[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]")


class JSONRepairError(ValueError):
    """The text could not be turned into one JSON object."""


# -- the repair ladder ----------------------------------------------------------------------------


def _chars(text: str, start: int = 0) -> Iterator[tuple[int, str, bool]]:
    """``(index, char, inside a string)`` for each character; quotes count as inside."""
    in_string = escaped = False
    for i in range(start, len(text)):
        ch = text[i]
        if in_string:
            yield i, ch, True
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        else:
            if ch == '"':
                in_string = True
            yield i, ch, in_string


def strip_fences(text: str) -> str:
    """Content of the first Markdown code fence, or the text unchanged if there is none."""
    match = _FENCE.search(text)
    return match.group(1).strip() if match else text


def cut_object(text: str) -> str:
    """The first balanced ``{...}`` in the text, dropping prose before and after it.

    Braces inside double-quoted strings are ignored. An unbalanced object (cut off by the token
    limit) is returned from its ``{`` to the last ``}`` so later rungs can still try.
    """
    start = text.find("{")
    if start < 0:
        return text
    depth = 0
    for i, ch, in_string in _chars(text, start):
        if in_string:
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return text[start : i + 1]
    end = text.rfind("}")
    return text[start : end + 1] if end > start else text[start:]


def escape_controls_in_strings(text: str) -> str:
    """Escape raw newlines, tabs and other control characters inside double-quoted strings."""
    out: list[str] = []
    for _, ch, in_string in _chars(text):
        if in_string and ord(ch) < 0x20:
            out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(ch, f"\\u{ord(ch):04x}"))
        else:
            out.append(ch)
    return "".join(out)


def remove_control_chars(text: str) -> str:
    """Drop control characters other than the JSON whitespace ``\\n``, ``\\r`` and ``\\t``."""
    return _CONTROL.sub("", text)


def remove_trailing_commas(text: str) -> str:
    """Drop commas that directly precede ``}`` or ``]`` (outside strings)."""
    out: list[str] = []
    for i, ch, in_string in _chars(text):
        if not in_string and ch == "," and text[i + 1 :].lstrip()[:1] in ("}", "]"):
            continue
        out.append(ch)
    return "".join(out)


def single_to_double_quotes(text: str) -> str:
    """Rewrite single-quoted strings (Python-literal style) as JSON double-quoted strings."""
    out: list[str] = []
    quote: str | None = None
    escaped = False
    for ch in text:
        if quote is None:
            if ch in ("'", '"'):
                quote = ch
                out.append('"')
            else:
                out.append(ch)
            continue
        if escaped:
            escaped = False
            # \' is not a JSON escape; everything else stays as written.
            out.append("'" if ch == "'" and quote == "'" else "\\" + ch)
        elif ch == "\\":
            escaped = True
        elif ch == quote:
            quote = None
            out.append('"')
        elif ch == '"':  # a double quote inside a single-quoted string
            out.append('\\"')
        else:
            out.append(ch)
    return "".join(out)


_LADDER: tuple[Callable[[str], str], ...] = (
    strip_fences,
    cut_object,
    escape_controls_in_strings,
    remove_control_chars,
    remove_trailing_commas,
    single_to_double_quotes,
)


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except RecursionError:  # absurdly deep nesting; not worth repairing
        raise JSONRepairError("JSON nested too deeply") from None


def parse_json_object(raw: str) -> dict[str, Any]:
    """Parse a model answer into a JSON object, repairing common formatting slips.

    Each rung of the ladder transforms the previous rung's text and is tried in order: strip
    code fences, cut the outermost object out of surrounding prose, escape raw control
    characters inside strings, remove stray control characters, drop trailing commas, convert
    single quotes. The first text that parses wins.

    Raises:
        JSONRepairError: no rung produced valid JSON, or the JSON is not an object (an array, a
            string, a number) -- arrays are not unwrapped, the schema asks for an object.
    """
    if len(raw) > MAX_RAW_CHARS:
        raise JSONRepairError(f"answer is {len(raw)} characters, over the {MAX_RAW_CHARS} limit")
    text = raw.strip()
    if not text:
        raise JSONRepairError("answer is empty")
    error: str = "no JSON object found"
    candidates = [text]
    for rung in _LADDER:
        text = rung(text)
        if text != candidates[-1]:
            candidates.append(text)
    for candidate in candidates:
        try:
            value = _loads(candidate)
        except json.JSONDecodeError as exc:
            error = f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
            continue
        if not isinstance(value, dict):
            raise JSONRepairError(f"expected a JSON object, got a JSON {_json_type(value)}")
        return value
    raise JSONRepairError(error)


def _json_type(value: Any) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    return "null" if value is None else "number"


# -- validation and the retry loop ----------------------------------------------------------------


def summarize_validation_error(exc: ValidationError) -> str:
    """One short line per problem, e.g. ``steps.2: String should have at most 500 characters``."""
    lines = []
    for err in exc.errors(include_url=False, include_input=False)[:_MAX_REPORTED_ERRORS]:
        where = ".".join(str(part) for part in err["loc"]) or "(answer)"
        lines.append(f"{where}: {err['msg']}")
    extra = exc.error_count() - len(lines)
    if extra > 0:
        lines.append(f"... and {extra} more")
    return "; ".join(lines)


def validate_answer(raw: str, model_cls: type[T]) -> T:
    """Repair and validate one raw answer.

    Raises:
        JSONRepairError: the text is not a JSON object.
        ValidationError: the object does not match ``model_cls``.
    """
    return model_cls.model_validate(parse_json_object(raw))


def ask_structured(
    llm: LLM,
    messages: Sequence[Message],
    model_cls: type[T],
    *,
    retries: int = 1,
    schema: dict[str, Any] | None = None,
    temperature: float = 0.0,
    max_tokens: int = 512,
    label: str | None = None,
) -> tuple[T, Usage, str]:
    """Ask ``llm`` for an answer matching ``model_cls``; retry with the errors as feedback.

    Args:
        llm: The model.
        messages: The conversation; it is not modified.
        model_cls: The pydantic model the answer must validate against.
        retries: Extra attempts after the first, each showing the model its previous answer and
            what was wrong with it.
        schema: JSON schema passed to the provider (default: derived from ``model_cls``).
        temperature: Sampling temperature.
        max_tokens: Answer length limit per attempt.
        label: Names the episode in the error message.

    Returns:
        ``(validated object, usage of all attempts, raw text of the accepted answer)``.

    Raises:
        ExtractionError: no attempt validated; carries the last raw answer, the number of
            attempts and the usage spent.
        ProviderError: the model itself failed (propagated unchanged).
    """
    if schema is None:
        from deltamem.extract.schemas import answer_schema

        schema = answer_schema(model_cls)
    usage = Usage()
    started = time.perf_counter()
    conversation = [dict(m) for m in messages]
    raw = ""
    problem = ""
    for _ in range(retries + 1):
        completion = llm.complete(
            conversation, schema=schema, temperature=temperature, max_tokens=max_tokens
        )
        usage.llm_calls += 1
        usage.prompt_tokens += completion.prompt_tokens
        usage.completion_tokens += completion.completion_tokens
        raw = completion.text
        try:
            obj = validate_answer(raw, model_cls)
        except JSONRepairError as exc:
            problem = f"it is not a single JSON object ({exc})"
        except ValidationError as exc:
            problem = f"it does not match the schema: {summarize_validation_error(exc)}"
        else:
            usage.wall_ms += (time.perf_counter() - started) * 1000.0
            return obj, usage, raw
        if completion.truncated:  # no repair can finish it; say so, to the model and the user
            problem += f"; it was cut off at the {max_tokens}-token limit, so answer shorter"
        conversation = [
            *conversation,
            {"role": "assistant", "content": raw[:_FEEDBACK_RAW_CHARS]},
            {"role": "user", "content": _feedback(problem, schema)},
        ]
    usage.wall_ms += (time.perf_counter() - started) * 1000.0
    raise ExtractionError(
        f"the model's answer was not a valid {model_cls.__name__} after {retries + 1} "
        f"attempt(s): {problem}",
        episode=label,
        raw=raw,
        attempts=retries + 1,
        usage=usage,
    )


def _feedback(problem: str, schema: dict[str, Any]) -> str:
    return (
        f"Your answer was rejected because {problem}. Reply again with only one JSON object "
        f"that follows this schema, no other text:\n{json.dumps(schema, separators=(',', ':'))}"
    )
