"""Modules imported when one of their names is first read, not when the module naming them is.

A recall needs none of pydantic: the answer models (``deltamem.formats.api``, the facade's
answers in ``deltamem.engine.results``) are built only when an operation returns one. Importing
them took 80-110 ms of the hook daemon's start, which the first prompt of a session waits for,
though that prompt's recall never builds an answer model (docs/results.md, issue 48).

:func:`module` returns a stand-in for a module: the first read of a name on it imports the
module (under the interpreter's import lock, so threads are safe) and keeps the value as the
stand-in's own attribute, so later reads cost what a read on the module does. A name read once
is not looked up again: do not use a stand-in for a module whose names are reassigned.

Annotations that name a class through a stand-in (``results.Recall``) still resolve with
:func:`typing.get_type_hints`, which evaluates them in the module's globals: the stand-in
imports the real module then. Type checkers see the real module, imported under
``TYPE_CHECKING``::

    if TYPE_CHECKING:
        from deltamem.formats import api
    else:
        api = module("deltamem.formats.api")
"""

from __future__ import annotations

import importlib
from typing import Any


class _Module:
    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:  # only for what this stand-in does not hold yet
        if attr.startswith("__"):  # copy, pickle and friends: no importing for them
            raise AttributeError(attr)
        value = getattr(importlib.import_module(self._name), attr)
        setattr(self, attr, value)
        return value

    def __repr__(self) -> str:
        return f"module({self._name!r})"


def module(name: str) -> Any:
    """A stand-in for the module ``name``, imported on the first read of one of its names."""
    return _Module(name)
