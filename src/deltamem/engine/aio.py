"""The facade for asyncio hosts: :class:`AsyncDeltaMem`.

Each method runs the matching :class:`~deltamem.DeltaMem` method in a worker thread (every public
method of the facade is here, and every operation of :mod:`deltamem.formats.operations`)
(``asyncio.to_thread``), so an event loop (LangGraph, pydantic-ai, the OpenAI Agents SDK, an MCP
server) never blocks on embedding or on the database. The work itself is the same code as the
sync facade: same results, same transactions, same errors. Calls may overlap; the store
serialises what must be serialised (one write transaction at a time per process).

::

    async with await AsyncDeltaMem.open("agent.db") as mem:
        recall = await mem.recall(task="heat the apple", env="a kitchen ...")
        await mem.learn(episode, recall=recall)
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

from deltamem.engine.memory import DeltaMem
from deltamem.formats import operations

P = ParamSpec("P")
R = TypeVar("R")


def _offloaded(method: Callable[Concatenate[DeltaMem, P], R]
               ) -> Callable[Concatenate[AsyncDeltaMem, P], Awaitable[R]]:
    """``DeltaMem.method`` as a coroutine method of :class:`AsyncDeltaMem` (same signature)."""
    async def run(self: AsyncDeltaMem, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await asyncio.to_thread(method, self.sync, *args, **kwargs)

    run.__name__ = method.__name__
    run.__qualname__ = f"AsyncDeltaMem.{method.__name__}"
    run.__doc__ = method.__doc__
    run.__wrapped__ = method  # type: ignore[attr-defined]  # help() shows the real signature
    # typing.get_type_hints reads these in the facade's module (it follows __wrapped__): the
    # parameters and the answer of the facade's method, as an ``async def`` declares them.
    run.__annotations__ = dict(method.__annotations__)
    return run


class AsyncDeltaMem:
    """A :class:`DeltaMem` whose methods are awaitable; ``sync`` is the wrapped facade."""

    def __init__(self, mem: DeltaMem) -> None:
        self.sync = mem

    @classmethod
    async def open(cls, *args: Any, **kwargs: Any) -> AsyncDeltaMem:
        """:meth:`DeltaMem.open` in a worker thread (it may load the embedder)."""
        return cls(await asyncio.to_thread(DeltaMem.open, *args, **kwargs))

    async def __aenter__(self) -> AsyncDeltaMem:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await asyncio.to_thread(self.sync.close)

    @property
    def space(self) -> str:
        return self.sync.space

    async def iter_export(self) -> AsyncIterator[str]:
        """:meth:`DeltaMem.iter_export`, each line read in a worker thread."""
        lines = await asyncio.to_thread(self.sync.iter_export)
        while True:
            line = await asyncio.to_thread(next, lines, None)
            if line is None:
                return
            yield line

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        """An operation of the table (:mod:`deltamem.formats.operations`) that has no typed
        method below, offloaded like the others."""
        if not name.startswith("_"):
            try:
                operations.operation(name)
            except KeyError:
                pass
            else:
                method: Callable[..., Any] = getattr(type(self.sync), name)
                offloaded: Callable[..., Awaitable[Any]] = _offloaded(method).__get__(self)
                return offloaded
        raise AttributeError(name)

    # Every public method of the facade, offloaded (a test holds this list to the facade's).
    recall = _offloaded(DeltaMem.recall)
    learn = _offloaded(DeltaMem.learn)
    learn_many = _offloaded(DeltaMem.learn_many)
    record_outcome = _offloaded(DeltaMem.record_outcome)
    due = _offloaded(DeltaMem.due)
    consolidate = _offloaded(DeltaMem.consolidate)
    correct = _offloaded(DeltaMem.correct)
    forget_fact = _offloaded(DeltaMem.forget_fact)
    add_roots = _offloaded(DeltaMem.add_roots)
    add_nodes = _offloaded(DeltaMem.add_nodes)
    get = _offloaded(DeltaMem.get)
    chain = _offloaded(DeltaMem.chain)
    experience = _offloaded(DeltaMem.experience)
    experiences = _offloaded(DeltaMem.experiences)
    unlearn = _offloaded(DeltaMem.unlearn)
    show = _offloaded(DeltaMem.show)
    list_nodes = _offloaded(DeltaMem.list_nodes)
    stats = _offloaded(DeltaMem.stats)
    check = _offloaded(DeltaMem.check)
    delete = _offloaded(DeltaMem.delete)
    forget = _offloaded(DeltaMem.forget)
    scrub = _offloaded(DeltaMem.scrub)
    purge = _offloaded(DeltaMem.purge)
    export = _offloaded(DeltaMem.export)
    import_ = _offloaded(DeltaMem.import_)
    import_records = _offloaded(DeltaMem.import_records)
    import_lines = _offloaded(DeltaMem.import_lines)
    embed = _offloaded(DeltaMem.embed)


# Facade members that are not offloaded: opening and closing (above), properties, iterators
# (iter_export above; ``nodes`` and ``episodes`` stay on ``sync``), the write block.
NOT_OFFLOADED = frozenset({"open", "close", "nodes", "episodes", "transaction", "iter_export",
                           "placer", "extractor", "exists"})
