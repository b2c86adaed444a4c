"""Regular expressions compiled when first used, not when their module is imported.

The coding rules, the redactor and the text-game scene hold over a hundred module-level
patterns; compiling them all took 37 ms of the hook daemon's start (which the first prompt of a
session waits for), though one call needs only a few of them.
:func:`lazy` takes the arguments of :func:`re.compile` and returns a stand-in that compiles the
pattern the first time one of its methods or attributes other than ``pattern`` is read; from
then on the compiled pattern's methods are the stand-in's own attributes, so a call costs what
a call on the compiled pattern does. ``pattern`` is there at once (patterns are built from one
another's text). The stand-in is not a :class:`re.Pattern`: pass it to nothing that checks.
"""

from __future__ import annotations

import re
from typing import Any, cast

# What a compiled pattern offers; each becomes the stand-in's own attribute once compiled.
_METHODS = ("search", "match", "fullmatch", "sub", "subn", "split", "findall", "finditer",
            "scanner", "flags", "groups", "groupindex")


class _Lazy:
    def __init__(self, pattern: str, flags: int) -> None:
        self.pattern = pattern
        self._flags = flags

    def __getattr__(self, name: str) -> Any:  # only for what this object does not hold yet
        if name.startswith("__"):  # copy, pickle and friends: no compiling for them
            raise AttributeError(name)
        compiled = re.compile(self.pattern, self._flags)
        for method in _METHODS:
            setattr(self, method, getattr(compiled, method))
        return getattr(compiled, name)

    def __repr__(self) -> str:
        return f"lazy({self.pattern!r}, {self._flags!r})"


def lazy(pattern: str, flags: int | re.RegexFlag = 0) -> re.Pattern[str]:
    """``re.compile(pattern, flags)``, compiled on first use (see the module docstring)."""
    return cast("re.Pattern[str]", _Lazy(pattern, int(flags)))
