"""Exact set-similarity join: every pair of sets, one from each side, whose Jaccard reaches a floor.

An inverted-index join as one sparse matrix product: with L and R the incidence matrices (sets x
tokens) of the two sides, (L Rᵀ)[i, j] = |a_i ∩ b_j| for every pair that shares a token, and
J = |a ∩ b| / (|a| + |b| - |a ∩ b|) follows from the set sizes. Only the right side's tokens get
columns; the left side's other tokens count toward |a| alone. Nothing is estimated: the result
equals brute force over all pairs, float for float (the same division as ``exact_jaccard``).

A prefix filter (only pairs sharing one of their rarest tokens can reach the floor) was tried
first, its candidates verified by ``exact_jaccard``: on Debian package descriptions at a floor of
0.4 it pruned almost no pair, and verifying them one merge at a time cost more than this product.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from neardup.core.distinct import distinct
from neardup.core.ragged import Ragged
from neardup.errors import ParamsError

if TYPE_CHECKING:
    from scipy.sparse import csr_array

# Pairs a single product may hold (one left block x the whole right side): the product and its
# per-pair arrays stay within a few hundred MB however large either side is.
MAX_BLOCK_PAIRS = 4_000_000
# ⌈f·n⌉ is computed as ⌈f·n - EPS⌉: a size bound nudged up by float rounding could drop a set
# that reaches the floor; one nudged down only keeps a set that then pairs with nothing.
_EPS = 1e-9

JoinPairs = tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64]]


def _incidence(values: npt.NDArray[np.int64], sizes: npt.NDArray[np.int64], columns: int) -> csr_array:
    """Sets x tokens matrix with a 1 where set i holds token ``values`` (column indices, set by set)."""
    indptr = np.zeros(sizes.size + 1, dtype=np.int64)
    np.cumsum(sizes, out=indptr[1:])
    # Imported here: only measuring runs the exact join, and other commands need not load scipy.
    from scipy.sparse import csr_array

    return csr_array((np.ones(values.size, dtype=np.int32), values, indptr), shape=(sizes.size, columns))


class SetJoin:
    """The right side of an exact join, prepared once, to join with any number of left batches.

    Sets are sorted and distinct (as from ``shingle_batch``), as ``exact_jaccard`` takes them.
    """

    def __init__(self, right: Ragged, floor: float) -> None:
        if not isinstance(floor, float | int) or not 0.0 < floor <= 1.0:
            raise ParamsError(f"floor must be in (0, 1], got {floor!r}")
        self.floor = float(floor)
        values = np.ascontiguousarray(right.values, dtype=np.uint32)
        self._sizes = right.lengths().astype(np.int64)
        self._vocab = distinct(values)
        # Transposed once here (tokens x sets), not in every product.
        columns = np.searchsorted(self._vocab, values).astype(np.int64)
        self._right_t = _incidence(columns, self._sizes, self._vocab.size).T.tocsr()
        bearing = self._sizes[self._sizes > 0]
        self._size_range = (int(bearing.min()), int(bearing.max())) if bearing.size else (1, 0)

    def __len__(self) -> int:
        return int(self._sizes.size)

    def pairs(self, left: Ragged) -> JoinPairs:
        """(i, j, J) for every left set i and right set j with Jaccard J >= floor, sorted by (i, j).

        J is computed exactly as ``exact_jaccard`` computes it; empty sets pair with nothing.
        """
        values = np.ascontiguousarray(left.values, dtype=np.uint32)
        sizes = left.lengths().astype(np.int64)
        n, f = sizes.size, self.floor
        rows = np.repeat(np.arange(n, dtype=np.int64), sizes)
        at = np.minimum(np.searchsorted(self._vocab, values), max(self._vocab.size - 1, 0))
        shared = self._vocab[at] == values if self._vocab.size else np.zeros(values.size, dtype=bool)
        # Size filter: J <= min/max of the sizes and J <= (tokens shared with the right side)/|a|,
        # so a set outside [f*smallest, largest/f] of the right side, or with too few of its
        # tokens, pairs with nothing and stays out of the product.
        smallest, largest = self._size_range
        hopeful = (
            (sizes > 0)
            & (sizes >= math.ceil(smallest * f - _EPS))
            & (sizes * f <= largest + _EPS)
            & (np.bincount(rows[shared], minlength=n) >= np.ceil(sizes * f - _EPS))
        )
        keep = shared & hopeful[rows]
        matrix = _incidence(at[keep], np.bincount(rows[keep], minlength=n), self._vocab.size)
        found_i, found_j, found_jaccard = [], [], []
        block = max(1, MAX_BLOCK_PAIRS // max(len(self), 1))
        for start in range(0, n if len(self) and self._vocab.size else 0, block):
            product = (matrix[start : start + block] @ self._right_t).tocoo()
            i = np.asarray(product.row, dtype=np.int64) + start
            j = np.asarray(product.col, dtype=np.int64)
            common = np.asarray(product.data, dtype=np.int64)
            jaccard = common / (sizes[i] + self._sizes[j] - common)
            ok = jaccard >= f
            found_i.append(i[ok])
            found_j.append(j[ok])
            found_jaccard.append(jaccard[ok])
        if not found_i:
            return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.float64)
        i, j, jaccard = np.concatenate(found_i), np.concatenate(found_j), np.concatenate(found_jaccard)
        order = np.lexsort((j, i))
        return i[order], j[order], jaccard[order]


def similar_pairs(left: Ragged, right: Ragged, floor: float) -> JoinPairs:
    """(i, j, J) for every left set i and right set j with exact Jaccard J >= ``floor`` (see SetJoin)."""
    return SetJoin(right, floor).pairs(left)


def distinct_pairs(
    parts: list[JoinPairs],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """Join results (left id, right id, J) as distinct pairs a < b sorted, without an id paired
    with itself; a pair met twice (both ends on both sides of the join) has the same J each time."""
    left = np.concatenate([p[0] for p in parts]) if parts else np.empty(0, np.int64)
    right = np.concatenate([p[1] for p in parts]) if parts else np.empty(0, np.int64)
    jaccard = np.concatenate([p[2] for p in parts]) if parts else np.empty(0, np.float64)
    other = left != right
    left, right, jaccard = left[other], right[other], jaccard[other]
    ends = np.stack([np.minimum(left, right), np.maximum(left, right)], axis=1)
    ends, first = np.unique(ends.reshape(-1, 2), axis=0, return_index=True)
    return ends[:, 0].astype(np.int64), ends[:, 1].astype(np.int64), jaccard[first]
