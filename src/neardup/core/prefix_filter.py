"""The prefix filter: an exact test that drops pairs of shingle sets below a Jaccard threshold
without comparing them.

Order every shingle by one total order (here: rarest first among the sets given, ties by value) and
keep each set's first ``prefix_length`` shingles, its prefix. If J(A, B) >= t then
|A & B| >= t * max(|A|, |B|), so the two share at least ceil(t * |A|) shingles, and a set of
|A| - o + 1 of A's shingles meets every o-subset of A: some shared shingle lies in A's prefix and,
by the same count, in B's; the first shared one in the order lies in both. So every pair at or
above the threshold shares a prefix shingle (``prefix_groups``); pairs that share none are below it.
The order decides only how many pairs share one (rare shingles first: few), never which pairs at
or above the threshold do. Where most shingles are common to the sets (short texts of one template,
such as generated records), the prefixes hold the rare ones, and far fewer pairs share a prefix shingle
than share an LSH bucket.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from neardup.core import _kernels
from neardup.core.candidates import Ids, Mask, parts_by_larger
from neardup.core.ragged import Ragged
from neardup.errors import ParamsError

# Subtracted from t * |A| before rounding up: a product that is an integer in exact arithmetic may
# come out a hair above it in floating point, and rounding that up would make the prefix one shingle
# short; one shingle longer only adds pairs.
_SLACK = 1e-9


def prefix_lengths(sizes: npt.ArrayLike, threshold: float) -> npt.NDArray[np.int64]:
    """How many of its first shingles a set of each size keeps: |A| - ceil(t * |A|) + 1, at most
    |A| (an empty set keeps none). Exact: never shorter than the lemma needs."""
    if not 0.0 < threshold <= 1.0:
        raise ParamsError(f"threshold must be in (0, 1], got {threshold}")
    n = np.asarray(sizes, dtype=np.int64)
    need = np.ceil(threshold * n.astype(np.float64) - _SLACK).astype(np.int64)
    return np.minimum(n - np.maximum(need, 0) + 1, n)


class PrefixGroups(NamedTuple):
    """The ids sharing each prefix shingle (groups of two or more, ascending within each), with
    each entry's position in its set's order and the set's size."""

    groups: Ragged
    position: npt.NDArray[np.int64]
    size: npt.NDArray[np.int64]


def prefixes(sets: Ragged, threshold: float) -> Ragged:
    """Each set's prefix as ranks in the order (rarest among ``sets`` first, ties by value),
    ascending. ``sets``: sorted distinct shingle sets (as ``Sketcher.shingles(unique=True)``)."""
    values = np.asarray(sets.values)
    lengths = sets.lengths()
    if values.size == 0:
        return Ragged(np.zeros(0, np.int64), np.zeros(len(sets) + 1, np.int64))
    tokens, at, counts = np.unique(values, return_inverse=True, return_counts=True)
    order = np.lexsort((tokens, counts))
    rank = np.empty(tokens.size, dtype=np.int64)
    rank[order] = np.arange(tokens.size, dtype=np.int64)
    row = np.repeat(np.arange(len(sets), dtype=np.int64), lengths)
    # Each set's ranks ascending: one sort of (row, rank) keys.
    width = np.int64(tokens.size)
    ranked = np.sort(row * width + rank[at.reshape(-1)])
    position = np.arange(values.size, dtype=np.int64) - np.repeat(sets.offsets[:-1], lengths)
    keep = position < np.repeat(prefix_lengths(lengths, threshold), lengths)
    kept = np.bincount(row[keep], minlength=len(sets))
    offsets = np.zeros(len(sets) + 1, dtype=np.int64)
    np.cumsum(kept, out=offsets[1:])
    return Ragged(ranked[keep] - row[keep] * width, offsets)


def prefix_groups(ids: npt.ArrayLike, sets: Ragged, threshold: float) -> PrefixGroups:
    """The ids (``ids[i]`` owns set ``sets[i]``) sharing each prefix shingle: every pair with
    Jaccard >= ``threshold`` shares at least one group."""
    pre = prefixes(sets, threshold)
    lengths = pre.lengths()
    owner = np.repeat(np.asarray(ids, dtype=np.int64), lengths)
    position = np.arange(pre.values.size, dtype=np.int64) - np.repeat(pre.offsets[:-1], lengths)
    size = np.repeat(sets.lengths(), lengths)
    token = np.asarray(pre.values, dtype=np.int64)
    order = np.lexsort((owner, token))
    token, owner, position, size = token[order], owner[order], position[order], size[order]
    starts = np.flatnonzero(np.r_[True, token[1:] != token[:-1]]) if token.size else token
    counts = np.diff(np.r_[starts, token.size])
    shared = np.repeat(counts > 1, counts)
    offsets = np.r_[0, np.cumsum(counts[counts > 1])].astype(np.int64)
    return PrefixGroups(Ragged(owner[shared], offsets), position[shared], size[shared])


def prefix_parts(
    groups: PrefixGroups, threshold: float, first_new: int = 0, budget: int | None = None
) -> Iterator[npt.NDArray[np.int64]]:
    """Distinct pairs (a, b), a < b, b >= ``first_new``, sharing a prefix shingle where each
    leaves enough shingles after it (the positional filter), in parts as ``candidate_parts``
    cuts them (``budget`` counts the pairs before the filter): every pair with Jaccard >=
    ``threshold`` among them is in exactly one part.

    For a pair at or above t, let w be the first shingle in the order that both sets hold, at
    position i in A and j in B: the i shingles of A before it are not in B, so
    |A & B| <= |A| - i, and likewise |B| - j; and J >= t means |A & B| >= t (|A| + |B|) / (1 + t).
    So at w both sets leave at least that many shingles, and the pair is kept there."""
    members = np.asarray(groups.groups.values, dtype=np.int64)
    offsets = np.asarray(groups.groups.offsets, dtype=np.int64)
    share = threshold / (1.0 + threshold)

    def pairs(keep: Mask, kept_offsets: Ids, first: int) -> Ids:
        return _kernels.positional_pairs(
            members[keep], groups.position[keep], groups.size[keep], kept_offsets, first, share
        )

    return parts_by_larger(members, offsets, first_new, pairs, budget)
