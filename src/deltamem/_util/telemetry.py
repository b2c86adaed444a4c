"""Optional OpenTelemetry spans for the memory operations (``pip install 'deltamem[otel]'``).

``recall`` is a ``search_memory`` span and ``learn`` an ``upsert_memory`` span, named
``"{operation} {space}"`` after the GenAI memory semantic conventions (Development status), with
``gen_ai.operation.name``, ``gen_ai.provider.name`` = ``deltamem`` and
``gen_ai.memory.store.id`` = the space, plus a few ``deltamem.*`` attributes (what matched, what
was written). Query text and memory content are never recorded: they may hold personal data.

Spans go to whatever tracer provider the application (or ``opentelemetry-instrument``) configured.
deltamem never imports OpenTelemetry itself: an application that configured a provider has
imported ``opentelemetry.trace`` already, and one that has not would have its spans dropped by the
API's default provider anyway (``opentelemetry-instrument`` loads it before the application).
So a method is traced only once ``opentelemetry.trace`` is loaded; otherwise it runs as it is,
and a process that does not trace does not pay the API's import (about 12 ms of the hook
daemon's start, which the first prompt of a session waits for).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any, ParamSpec, Protocol, TypeVar

P = ParamSpec("P")
R = TypeVar("R")
_TRACE = "opentelemetry.trace"


def _tracing() -> ModuleType | None:
    """``opentelemetry.trace`` where the process traces (see the module docstring), else None."""
    return sys.modules.get(_TRACE)


class HasSpace(Protocol):
    space: str


def memory_span(operation: str, describe: Callable[[Any], dict[str, Any]]
                ) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate a facade method: run it inside an ``operation`` span of ``self.space``.

    ``describe(result)`` gives the attributes added once the method returned; an exception is
    recorded on the span (``error.type``, status ERROR) and raised unchanged.
    """

    def decorate(method: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(method)
        def traced(*args: P.args, **kwargs: P.kwargs) -> R:
            trace = _tracing()
            if trace is None:
                return method(*args, **kwargs)
            owner: HasSpace = args[0]  # type: ignore[assignment]
            tracer = trace.get_tracer("deltamem")
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
