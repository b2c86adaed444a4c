"""The storage port.

A :class:`Store` keeps, per *space* (an isolated namespace, e.g. one per agent), the nodes of both
trees with their vectors, and the episodes that were learned. Every backend (SQLite, Postgres)
implements this abstract base class and passes the shared conformance suite in
``deltamem.testing.conformance``. The SQL backends do it through one base class,
:class:`deltamem.store.sql.SQLStore`: a new SQL backend writes its statements (the names of
``store/_sql_sqlite.py``) and five methods -- ``_read``, ``_block``, ``_transaction``,
``_insert_node``, ``_vector_rows`` -- plus ``close``, and inherits the rest of this contract.

Semantics every backend must keep:

* Writes happen inside ``with store.write(space):``, which is atomic and serialises writers of the
  same space (SQLite: ``BEGIN IMMEDIATE``; Postgres: a transaction plus an advisory lock). Reads
  inside the block see the block's own writes. An exception rolls everything back.
* ``scan`` is exact: it scores every node of the tree with ``cos(q, v) - penalty * [failure]`` and
  returns the best ``k`` in order of score, ties broken by shallower depth, then later insertion.
* ``nodes`` yields in insertion order, so parents always come before their children.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Hashable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from deltamem.core.model import Experience, Node, Tree
from deltamem.core.ranking import Candidate as Candidate  # re-exported: a scan returns them
from deltamem.errors import StoreError

Vector = npt.NDArray[np.float32]


@dataclass(frozen=True, slots=True)
class EpisodeRecord:
    """A learned episode as stored: the raw episode plus what learning did with it."""

    id: str
    task: str
    env: str
    success: bool
    score: float | None
    steps: list[dict[str, Any]]
    meta: dict[str, Any] = field(default_factory=dict)
    result: dict[str, Any] = field(default_factory=dict)
    flat_chars: int = 0
    created_at: float = 0.0


@dataclass(frozen=True, slots=True)
class SpaceInfo:
    """Which embedder a space was built with (vectors from two embedders never mix)."""

    space: str
    embedder: str
    dim: int


@dataclass(frozen=True, slots=True)
class Footprint:
    """What a space keeps live for recall, in characters: the stored JSON of its nodes'
    experiences and patches, per tree (text numbers included, ``store.texts``), and the texts
    kept once for the space (``texts``, ``text_count`` of them). Ids, keys, metadata, counters
    and vectors are not counted."""

    task: int = 0
    env: int = 0
    texts: int = 0
    text_count: int = 0

    @property
    def total(self) -> int:
        return self.task + self.env + self.texts


# How far from 1 a stored vector's norm may be (``store.integrity.NORM_TOLERANCE`` is this).
UNIT_TOLERANCE = 1e-3


def check_vector(space: str, node_id: str, vector: Vector, dim: int) -> None:
    """Refuse a vector of the wrong width, with NaN/infinite values or not of unit norm (nor
    zero): every backend does, and scans leave such stored vectors out."""
    shape = np.shape(vector)
    if shape != (dim,):
        raise StoreError(f"node {node_id!r} has a vector of shape {shape}; space {space!r} is "
                         f"{dim}-d")
    if not np.isfinite(vector).all():
        raise StoreError(f"node {node_id!r} has a vector with NaN or infinite values")
    norm = float(np.linalg.norm(np.asarray(vector, dtype=np.float64)))
    if norm != 0.0 and abs(norm - 1.0) > UNIT_TOLERANCE:
        raise StoreError(f"node {node_id!r} has a vector of norm {norm:.6g}; embedders return "
                         "unit-norm vectors (or zeros), and a scan leaves any other out")


class Store(ABC):
    """Persistent home of the residual trees. See the module docstring for the contract.

    A backend implements the abstract operations; the conveniences (:meth:`get_node`,
    :meth:`chain`, :meth:`vector`) are written once here over the batch operations, and no
    backend overrides them (``tests/store/test_contract.py``).
    """

    url: str

    # -- spaces ---------------------------------------------------------------------------
    @abstractmethod
    def ensure_space(self, space: str, embedder: str, dim: int) -> SpaceInfo:
        """Register ``space`` with this embedder, or check it matches (``EmbedderMismatch``)."""

    @abstractmethod
    def spaces(self) -> list[SpaceInfo]:
        """Every space, with its embedder and width."""

    # -- transactions -----------------------------------------------------------------------
    @abstractmethod
    def write(self, space: str) -> AbstractContextManager[None]:
        """Atomic, serialised write block for ``space``."""

    # -- nodes ----------------------------------------------------------------------------
    @abstractmethod
    def add_node(self, space: str, node: Node, vector: Vector) -> None:
        """Store ``node`` with its unit-norm ``vector`` (inside :meth:`write`)."""

    @abstractmethod
    def get_nodes(self, space: str, node_ids: Sequence[str]) -> dict[str, Node]:
        """Many nodes in one round trip, keyed by id in the order of ``node_ids`` (duplicates
        once); missing ids are absent from the result."""

    @abstractmethod
    def metas(self, space: str, node_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The ``meta`` of many nodes in one round trip, keyed like :meth:`get_nodes` (what a
        metadata filter reads, without decoding the nodes' experiences)."""

    @abstractmethod
    def chains(self, space: str, node_ids: Sequence[str]) -> dict[str, list[Node]]:
        """The path root -> node (inclusive) of many nodes in one round trip, keyed by id in the
        order of ``node_ids``; missing ids are absent from the result."""

    @abstractmethod
    def children(self, space: str, node_id: str) -> list[Node]:
        """The node's children, in insertion order."""

    @abstractmethod
    def nodes(self, space: str, tree: Tree | None = None) -> Iterator[Node]:
        """Every node of the space (or of one tree), in insertion order."""

    @abstractmethod
    def vectors(self, space: str, node_ids: list[str]) -> dict[str, Vector]:
        """Vectors of many nodes in one round trip (missing ids are absent from the result)."""

    @abstractmethod
    def bump(self, space: str, node_id: str, *, hits: int = 0, successes: int = 0,
             failures: int = 0) -> None:
        """Add to the node's usage counters."""

    @abstractmethod
    def mark_consolidated(self, space: str, node_id: str) -> None:
        """Record that the node's chain was consolidated into a new root."""

    @abstractmethod
    def delete_subtree(self, space: str, node_id: str) -> list[str]:
        """Delete the node and all its descendants (and their vectors, and the history of the
        nodes retired into them, :meth:`retire`); return the ids."""

    @abstractmethod
    def retire(self, space: str, into: str, retired: Sequence[tuple[Node, Experience]],
               moved: Sequence[Node]) -> None:
        """Consolidation's rewrite (inside :meth:`write`; ``core.tree.retirement``): the
        ``retired`` nodes leave the live trees -- rows, vectors and the texts only they held --
        and are kept in the audit log, each with the experience it composed to (one entry,
        action ``"retire"``, detail ``{"into": into, "nodes": [...]}``,
        ``store.rows.retired_record``); the ``moved`` nodes get their new parent, depth and
        patch. A retired node is never scanned, read as a node or counted by
        :meth:`footprint` again. Deleting ``into`` (or the root it was retired into in turn)
        deletes its history, and so does forgetting the space."""

    @abstractmethod
    def forget_space(self, space: str) -> int:
        """Delete everything in ``space`` (its retired history too); return how many nodes
        went."""

    @abstractmethod
    def footprint(self, space: str) -> Footprint:
        """What ``space`` keeps for recall, in characters (:class:`Footprint`)."""

    # -- retrieval ------------------------------------------------------------------------
    @abstractmethod
    def scan(self, space: str, tree: Tree, query: Vector, *, penalty: float, k: int = 1,
             approximate_from: int = 0) -> list[Candidate]:
        """The best ``k`` nodes of the tree under the penalised score, exactly; a tree of
        committed rows larger than ``approximate_from`` (0: never) may be scanned through an
        approximate index whose candidates are re-scored exactly (``store.ann``)."""

    def scan_vectors(self, space: str, tree: Tree, query: Vector, *, penalty: float,
                     k: int = 1, approximate_from: int = 0
                     ) -> tuple[list[Candidate], dict[str, Vector]]:
        """:meth:`scan`, with the vectors of the nodes it returns (as :meth:`vectors` gives
        them). This default makes both calls; a store that scans rows it holds in memory
        answers from the rows it scanned, in one pass."""
        found = self.scan(space, tree, query, penalty=penalty, k=k,
                          approximate_from=approximate_from)
        return found, self.vectors(space, [c.id for c in found])

    # -- episodes -------------------------------------------------------------------------
    @abstractmethod
    def add_episode(self, space: str, record: EpisodeRecord) -> None:
        """Keep a learned episode (inside :meth:`write`)."""

    @abstractmethod
    def episodes(self, space: str) -> Iterator[EpisodeRecord]:
        """The space's episodes, oldest first."""

    @abstractmethod
    def count_episodes(self, space: str) -> int:
        """How many episodes the space holds."""

    # -- audit ----------------------------------------------------------------------------
    @abstractmethod
    def audit_log(self, space: str) -> list[dict[str, Any]]:
        """The space's deletions, oldest first: ``{"action", "detail", "at"}`` dicts."""

    @abstractmethod
    def compact(self) -> list[str]:
        """Drop every stored byte that a rewrite replaced (after ``scrub``): old row versions,
        free pages and the write-ahead log as far as the backend allows. Returns what it ran,
        and what it could not run and why, one line each."""

    @abstractmethod
    def close(self) -> None:
        """Release connections and files; the store is not used afterwards."""

    # -- conveniences, written once over the batch operations -------------------------------
    def get_node(self, space: str, node_id: str) -> Node | None:
        """One node (None when there is none): :meth:`get_nodes` of one id."""
        return self.get_nodes(space, [node_id]).get(node_id)

    def chain(self, space: str, node_id: str) -> list[Node]:
        """The path root -> ``node_id`` (inclusive); empty if the node does not exist."""
        return self.chains(space, [node_id]).get(node_id, [])

    def vector(self, space: str, node_id: str) -> Vector | None:
        """One node's vector (None when there is none): :meth:`vectors` of one id."""
        return self.vectors(space, [node_id]).get(node_id)

    def changes(self, space: str) -> Hashable | None:
        """A token equal between two calls only if no node of ``space`` was added or deleted in
        between, as this context sees it (so a :meth:`scan` made between them still holds);
        ``None`` when the store cannot tell cheaply (then callers assume a change)."""
        return None
