"""Distinct values of an integer array, sorted, by a sort rather than ``np.unique``.

From numpy 2.3 on, ``np.unique`` hashes integers, and its table collides badly on keys whose low bits
repeat (a pair packed as ``a << 32 | b``, for instance): it took ~80 times a sort's time on a
batch's candidate pairs. A sort and a comparison of neighbours give the same values.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt


def distinct(values: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """The distinct values of a 1-D integer array, ascending (``np.unique``'s result; exact)."""
    flat = np.sort(np.asarray(values, dtype=np.int64).reshape(-1))
    if flat.size < 2:
        return flat
    return flat[np.r_[True, flat[1:] != flat[:-1]]]
