"""Paired statistics on inputs whose answers are known."""

from __future__ import annotations

import math

import pytest

from deltamem_bench.stats import holm, mcnemar_exact, paired_bootstrap, wilson


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
