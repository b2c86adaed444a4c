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
* :func:`sign_flip` - the exact paired sign-flip (permutation) test of a mean difference: under
  "no difference" each pair's difference is as likely to have either sign, so the p-value is the
  share of the 2^k sign assignments of the k non-zero differences whose mean is at least as far
  from zero as the observed one. Exact up to :data:`EXACT_MAX` non-zero pairs, a Monte Carlo
  estimate with a stated standard error beyond. Unlike the percentile bootstrap it never gives
  a p-value below 2^(1-k) (eight one-signed pairs: 0.0078, not the bootstrap's 0.0004).
* :func:`holm` - Holm's step-down adjustment of several p-values (one per entry of a suite), so
  that the chance of any false "above zero" among them stays at the level.
* :func:`wilson` - a score interval for one arm's success rate.
* Sample sizes for a next registration: :func:`paired_t_power` / :func:`n_for_paired_mean`
  (a mean paired difference, from the SD of the differences; the paired t-test's exact power by
  the noncentral t, which the sign-flip test matches asymptotically) and :func:`n_for_mcnemar`
  (success by McNemar, from the discordance rate; Connor 1987).
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


EXACT_MAX = 20  # non-zero pairs up to which :func:`sign_flip` enumerates every sign assignment
_CHUNK = 1 << 15  # sign assignments evaluated at once (a few MB)


@dataclass(frozen=True)
class SignFlip:
    """The paired sign-flip test of a mean difference.

    Attributes:
        mean: The observed mean difference over all pairs.
        n: Number of pairs.
        nonzero: Pairs whose difference is not zero (only they can change sign).
        p_value: Two-sided p-value (1.0 when every difference is zero).
        method: ``exact`` (every one of the 2^nonzero assignments) or ``monte-carlo``.
        resamples: Random assignments drawn (0 when exact).
        mc_se: The Monte Carlo p-value's standard error (0 when exact).
    """

    mean: float
    n: int
    nonzero: int
    p_value: float
    method: str
    resamples: int = 0
    mc_se: float = 0.0

    def to_dict(self) -> dict[str, float | int | str]:
        """JSON-able form."""
        return {"mean": round(self.mean, 4), "n": self.n, "nonzero": self.nonzero,
                "p_value": round(self.p_value, 6), "method": self.method,
                "resamples": self.resamples, "mc_se": round(self.mc_se, 6)}


def sign_flip(a: Sequence[float], b: Sequence[float], *, exact_max: int = EXACT_MAX,
              resamples: int = 200_000, seed: int = 0) -> SignFlip:
    """Two-sided paired sign-flip test of ``mean(a - b) = 0``.

    The statistic is the sum of the differences (zeros contribute nothing under any flip). With
    at most ``exact_max`` non-zero differences every sign assignment is enumerated; beyond, the
    p-value is ``(1 + hits) / (1 + resamples)`` over random assignments (seeded, so it is
    reproducible), with its binomial standard error in ``mc_se`` (200,000 resamples: at
    p = 0.01, 0.0002). A difference counts as "at least as extreme" within 1e-9, so ties of
    floating sums are not lost.

    Raises:
        ValueError: the sequences differ in length or are empty.
    """
    if len(a) != len(b):
        raise ValueError(f"paired samples differ in length: {len(a)} vs {len(b)}")
    if not a:
        raise ValueError("sign_flip needs at least one pair")
    diffs = np.asarray([float(x) - float(y) for x, y in zip(a, b, strict=True)])
    mean = float(diffs.mean())
    nonzero = diffs[diffs != 0]
    k = len(nonzero)
    if k == 0:
        return SignFlip(mean, len(diffs), 0, 1.0, "exact")
    observed = abs(float(nonzero.sum())) - 1e-9
    if k <= exact_max:
        # Every assignment: row i of the bit matrix is the binary expansion of i. Why chunks:
        # 2^20 rows of 20 signs at once would take hundreds of MB.
        hits = 0
        bits = np.arange(k, dtype=np.int64)
        for start in range(0, 2 ** k, _CHUNK):
            codes = np.arange(start, min(start + _CHUNK, 2 ** k), dtype=np.int64)[:, None]
            signs = (1 - 2 * ((codes >> bits) & 1)).astype(np.float64)
            hits += int(np.count_nonzero(np.abs(signs @ nonzero) >= observed))
        return SignFlip(mean, len(diffs), k, min(1.0, hits / 2 ** k), "exact")
    rng = np.random.default_rng(seed)
    hits = 0
    left = resamples
    while left:
        size = min(left, max(1, _CHUNK * 16 // k))
        draws = 2.0 * rng.integers(0, 2, size=(size, k), dtype=np.int8) - 1.0
        hits += int(np.count_nonzero(np.abs(draws @ nonzero) >= observed))
        left -= size
    p = (1 + hits) / (1 + resamples)
    return SignFlip(mean, len(diffs), k, min(1.0, p), "monte-carlo", resamples,
                    math.sqrt(p * (1 - p) / resamples))


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


def paired_t_power(n: int, sd: float, effect: float, alpha: float = 0.05) -> float:
    """Power of the two-sided paired t-test at level ``alpha`` for a true mean difference
    ``effect`` with differences of SD ``sd`` over ``n`` pairs (noncentral t)."""
    if n < 2:
        return 0.0
    if sd <= 0:
        return 1.0 if effect != 0 else alpha
    df = n - 1
    crit = float(scipy_stats.t.ppf(1 - alpha / 2, df))
    ncp = effect / sd * math.sqrt(n)
    return float(scipy_stats.nct.sf(crit, df, ncp) + scipy_stats.nct.cdf(-crit, df, ncp))


def n_for_paired_mean(sd: float, effect: float, *, alpha: float = 0.05, power: float = 0.8,
                      limit: int = 100_000) -> int:
    """The fewest pairs at which :func:`paired_t_power` reaches ``power``.

    Raises:
        ValueError: ``effect`` is 0 or more than ``limit`` pairs would be needed.
    """
    if effect == 0:
        raise ValueError("no sample size detects an effect of 0")
    z = float(scipy_stats.norm.ppf(1 - alpha / 2) + scipy_stats.norm.ppf(power))
    n = max(2, math.floor((z * sd / effect) ** 2) - 2)  # the normal answer, less a margin
    while paired_t_power(n, sd, effect, alpha) < power:
        n += 1
        if n > limit:
            raise ValueError(f"more than {limit} pairs needed")
    return n


def n_for_mcnemar(discordant: float, effect: float, *, alpha: float = 0.05,
                  power: float = 0.8) -> int:
    """Pairs needed by McNemar's test for a success-rate difference ``effect`` when a share
    ``discordant`` of the pairs is discordant (Connor 1987; ``discordant`` >= ``|effect|``).

    Raises:
        ValueError: ``effect`` is 0 or larger than ``discordant``.
    """
    if effect == 0 or abs(effect) > discordant:
        raise ValueError(f"need 0 < |effect| <= discordant, got {effect} and {discordant}")
    za = float(scipy_stats.norm.ppf(1 - alpha / 2))
    zb = float(scipy_stats.norm.ppf(power))
    root = za * math.sqrt(discordant) + zb * math.sqrt(discordant - effect * effect)
    return math.ceil(root * root / (effect * effect))
