"""distinct() is np.unique's answer, by a sort."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from neardup.core.distinct import distinct


@given(hnp.arrays(np.int64, st.integers(0, 300), elements=st.integers(-(2**63), 2**63 - 1)))
def test_is_the_sorted_set_of_the_values(values: np.ndarray) -> None:
    got = distinct(values)
    assert got.dtype == values.dtype
    assert got.tolist() == sorted(set(values.tolist()))


def test_flattens_like_np_unique() -> None:
    grid = np.array([[3, 1], [3, 2]], dtype=np.int32)
    assert distinct(grid).tolist() == [1, 2, 3]
    assert distinct(np.empty(0, dtype=np.int64)).size == 0
