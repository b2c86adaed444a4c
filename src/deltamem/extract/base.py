"""The extractor port: an episode (plus the chain it matched) in, a full experience out.

Extractors write the *new full* experience; the engine computes the residual against the matched
chain itself (``core.delta.diff``). So an extractor never has to produce a patch, and whatever it
writes is stored exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from deltamem._util.usage import Usage
from deltamem.core.model import Episode, Experience, Tree
from deltamem.scenes.base import Scene


@dataclass(frozen=True, slots=True)
class ExtractRequest:
    """What an extractor sees for one tree of one episode.

    ``matched`` is the composed experience of the chain the episode matched (None when nothing
    matched, i.e. a new root will be written). ``scene`` is the memory's scene plug-in
    (``deltamem.scenes``), for extractors that read scene facts off observations (None: the
    extractor's own choice).
    """

    episode: Episode
    tree: Tree
    matched: Experience | None = None
    scene: Scene | None = None


@dataclass(slots=True)
class Extraction:
    """An extractor's answer for one tree of one episode."""

    experience: Experience
    usage: Usage = field(default_factory=Usage)
    note: str = ""
    # What the episode alone yields, when that differs from ``experience`` (e.g. knowledge merged
    # into a known scene): a flat one-record-per-episode memory would store this instead.
    standalone: Experience | None = None

    @property
    def flat(self) -> Experience:
        return self.standalone if self.standalone is not None else self.experience


@runtime_checkable
class Extractor(Protocol):
    """Turns episodes into experiences and compiles consolidated chains.

    ``uses_llm`` tells the engine whether skipping a call is worth anything (the dedup-before-the-
    model rule only applies to extractors that call a model).
    """

    name: str
    uses_llm: bool

    def extract(self, request: ExtractRequest) -> Extraction: ...

    def compile(self, tree: Tree, composed: Experience) -> Extraction:
        """Generalise a consolidated chain's composition into a new root's experience."""
        ...
