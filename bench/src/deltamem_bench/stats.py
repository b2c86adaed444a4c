"""Paired statistics for comparing memories that played the same episodes.

Every arm of a run plays exactly the same episode stream, so arms are compared episode by
episode: the paired difference removes the (large) variation between games and leaves the effect
of the memory. Two tools, both exact or resampling-based, with no distributional assumption:

* :func:`paired_bootstrap` - the mean of per-episode differences with a percentile bootstrap
  interval (episodes resampled with replacement, the pairing kept; ``scipy.stats.bootstrap``)
  and the bootstrap's two-sided p-value: the least level at which the percentile interval
  leaves out zero.
* :func:`mcnemar_exact` - the exact two-sided McNemar test on paired successes: only discordant
  episodes (one arm won, the other lost) carry information; under "no difference" each is a fair
  coin, so the p-value is a binomial tail (``scipy.stats.binomtest``).
* :func:`holm` - Holm's step-down adjustment of several p-values (one per entry of a suite), so
  that the chance of any false "above zero" among them stays at the level.
* :func:`wilson` - a score interval for one arm's success rate.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as scipy_stats


@dataclass(frozen=True)
class PairedDiff:
    """Mean of ``a - b`` over paired episodes, with a bootstrap interval.

    Attributes:
        mean: The observed mean difference.
        low / high: The ``confidence`` percentile-bootstrap interval.
        n: Number of pairs.
        confidence: Interval level (0.95 by default).
        p_value: Two-sided bootstrap p-value of "no difference" (the least level at which the
            percentile interval leaves out zero; 1.0 when every difference is zero).
    """

    mean: float
    low: float
    high: float
    n: int
    confidence: float = 0.95
    p_value: float = 1.0

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
                "high": round(self.high, 4), "n": self.n, "confidence": self.confidence,
                "p_value": round(self.p_value, 4)}


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
    diffs = np.asarray([float(x) - float(y) for x, y in zip(a, b, strict=True)])
    n = len(diffs)
    mean = float(diffs.mean())
    if np.all(diffs == diffs[0]):
        # Every resample is the same: the interval is that value (scipy refuses degenerate data).
        return PairedDiff(mean, mean, mean, n, confidence, 1.0 if mean == 0 else
                          2 / (resamples + 1))
    result = scipy_stats.bootstrap((diffs,), np.mean, n_resamples=resamples,
                                   confidence_level=confidence, method="percentile",
                                   vectorized=True, rng=np.random.default_rng(seed))
    means = result.bootstrap_distribution
    low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    below = int(np.count_nonzero(means <= 0))
    above = int(np.count_nonzero(means >= 0))
    p_value = min(1.0, 2 * (min(below, above) + 1) / (resamples + 1))
    return PairedDiff(mean, min(low, mean), max(high, mean), n, confidence, p_value)


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
    test = scipy_stats.binomtest(min(a_only, b_only), d, 0.5, alternative="two-sided")
    return McNemar(a_only, b_only, min(1.0, float(test.pvalue)))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given.

    Sorted ascending, the ``i``-th smallest (from 0) is multiplied by ``m - i``, then made
    non-decreasing along the sorted order and capped at 1. Rejecting where the adjusted value
    is below ``alpha`` keeps the family-wise error rate at ``alpha``.
    """
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [1.0] * m
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * float(p_values[index])))
        adjusted[index] = running
    return adjusted


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (``(0, 0)`` when ``n`` is 0)."""
    if n <= 0:
        return 0.0, 0.0
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)
