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


def test_no_plain_np_unique_in_the_package() -> None:
    """Every one-dimensional np.unique without return_* or axis goes through distinct()."""
    import ast
    from pathlib import Path

    import neardup

    plain = []
    for path in Path(neardup.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "unique"
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "np"
                and not node.keywords
            ):
                plain.append(f"{path.name}:{node.lineno}")
    assert not plain, f"use neardup.core.distinct.distinct instead of np.unique at {plain}"
