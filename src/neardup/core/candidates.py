"""Candidate pairs: documents that share a bucket in some band, each pair once."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import numpy.typing as npt

from neardup.core import _kernels
from neardup.core.distinct import distinct
from neardup.core.ragged import Ragged

# Mixes the band into the bucket key so one sort groups every band at once (odd: a bijection per band).
_BAND_MIX = np.int64(-7046029254386353131)  # 0x9E3779B97F4A7C15 as a signed 64-bit integer
# Candidate pairs (counted with their repeats across bands) an ingest holds at once: with their
# keys, agreements and the shingle sets read to verify them, a few hundred bytes each.
PAIRS_PER_PART = 1 << 21

Ids = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]


def mixed_keys(band: npt.ArrayLike, bucket: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """One int64 per (band, bucket): equal for equal pairs, and for different ones with
    probability ~2**-64 (which only adds candidates, never loses one)."""
    with np.errstate(over="ignore"):
        return np.asarray(bucket, np.int64) ^ (np.asarray(band, np.int64) * _BAND_MIX)


def unmixed_buckets(band: npt.ArrayLike, mixed: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """The buckets of mixed keys, given their bands (``mixed_keys`` undone: XOR is its own inverse)."""
    return mixed_keys(band, mixed)


def bucket_matches(
    keys: npt.NDArray[np.int64],
    stored_band: npt.ArrayLike,
    stored_bucket: npt.ArrayLike,
    stored_content: npt.ArrayLike,
    most: int | None = None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Distinct (row, content) pairs where row ``row`` of the key matrix (rows x bands) shares a
    bucket with a stored (band, bucket, content) row; sorted by row, then content. With ``most``,
    at most that many contents of each bucket a row shares (the first by the stored rows' order):
    a row sharing the buckets of a dense cluster meets its members by the thousand."""
    rows, bands = keys.shape
    wanted = mixed_keys(np.tile(np.arange(bands), rows), keys.reshape(-1))
    stored = mixed_keys(stored_band, stored_bucket)
    order = np.argsort(stored, kind="stable")
    stored, content = stored[order], np.asarray(stored_content, np.int64)[order]
    lo, hi = np.searchsorted(stored, wanted, "left"), np.searchsorted(stored, wanted, "right")
    counts = hi - lo if most is None else np.minimum(hi - lo, most)
    row = np.repeat(np.arange(wanted.size) // bands, counts)
    # The stored positions of each wanted key, concatenated without a Python loop.
    starts = np.repeat(lo - np.r_[0, np.cumsum(counts)[:-1]], counts)
    found = content[starts + np.arange(int(counts.sum()))]
    if row.size == 0:
        return row.astype(np.int64), found
    if found.max() < 2**40 and rows < 2**23:
        key = distinct((row.astype(np.int64) << 40) | found)
        return key >> 40, key & ((1 << 40) - 1)
    unique = np.unique(np.stack([row, found], axis=1), axis=0)
    return unique[:, 0].astype(np.int64), unique[:, 1].astype(np.int64)


def bucket_groups(band: npt.ArrayLike, bucket: npt.ArrayLike, content: npt.ArrayLike) -> Ragged:
    """The members of each shared (band, bucket) as a ragged batch, each group sorted ascending.

    Buckets with a single member are dropped first. Two buckets of different bands could share a
    mixed key with probability ~2**-64 per pair of rows; that would only add candidates, which
    verification then rejects.
    """
    members, offsets, _ = _sorted_groups(band, bucket, content)
    return Ragged(members, offsets)


def keyed_groups(
    band: npt.ArrayLike, bucket: npt.ArrayLike, content: npt.ArrayLike
) -> tuple[Ragged, npt.NDArray[np.int64]]:
    """``bucket_groups`` (none where no bucket is shared), and each group's mixed key
    (``mixed_keys``), ascending."""
    members, offsets, key = _sorted_groups(band, bucket, content)
    if members.size == 0:
        return Ragged(members, np.zeros(1, dtype=np.int64)), key
    return Ragged(members, offsets), key[offsets[:-1]]


def _sorted_groups(
    band: npt.ArrayLike, bucket: npt.ArrayLike, content: npt.ArrayLike
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The members of shared buckets sorted by (key, member), the groups' offsets, and the keys
    row for row."""
    key = mixed_keys(band, bucket)
    _, inverse, counts = np.unique(key, return_inverse=True, return_counts=True)
    shared = counts[inverse] > 1
    key, members = key[shared], np.asarray(content, np.int64)[shared]
    order = np.lexsort((members, key))
    key, members = key[order], members[order]
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    offsets = np.r_[starts, members.size].astype(np.int64)
    return members, offsets, key


def candidate_pairs(groups: Ragged, first_new: int = 0) -> npt.NDArray[np.int64]:
    """Distinct pairs (a, b), a < b, sharing a group, with b >= ``first_new``; sorted, shape n x 2.

    ``groups`` holds the ids of the documents in each (band, bucket), one group each; ids below
    ``first_new`` (negative ones too) are documents whose pairs among themselves are already known.
    Pairs that meet in several bands are returned once.
    """
    members, offsets = _ascending(groups)
    return _distinct(_kernels.group_pairs(members, offsets, int(first_new)))


def candidate_parts(
    groups: Ragged, first_new: int = 0, budget: int | None = None
) -> Iterator[npt.NDArray[np.int64]]:
    """``candidate_pairs`` in parts, each pair in exactly one: the pairs whose larger member lies in
    one range of ids, the ranges cut so that a part holds about ``budget`` pairs before repeats
    across bands are dropped (more only where one id alone has more; ``PAIRS_PER_PART`` if None).
    Memory follows the budget and the groups, never the number of pairs, which grows with the
    square of a hot bucket's size."""
    members, offsets = _ascending(groups)

    def pairs(keep: Mask, kept_offsets: Ids, first: int) -> Ids:
        return _kernels.group_pairs(members[keep], kept_offsets, first)

    return parts_by_larger(members, offsets, first_new, pairs, budget)


PairsOf = Callable[[Mask, Ids, int], Ids]


def parts_by_larger(
    members: npt.NDArray[np.int64],
    offsets: npt.NDArray[np.int64],
    first_new: int,
    pairs_of: PairsOf,
    budget: int | None = None,
) -> Iterator[npt.NDArray[np.int64]]:
    """Distinct pairs in parts as ``candidate_parts`` cuts them, from groups whose members are
    ascending within each group; ``pairs_of(keep, offsets, first)`` makes the pairs (a, b), a < b,
    b >= first, of the groups' members where ``keep`` (offsets: the groups' kept members), with
    repeats (any subset of the pairs sharing a group: the budget counts them all)."""
    budget = PAIRS_PER_PART if budget is None else budget
    position = np.arange(members.size, dtype=np.int64) - np.repeat(offsets[:-1], np.diff(offsets))
    new = members >= first_new
    # Each member b pairs with every member before it in its group: ``position`` pairs there.
    ids = distinct(members[new])
    at = np.searchsorted(ids, members[new])
    per_id = np.bincount(at, weights=position[new], minlength=ids.size).astype(np.int64)
    ends = _cuts(np.cumsum(per_id), budget)
    start = 0
    for end in ends.tolist():
        lo, hi = int(ids[start]), int(ids[end - 1])
        start = end
        # Pairs (a, b) with lo <= b <= hi: within each group, the members up to hi (a prefix, the
        # group being ascending), pairing only the members from lo on as the larger.
        keep = members <= hi
        kept_offsets = np.r_[0, np.cumsum(keep)][offsets].astype(np.int64)
        pairs = pairs_of(keep, kept_offsets, max(int(first_new), lo))
        if pairs.shape[0]:
            yield _distinct(pairs)


def pair_count(groups: Ragged, first_new: int = 0) -> int:
    """How many pairs ``candidate_pairs`` enumerates before repeats across groups are dropped
    (exact): the work of making them, whatever their number once distinct."""
    members, offsets = _ascending(groups)
    position = np.arange(members.size, dtype=np.int64) - np.repeat(offsets[:-1], np.diff(offsets))
    return int(position[members >= first_new].sum())


class Membership:
    """Which groups each member of a ragged batch of groups is in, to test pairs for a shared group."""

    def __init__(self, groups: Ragged) -> None:
        members = np.asarray(groups.values, dtype=np.int64)
        group = np.repeat(np.arange(len(groups), dtype=np.int64), groups.lengths())
        order = np.lexsort((group, members))
        members, self._groups = members[order], group[order]
        starts = np.flatnonzero(np.r_[True, members[1:] != members[:-1]]) if members.size else members
        self.ids = members[starts]
        self._offsets = np.r_[starts, members.size].astype(np.int64)

    def share(self, left: npt.NDArray[np.int64], right: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        """Whether members ``left[i]`` and ``right[i]`` (each a member of some group) share one."""
        a, b = np.searchsorted(self.ids, left), np.searchsorted(self.ids, right)
        return _kernels.lists_meet(self._groups, self._offsets, a, b)


def _cuts(cumulative: npt.NDArray[np.int64], budget: int) -> npt.NDArray[np.int64]:
    """Ends (exclusive) of consecutive ranges of ids whose pair counts (``cumulative``: running
    totals) add up to about ``budget`` each; every range holds at least one id."""
    ends: list[int] = []
    start, done = 0, 0
    while start < cumulative.size:
        end = int(np.searchsorted(cumulative, done + budget, "right"))
        end = max(end, start + 1)
        ends.append(end)
        done, start = int(cumulative[end - 1]), end
    return np.asarray(ends, dtype=np.int64)


def _ascending(groups: Ragged) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The members and offsets of ``groups``, each group sorted ascending (as the kernel needs)."""
    members = np.asarray(groups.values, dtype=np.int64)
    offsets = np.asarray(groups.offsets, dtype=np.int64)
    descending = np.diff(members) < 0
    boundaries = offsets[1:-1]
    # A drop from one group's last member to the next group's first is no disorder.
    descending[boundaries[(boundaries > 0) & (boundaries < members.size)] - 1] = False
    if descending.any():
        # Sort within groups without a Python loop.
        group_of = np.repeat(np.arange(len(groups)), groups.lengths())
        members = members[np.lexsort((members, group_of))]
    return members, offsets


def _distinct(pairs: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The distinct rows of n x 2 ``pairs``, sorted."""
    if pairs.shape[0] == 0:
        return pairs
    if pairs.min() >= -(2**31) and pairs.max() < 2**31:
        # One int64 key per pair makes the distinct step a flat sort, far cheaper than unique(axis=0).
        keys = distinct((pairs[:, 0] << 32) | pairs[:, 1])
        return np.stack([keys >> 32, keys & 0xFFFFFFFF], axis=1)
    return np.unique(pairs, axis=0)
