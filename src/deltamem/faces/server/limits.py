"""Per-key request limits: one token bucket per API key, refilled continuously.

A key allowed ``n`` requests per minute holds at most ``n`` tokens and regains ``n / 60`` a
second; a request takes one token or is refused (HTTP 429) with the seconds until the next one.
Buckets live in the server process: with R replicas behind a proxy a key gets up to ``R * n``
requests a minute in all (see docs/deployment.md).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable


class RateLimiter:
    """Token buckets by key id.

    Args:
        clock: a monotonic clock in seconds (injectable for tests).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, at)
        self._lock = threading.Lock()

    def take(self, key: str, per_minute: int) -> int | None:
        """Take one request for ``key``; None when allowed, else whole seconds to wait."""
        now = self._clock()
        rate = per_minute / 60.0
        with self._lock:
            tokens, at = self._buckets.get(key, (float(per_minute), now))
            tokens = min(float(per_minute), tokens + (now - at) * rate)
            if tokens >= 1.0:
                self._buckets[key] = (tokens - 1.0, now)
                return None
            self._buckets[key] = (tokens, now)
            return max(1, math.ceil((1.0 - tokens) / rate))
