"""Paired statistics for comparing memories that played the same episodes.

Every arm of a run plays exactly the same episode stream, so arms are compared episode by
episode: the paired difference removes the (large) variation between games and leaves the effect
of the memory. Two tools, both exact or resampling-based, with no distributional assumption:

* :func:`paired_bootstrap` - the mean of per-episode differences with a percentile bootstrap
  interval (episodes resampled with replacement, the pairing kept).
* :func:`mcnemar_exact` - the exact two-sided McNemar test on paired successes: only discordant
  episodes (one arm won, the other lost) carry information; under "no difference" each is a fair
  coin, so the p-value is a binomial tail.
* :func:`wilson` - a score interval for one arm's success rate.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class PairedDiff:
    """Mean of ``a - b`` over paired episodes, with a bootstrap interval.

    Attributes:
        mean: The observed mean difference.
        low / high: The ``confidence`` percentile-bootstrap interval.
        n: Number of pairs.
        confidence: Interval level (0.95 by default).
    """

    mean: float
    low: float
    high: float
    n: int
    confidence: float = 0.95

    @property
    def above_zero(self) -> bool:
        """True when the whole interval lies above zero."""
        return self.low > 0

    @property
    def below_zero(self) -> bool:
        """True when the whole interval lies below zero."""
        return self.high < 0

    def to_dict(self) -> dict[str, float | int]:
        """JSON-able form."""
        return {"mean": round(self.mean, 4), "low": round(self.low, 4),
                "high": round(self.high, 4), "n": self.n, "confidence": self.confidence}


def paired_bootstrap(a: Sequence[float], b: Sequence[float], *, resamples: int = 10_000,
                     confidence: float = 0.95, seed: int = 0) -> PairedDiff:
    """Mean paired difference ``a[i] - b[i]`` and its percentile-bootstrap interval.

    Deterministic for a given ``seed``. With all differences equal the interval collapses to that
    value.

    Raises:
        ValueError: the sequences differ in length or are empty.
    """
    if len(a) != len(b):
        raise ValueError(f"paired samples differ in length: {len(a)} vs {len(b)}")
    if not a:
        raise ValueError("paired_bootstrap needs at least one pair")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    diffs = [float(x) - float(y) for x, y in zip(a, b, strict=True)]
    n = len(diffs)
    mean = sum(diffs) / n
    rng = random.Random(seed)
    means = sorted(sum(rng.choices(diffs, k=n)) / n for _ in range(resamples))
    tail = (1 - confidence) / 2
    low = means[int(math.floor(tail * (resamples - 1)))]
    high = means[int(math.ceil((1 - tail) * (resamples - 1)))]
    return PairedDiff(mean, min(low, mean), max(high, mean), n, confidence)


@dataclass(frozen=True)
class McNemar:
    """Exact McNemar test on paired binary outcomes.

    Attributes:
        a_only: Pairs where only ``a`` succeeded.
        b_only: Pairs where only ``b`` succeeded.
        p_value: Two-sided exact p-value (1.0 when there are no discordant pairs).
    """

    a_only: int
    b_only: int
    p_value: float

    def to_dict(self) -> dict[str, float | int]:
        """JSON-able form."""
        return {"a_only": self.a_only, "b_only": self.b_only, "p_value": round(self.p_value, 4)}


def mcnemar_exact(a: Sequence[bool], b: Sequence[bool]) -> McNemar:
    """Exact two-sided McNemar test of ``a`` against ``b`` (paired successes).

    The p-value is ``min(1, 2 * P(X <= min(a_only, b_only)))`` with ``X ~ Binomial(d, 1/2)``
    and ``d`` the number of discordant pairs.

    Raises:
        ValueError: the sequences differ in length.
    """
    if len(a) != len(b):
        raise ValueError(f"paired samples differ in length: {len(a)} vs {len(b)}")
    a_only = sum(1 for x, y in zip(a, b, strict=True) if x and not y)
    b_only = sum(1 for x, y in zip(a, b, strict=True) if y and not x)
    d = a_only + b_only
    if d == 0:
        return McNemar(a_only, b_only, 1.0)
    k = min(a_only, b_only)
    tail = sum(math.comb(d, i) for i in range(k + 1)) / 2**d
    return McNemar(a_only, b_only, min(1.0, 2 * tail))


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (``(0, 0)`` when ``n`` is 0)."""
    if n <= 0:
        return 0.0, 0.0
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)
