"""Optional OpenTelemetry spans for the memory operations (``pip install 'deltamem[otel]'``).

``recall`` is a ``search_memory`` span and ``learn`` an ``upsert_memory`` span, named
``"{operation} {space}"`` after the GenAI memory semantic conventions (Development status), with
``gen_ai.operation.name``, ``gen_ai.provider.name`` = ``deltamem`` and
``gen_ai.memory.store.id`` = the space, plus a few ``deltamem.*`` attributes (what matched, what
was written). Query text and memory content are never recorded: they may hold personal data.

Without ``opentelemetry-api`` installed this module does nothing. With it, spans go to whatever
tracer provider the application (or ``opentelemetry-instrument``) configured; the API's default
provider drops them at almost no cost.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, ParamSpec, Protocol, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

try:  # optional extra
    from opentelemetry import trace as _trace
except ImportError:  # pragma: no cover - exercised where the extra is missing
    _trace = None  # type: ignore[assignment]


class HasSpace(Protocol):
    space: str


def memory_span(operation: str, describe: Callable[[Any], dict[str, Any]]
                ) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate a facade method: run it inside an ``operation`` span of ``self.space``.

    ``describe(result)`` gives the attributes added once the method returned; an exception is
    recorded on the span (``error.type``, status ERROR) and raised unchanged.
    """

    def decorate(method: Callable[P, R]) -> Callable[P, R]:
        if _trace is None:
            return method

        @functools.wraps(method)
        def traced(*args: P.args, **kwargs: P.kwargs) -> R:
            assert _trace is not None
            owner: HasSpace = args[0]  # type: ignore[assignment]
            tracer = _trace.get_tracer("deltamem")
            with tracer.start_as_current_span(f"{operation} {owner.space}", attributes={
                "gen_ai.operation.name": operation, "gen_ai.provider.name": "deltamem",
                "gen_ai.memory.store.id": owner.space,
            }) as span:
                try:
                    result = method(*args, **kwargs)
                except Exception as exc:
                    span.set_attribute("error.type", type(exc).__name__)
                    raise
                span.set_attributes(describe(result))
                return result

        return traced

    return decorate
