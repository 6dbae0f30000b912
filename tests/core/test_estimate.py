import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from neardup.core import EMPTY, MinHasher, agreement, estimate_jaccard
from neardup.core.estimate import wilson_interval
from neardup.errors import ParamsError

from ._sets import pairs_with_jaccard

signatures = st.lists(st.integers(0, 20), min_size=1, max_size=64)


@given(signatures, st.data())
def test_estimate_is_share_of_equal_rows_and_symmetric(a: list[int], data: st.DataObject) -> None:
    b = data.draw(st.lists(st.integers(0, 20), min_size=len(a), max_size=len(a)))
    sa, sb = np.array(a, dtype=np.uint32), np.array(b, dtype=np.uint32)
    est = estimate_jaccard(sa, sb)
    share = sum(x == y for x, y in zip(a, b, strict=True)) / len(a)
    assert est.value == share == estimate_jaccard(sb, sa).value
    assert float(est) == share
    assert est.stderr == pytest.approx(math.sqrt(share * (1 - share) / len(a)))
    assert 0.0 <= est.low <= share <= est.high <= 1.0
    assert agreement(sa[None, :], sb[None, :]).tolist() == [share]


@pytest.mark.parametrize("matches", [1, 40, 64, 127])
def test_interval_is_wilsons(matches: int) -> None:
    """The Wilson bounds are the roots p of (p_hat - p)^2 = z^2 p (1 - p) / n."""
    a = np.arange(128, dtype=np.uint32)
    b = np.where(a < matches, a, a + 1000).astype(np.uint32)
    est = estimate_jaccard(a, b, confidence=0.95)
    p_hat, n, z2 = matches / 128, 128, 1.959963984540054**2
    roots = np.roots([1 + z2 / n, -(2 * p_hat + z2 / n), p_hat**2])
    assert (est.low, est.high) == pytest.approx(sorted(roots.real), abs=1e-12)
    # At full agreement the Wald interval collapses to a point; Wilson's does not.
    full = estimate_jaccard(a, a, confidence=0.99)
    assert full.high == 1.0
    assert 0.9 < full.low < 1.0


@given(trials=st.integers(0, 10_000), data=st.data())
def test_wilson_interval_of_any_proportion(trials: int, data: st.DataObject) -> None:
    successes = data.draw(st.integers(0, trials))
    low, high = wilson_interval(successes, trials)
    if trials == 0:
        assert (low, high) == (0.0, 1.0)
        return
    assert 0.0 <= low <= successes / trials <= high <= 1.0
    assert (low == 0.0) == (successes == 0)
    assert (high == 1.0) == (successes == trials)
    p_hat, z2 = successes / trials, 1.959963984540054**2
    roots = np.roots([1 + z2 / trials, -(2 * p_hat + z2 / trials), p_hat**2])
    assert (low, high) == pytest.approx(sorted(roots.real), abs=1e-9)


@pytest.mark.parametrize(("successes", "trials"), [(-1, 3), (4, 3)])
def test_wilson_interval_refuses_impossible_counts(successes: int, trials: int) -> None:
    with pytest.raises(ParamsError, match="successes"):
        wilson_interval(successes, trials)


def test_interval_covers_the_truth_at_its_level() -> None:
    rng = np.random.default_rng(5)
    mh = MinHasher(128, 8, "classic")
    covered = []
    for jaccard in (0.1, 0.5, 0.9):
        left, right, exact = pairs_with_jaccard(rng, 400, 300, jaccard)
        for sa, sb in zip(mh.signatures(left), mh.signatures(right), strict=True):
            est = estimate_jaccard(sa, sb, confidence=0.95)
            covered.append(est.low <= exact <= est.high)
    assert 0.93 <= np.mean(covered) <= 0.98


def test_empty_rows_never_count_as_agreement() -> None:
    empty = np.full(8, EMPTY, dtype=np.uint32)
    assert estimate_jaccard(empty, empty).value == 0.0
    assert agreement(np.stack([empty, empty]), np.stack([empty, empty])).tolist() == [0.0, 0.0]


@pytest.mark.parametrize(
    ("a", "b", "kwargs"),
    [
        (np.zeros(4), np.zeros(5), {}),
        (np.zeros(0), np.zeros(0), {}),
        (np.zeros((2, 4)), np.zeros((2, 4)), {}),
        (np.zeros(4), np.zeros(4), {"confidence": 1.0}),
    ],
)
def test_bad_arguments_are_refused(a: np.ndarray, b: np.ndarray, kwargs: dict[str, float]) -> None:
    with pytest.raises(ParamsError):
        estimate_jaccard(a, b, **kwargs)
