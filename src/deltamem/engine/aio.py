"""The facade for asyncio hosts: :class:`AsyncDeltaMem`.

Each method runs the matching :class:`~deltamem.DeltaMem` method in a worker thread
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
from collections.abc import Awaitable, Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

from deltamem.engine.memory import DeltaMem

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

    recall = _offloaded(DeltaMem.recall)
    learn = _offloaded(DeltaMem.learn)
    record_outcome = _offloaded(DeltaMem.record_outcome)
    consolidate = _offloaded(DeltaMem.consolidate)
    show = _offloaded(DeltaMem.show)
    list_nodes = _offloaded(DeltaMem.list_nodes)
    stats = _offloaded(DeltaMem.stats)
    check = _offloaded(DeltaMem.check)
    delete = _offloaded(DeltaMem.delete)
    forget = _offloaded(DeltaMem.forget)
    export = _offloaded(DeltaMem.export)
    import_ = _offloaded(DeltaMem.import_)
