"""The Wilson interval: inside [0, 1], holds the observed proportion, never a point, and covers
the true proportion about as often as it claims."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from neardup.core.intervals import clopper_pearson, wilson


@given(st.integers(1, 10_000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_holds_the_observed_proportion_and_is_never_a_point(case: tuple[int, int]) -> None:
    k, n = case
    low, high = wilson(k, n)
    assert 0.0 <= low <= k / n <= high <= 1.0
    assert high - low > 0.0


def test_all_successes_in_a_small_sample_is_not_certainty() -> None:
    low, high = wilson(10, 10)
    assert high == 1.0
    assert 0.6 < low < 0.8
    assert wilson(0, 10)[0] == 0.0
    assert wilson(0, 10)[1] > 0.2
    assert wilson(0, 0) == (0.0, 1.0)


@pytest.mark.parametrize(("interval", "least"), [(wilson, 0.92), (clopper_pearson, 0.94)])
@pytest.mark.parametrize("p", [0.5, 0.9, 0.99])
def test_covers_the_true_proportion_about_as_often_as_claimed(
    interval: Callable[[int, int], tuple[float, float]], least: float, p: float
) -> None:
    """Wilson's about as often as claimed; Clopper-Pearson's, exact, at least as often."""
    rng = np.random.default_rng(7)
    n = 200
    draws = rng.binomial(n, p, size=4_000)
    covered = np.mean([lo <= p <= hi for lo, hi in (interval(int(k), n) for k in draws)])
    assert covered > least


def test_refuses_impossible_counts() -> None:
    with pytest.raises(ValueError, match="successes"):
        wilson(3, 2)
    with pytest.raises(ValueError, match="confidence"):
        wilson(1, 2, confidence=1.0)


# -- Clopper-Pearson's exact interval --------------------------------------------------------------


@given(st.integers(1, 2_000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_the_exact_interval_holds_the_proportion_and_is_never_a_point(case: tuple[int, int]) -> None:
    k, n = case
    low, high = clopper_pearson(k, n)
    assert 0.0 <= low <= k / n <= high <= 1.0
    assert high - low > 0.0


@given(st.integers(1, 60).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_each_end_is_where_the_binomial_tail_is_exactly_the_half_alpha(case: tuple[int, int]) -> None:
    """The definition, checked by summing the binomial probabilities directly: at the lower end
    P(X >= k) = 0.025, at the upper end P(X <= k) = 0.025 (except at 0 and at n)."""
    from math import comb

    k, n = case
    low, high = clopper_pearson(k, n)

    def at_most(p: float) -> float:
        return sum(comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k + 1))

    if k > 0:
        assert 1.0 - at_most(low) + comb(n, k) * low**k * (1 - low) ** (n - k) == pytest.approx(
            0.025, abs=1e-7
        )
    if k < n:
        assert at_most(high) == pytest.approx(0.025, abs=1e-7)


def test_one_or_two_pairs_all_found_are_far_from_certainty() -> None:
    assert clopper_pearson(1, 1) == pytest.approx((0.025, 1.0))
    low, high = clopper_pearson(2, 2)
    assert high == 1.0
    assert low == pytest.approx(0.158, abs=1e-3)
    assert clopper_pearson(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError, match="successes"):
        clopper_pearson(3, 2)
