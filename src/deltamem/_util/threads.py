"""How many BLAS threads deltamem's own numpy work may use, safely across threads.

An embedding call of a memory operation is a few small matrix products. Multi-threaded
BLAS gains nothing on them and, with several writers (threads or processes) each asking for every
core, oversubscribes the machine: 4 concurrent writers learning 800 MiniLM episodes took 332 s
against 22 s with one BLAS thread each. ``threadpoolctl`` limits are process-wide, so a limit
entered by two threads at once would restore the wrong value when the first leaves; this module
counts the threads inside and restores the original limits only when the last one leaves.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_lock = threading.Lock()
_inside = 0
_active: Any = None
_controller: Any = None


@contextmanager
def blas_threads(limit: int) -> Iterator[None]:
    """Run the block with at most ``limit`` BLAS threads (0: leave the library's default).

    Nested and concurrent blocks share one limit: the first block to enter sets it.
    """
    global _inside, _active, _controller
    if limit <= 0:
        yield
        return
    with _lock:
        if _inside == 0:
            if _controller is None:
                from threadpoolctl import ThreadpoolController

                _controller = ThreadpoolController()
            _active = _controller.limit(limits=limit, user_api="blas")
        _inside += 1
    try:
        yield
    finally:
        with _lock:
            _inside -= 1
            if _inside == 0:
                _active.restore_original_limits()
                _active = None
