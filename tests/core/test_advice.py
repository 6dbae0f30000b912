"""The threshold advice against a brute-force reading of the same labels."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from neardup.core.advice import BIN_WIDTH, advise
from neardup.core.intervals import wilson

labelled = st.lists(st.tuples(st.integers(0, 100).map(lambda k: k / 100), st.booleans()), max_size=200)


def _brute(pairs: list[tuple[float, bool]], target: float, floor: float) -> tuple[float | None, int, int]:
    """Every candidate threshold tried in turn, counting labels at or above it one by one."""
    candidates = [floor] + [round(i * BIN_WIDTH, 10) for i in range(20) if round(i * BIN_WIDTH, 10) > floor]
    for t in candidates:
        above = [d for s, d in pairs if s >= t - 1e-9]
        if not above:
            return None, 0, 0
        if wilson(sum(above), len(above))[0] >= target:
            return t, len(above), sum(above)
    return None, 0, 0


@given(labelled, st.sampled_from([0.5, 0.8, 0.9, 0.95, 1.0]), st.sampled_from([0.0, 0.5, 0.8, 0.83]))
def test_advice_matches_brute_force(pairs: list[tuple[float, bool]], target: float, floor: float) -> None:
    pairs = [(s, d) for s, d in pairs if s >= floor]
    got = advise([s for s, _ in pairs], [d for _, d in pairs], target, floor)
    assert (got.threshold, got.labels, got.duplicates) == _brute(pairs, target, floor)
    assert got.total == len(pairs)
    # Bins: every label in exactly one, [low, high), 1.0 in the last.
    assert sum(b.labels for b in got.bins) == len(pairs)
    for b in got.bins:
        inside = [d for s, d in pairs if b.low - 1e-9 <= s < b.high - 1e-9 or (b.high == 1.0 and s == 1.0)]
        assert (b.labels, b.duplicates) == (len(inside), sum(inside))
    if got.threshold is not None and got.point_threshold is not None:
        assert got.point_threshold <= got.threshold  # the point estimate meets it no later


def test_advice_in_words() -> None:
    # 40 duplicates from 0.9 up, and below it mostly not: the advice is 0.9, on those 40 labels.
    sims = [0.9 + 0.0025 * i for i in range(40)] + [0.8 + 0.002 * i for i in range(40)]
    dup = [True] * 40 + [i % 4 == 0 for i in range(40)]
    got = advise(sims, dup, 0.9, floor=0.8)
    assert got.threshold == pytest.approx(0.9)
    assert (got.labels, got.duplicates) == (40, 40)
    assert "0.9" in got.summary()
    assert got.interval[0] >= 0.9
    assert advise([], [], 0.95).summary().startswith("no labelled")
    assert advise([0.9], [True], 0.95).threshold is None  # one label is not enough for 0.95
