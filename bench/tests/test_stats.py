"""Paired statistics on inputs whose answers are known."""

from __future__ import annotations

import math

import pytest

from deltamem_bench.stats import (
    holm,
    mcnemar_exact,
    n_for_mcnemar,
    n_for_paired_mean,
    paired_bootstrap,
    paired_t_power,
    sign_flip,
    wilson,
)


def test_mcnemar_matches_the_binomial_tail() -> None:
    """6 discordant pairs all one way: p = 2 * 0.5**6; ties and concordant pairs do not count."""
    a = [True] * 6 + [True, False] * 3
    b = [False] * 6 + [True, False] * 3
    result = mcnemar_exact(a, b)
    assert (result.a_only, result.b_only) == (6, 0)
    assert result.p_value == pytest.approx(2 * 0.5**6)


def test_mcnemar_balanced_and_empty() -> None:
    """Balanced discordance gives p = 1; no discordant pair gives p = 1."""
    assert mcnemar_exact([True, False], [False, True]).p_value == 1.0
    assert mcnemar_exact([True, True], [True, True]).p_value == 1.0
    # 1 vs 4 discordant: 2 * (C(5,0) + C(5,1)) / 32 = 0.375
    a = [True, False, False, False, False]
    b = [False, True, True, True, True]
    assert mcnemar_exact(a, b).p_value == pytest.approx(0.375)


def test_bootstrap_constant_difference_collapses() -> None:
    """When every pair differs by the same amount the interval is that amount."""
    diff = paired_bootstrap([0.5, 0.7, 0.9], [0.25, 0.45, 0.65])
    assert diff.mean == pytest.approx(0.25) and diff.low == pytest.approx(0.25)
    assert diff.high == pytest.approx(0.25) and diff.above_zero


def test_bootstrap_interval_is_near_the_normal_one_and_deterministic() -> None:
    """For 200 pairs of +1/-1 differences (mean 0.2) the 95% interval is about +-1.96 sd/sqrt(n)."""
    a = [1.0] * 120 + [0.0] * 80
    b = [0.0] * 120 + [1.0] * 80
    diff = paired_bootstrap(a, b, seed=3)
    sd = math.sqrt(1 - 0.2**2)
    half = 1.96 * sd / math.sqrt(200)
    assert diff.mean == pytest.approx(0.2)
    assert diff.low == pytest.approx(0.2 - half, abs=0.02)
    assert diff.high == pytest.approx(0.2 + half, abs=0.02)
    assert diff == paired_bootstrap(a, b, seed=3)
    assert not diff.below_zero


def test_bootstrap_refuses_unpaired_input() -> None:
    """Different lengths and empty samples are errors, not silent truncation."""
    with pytest.raises(ValueError, match="length"):
        paired_bootstrap([1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="at least one"):
        paired_bootstrap([], [])
    with pytest.raises(ValueError, match="length"):
        mcnemar_exact([True], [])


def test_wilson_interval_known_values() -> None:
    """Wilson bounds match hand-computed values and stay inside [0, 1]."""
    low, high = wilson(5, 10)
    assert low == pytest.approx(0.2366, abs=1e-4) and high == pytest.approx(0.7634, abs=1e-4)
    assert wilson(0, 4)[0] == 0.0 and wilson(4, 4)[1] == 1.0 and wilson(0, 0) == (0.0, 0.0)


def test_mcnemar_agrees_with_the_binomial_tail_formula() -> None:
    """scipy's exact binomial test gives the textbook tail, min(1, 2 * P(X <= min)), on every
    split of up to 12 discordant pairs."""
    for d in range(1, 13):
        for a_only in range(d + 1):
            a = [True] * a_only + [False] * (d - a_only)
            b = [not x for x in a]
            k = min(a_only, d - a_only)
            tail = sum(math.comb(d, i) for i in range(k + 1)) / 2**d
            assert mcnemar_exact(a, b).p_value == pytest.approx(min(1.0, 2 * tail))


def test_bootstrap_p_value_is_small_for_a_clear_effect_and_one_for_none() -> None:
    """The bootstrap p-value is the least level whose interval leaves out zero: tiny for 200
    pairs with mean 0.2, one when every difference is zero, and above 0.05 exactly when the
    95% interval holds zero."""
    a = [1.0] * 120 + [0.0] * 80
    b = [0.0] * 120 + [1.0] * 80
    assert paired_bootstrap(a, b).p_value < 0.01
    assert paired_bootstrap([0.5, 0.2], [0.5, 0.2]).p_value == 1.0
    for shift in (0, 1, 2, 3, 4):
        x = [1.0] * (6 + shift) + [0.0] * 10 + [0.5] * 4
        y = [0.0] * 6 + [1.0] * 10 + [0.5] * (4 + shift)
        diff = paired_bootstrap(x, y, seed=shift)
        assert (diff.p_value > 0.05) == (diff.low <= 0 <= diff.high)


def test_holm_known_values() -> None:
    """Holm on (0.01, 0.04, 0.03, 0.005): sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 is
    0.02, 0.03, 0.06, 0.04 -> made non-decreasing 0.02, 0.03, 0.06, 0.06; order kept."""
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5]) == [0.5]
    assert holm([0.6, 0.7]) == [1.0, 1.0]
    assert holm([]) == []


