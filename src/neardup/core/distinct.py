"""The distinct values of an integer array, sorted: what ``np.unique(x)`` returns, by a sort.

numpy 2.3 and later answer a plain ``np.unique(x)`` from a hash table (``_unique_hash``); on the
int64 keys of this project (packed content-id pairs, content ids) that path is far slower than a
sort, and it dominated an add of short, similar documents (docs/benchmarks/ compares the two).
Every one-dimensional ``np.unique`` without ``return_*`` goes through here instead; the forms with
``return_inverse``, ``return_counts`` or ``axis`` take numpy's sorting path already.
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np
import numpy.typing as npt

T = TypeVar("T", bound=np.generic)


def distinct(values: npt.NDArray[T]) -> npt.NDArray[T]:
    """The distinct values of ``values`` (flattened), ascending; exact."""
    ordered = np.sort(np.asarray(values).reshape(-1))
    if ordered.size < 2:
        return ordered
    keep = np.empty(ordered.size, dtype=np.bool_)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]
