"""Background consolidation: compile the due chains of every space, outside request paths.

A server (or ``deltamem learn``) with ``auto_consolidate`` off answers ``learn`` without compiling
anything; a worker (``deltamem worker``, or the server's ``--consolidate-every``) then makes
passes over the spaces. Per space it takes the consolidation lease
(:func:`deltamem.store.lease.consolidation_lease`) without waiting: one worker consolidates the
space, the others report it as skipped. The compile itself runs outside the write lock (it may be
an LLM call); each new root is written in its own transaction after checking again that the node
is still due. A dry run reports what a pass would compile and writes nothing.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from deltamem.core.model import Node
from deltamem.engine.memory import DeltaMem
from deltamem.errors import DeltaMemError
from deltamem.store.base import Store
from deltamem.store.lease import consolidation_lease

log = logging.getLogger("deltamem.worker")


@dataclass(slots=True)
class SpacePass:
    """What one pass did in one space.

    ``status``: ``consolidated`` (compiled ``consolidated``), ``idle`` (nothing due),
    ``skipped`` (another worker holds the space), ``dry-run`` (``due`` would be compiled) or
    ``error`` (``error`` says why; the other spaces still ran).
    """

    space: str
    status: str
    due: list[dict[str, Any]] = field(default_factory=list)
    consolidated: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"space": self.space, "status": self.status, "due": self.due,
                                "consolidated": self.consolidated}
        if self.error is not None:
            data["error"] = self.error
        return data


class Worker:
    """Consolidates the due chains of a store's spaces.

    Args:
        store: the shared store (its ``spaces()`` are the work list), or a function giving it
            (a server's worker starts before its database may answer).
        memory_for: the memory of one space (built with the extractor that compiles).
        spaces: only these spaces (default: every space of the store, at each pass).
        dry_run: report what would be compiled; write nothing.
    """

    def __init__(self, store: Store | Callable[[], Store], memory_for: Callable[[str], DeltaMem],
                 *, spaces: Sequence[str] | None = None, dry_run: bool = False):
        self._store = store
        self.memory_for = memory_for
        self.spaces = list(spaces) if spaces else None
        self.dry_run = dry_run

    @property
    def store(self) -> Store:
        source = self._store
        return source() if callable(source) else source

    def run_once(self, stop: threading.Event | None = None) -> list[SpacePass]:
        """One pass over the spaces (stops between spaces once ``stop`` is set)."""
        names = self.spaces or [info.space for info in self.store.spaces()]
        done: list[SpacePass] = []
        for space in names:
            if stop is not None and stop.is_set():
                break
            done.append(self._space(space))
        return done

    def run(self, stop: threading.Event, interval: float,
            report: Callable[[list[SpacePass]], None]) -> None:
        """Pass every ``interval`` seconds until ``stop`` is set; ``report`` gets each pass."""
        while not stop.is_set():
            try:
                report(self.run_once(stop))
            except DeltaMemError as exc:  # the store is unreachable: say so, try again later
                log.warning("consolidation pass failed: %s", exc)
            stop.wait(interval)

    def _space(self, space: str) -> SpacePass:
        try:
            mem = self.memory_for(space)
            due = [_due_entry(node) for node in mem.due()]
            if self.dry_run:
                return SpacePass(space, "dry-run" if due else "idle", due)
            if not due:
                return SpacePass(space, "idle")
            with consolidation_lease(self.store, space) as won:
                if not won:
                    return SpacePass(space, "skipped", due)
                done = [c.wire() for c in mem.consolidate().consolidated]
            return SpacePass(space, "consolidated" if done else "idle", due, done)
        except DeltaMemError as exc:
            log.warning("consolidating space %r failed: %s", space, exc)
            return SpacePass(space, "error", error=f"{type(exc).__name__}: {exc}")


def _due_entry(node: Node) -> dict[str, Any]:
    return {"node": node.id, "tree": node.tree.value, "key": node.key, "depth": node.depth,
            "successes": node.successes}


class BackgroundWorker:
    """A :class:`Worker` passing every ``interval`` seconds in a daemon thread (the server's
    ``--consolidate-every``); each pass that did something is one JSON log line."""

    def __init__(self, worker: Worker, interval: float):
        self._stop = threading.Event()
        self._thread = threading.Thread(target=worker.run, args=(self._stop, interval, _log_pass),
                                        name="deltamem-consolidate", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 60.0) -> None:
        """Stop after the space being consolidated (its transaction completes)."""
        self._stop.set()
        self._thread.join(timeout)


def _log_pass(passes: list[SpacePass]) -> None:
    for done in passes:
        if done.status != "idle":
            log.info(json.dumps({"event": "consolidate", **done.to_dict()}))