def test_sign_flip_exact_one_signed_pairs() -> None:
    """Eight +1 pairs among 40: only the two all-same-sign assignments are as extreme,
    p = 2 / 2**8 (the registered bootstrap gave 0.0004 on such data)."""
    a = [1.0] * 8 + [0.5] * 32
    b = [0.0] * 8 + [0.5] * 32
    result = sign_flip(a, b)
    assert result.method == "exact" and result.nonzero == 8
    assert result.p_value == pytest.approx(2 / 2**8)
    assert result.mean == pytest.approx(0.2)


def test_sign_flip_exact_by_hand_and_degenerate() -> None:
    """Differences +2, +1, -1 (observed sum 2): p is the share of the 8 sign assignments whose
    |sum| reaches 2, counted here by brute force; all-zero differences give p = 1."""
    diffs = [2.0, 1.0, -1.0]
    sums = [abs(s1 * 2 + s2 * 1 + s3 * -1) for s1 in (1, -1) for s2 in (1, -1)
            for s3 in (1, -1)]
    expected = sum(s >= 2 for s in sums) / 8
    assert sign_flip(diffs, [0.0] * 3).p_value == pytest.approx(expected)
    assert sign_flip([0.3, 0.3], [0.3, 0.3]).p_value == 1.0
    with pytest.raises(ValueError, match="length"):
        sign_flip([1.0], [])


def test_sign_flip_monte_carlo_agrees_with_exact_within_its_error() -> None:
    """Past EXACT_MAX the Monte Carlo p lies within 4 standard errors of the exact one."""
    a = [1.0] * 12 + [0.0] * 6 + [0.25, 0.5] + [0.0] * 20
    b = [0.0] * 12 + [1.0] * 6 + [0.0, 0.0] + [0.0] * 20
    exact = sign_flip(a, b, exact_max=20)
    assert exact.method == "exact" and exact.nonzero == 20
    mc = sign_flip(a, b, exact_max=5, resamples=40_000, seed=1)
    assert mc.method == "monte-carlo" and mc.resamples == 40_000 and mc.mc_se > 0
    assert abs(mc.p_value - exact.p_value) < 4 * mc.mc_se + 1e-4
    assert mc == sign_flip(a, b, exact_max=5, resamples=40_000, seed=1)


def test_paired_sample_size_matches_the_normal_formula() -> None:
    """SD 0.287, effect 0.05, alpha 0.05, power 0.8: the normal formula gives 258.6; the t-test
    needs a pair or two more; the power at that n reaches 0.8 and one pair fewer does not."""
    n = n_for_paired_mean(0.287, 0.05)
    assert 259 <= n <= 262
    assert paired_t_power(n, 0.287, 0.05) >= 0.8 > paired_t_power(n - 1, 0.287, 0.05)
    # a stricter level needs more
    assert n_for_paired_mean(0.287, 0.05, alpha=0.05 / 4) > n
    with pytest.raises(ValueError):
        n_for_paired_mean(0.3, 0.0)


def test_mcnemar_sample_size_connor() -> None:
    """Discordance 0.1, difference 0.044 (the paper's ALFWorld gap): about 400 pairs."""
    n = n_for_mcnemar(0.1, 0.044)
    za, zb = 1.959964, 0.841621
    root = za * math.sqrt(0.1) + zb * math.sqrt(0.1 - 0.044**2)
    assert n == math.ceil(root**2 / 0.044**2)
    assert 395 <= n <= 410
    with pytest.raises(ValueError):
        n_for_mcnemar(0.01, 0.05)
