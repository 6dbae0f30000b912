"""Candidate pairs: documents that share a bucket in some band, each pair once."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from neardup.core import _kernels
from neardup.core.ragged import Ragged


def candidate_pairs(groups: Ragged, first_new: int = 0) -> npt.NDArray[np.int64]:
    """Distinct pairs (a, b), a < b, sharing a group, with b >= ``first_new``; sorted, shape n x 2.

    ``groups`` holds the ids of the documents in each (band, bucket), one group each; ids below
    ``first_new`` are documents whose pairs among themselves are already known. Pairs that meet in
    several bands are returned once.
    """
    members = np.asarray(groups.values, dtype=np.int64)
    offsets = np.asarray(groups.offsets, dtype=np.int64)
    descending = np.diff(members) < 0
    boundaries = offsets[1:-1]
    # A drop from one group's last member to the next group's first is no disorder.
    descending[boundaries[(boundaries > 0) & (boundaries < members.size)] - 1] = False
    if descending.any():
        # Each group must be ascending for the kernel; sort within groups without a Python loop.
        group_of = np.repeat(np.arange(len(groups)), groups.lengths())
        members = members[np.lexsort((members, group_of))]
    pairs = _kernels.group_pairs(members, offsets, int(first_new))
    if pairs.shape[0] == 0:
        return pairs
    if pairs.max() < 2**31:
        # One int64 key per pair makes the distinct step a flat sort, ~10x faster than unique(axis=0).
        keys = np.unique((pairs[:, 0] << 32) | pairs[:, 1])
        return np.stack([keys >> 32, keys & 0xFFFFFFFF], axis=1)
    return np.unique(pairs, axis=0)
