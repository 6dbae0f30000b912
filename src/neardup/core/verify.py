"""Verification of candidate pairs: exact Jaccard of shingle sets, or the signature estimate."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from neardup.core import _kernels
from neardup.core.distinct import distinct
from neardup.core.ragged import Ragged
from neardup.errors import ParamsError

# A pair whose signature agreement lies this many standard errors below the threshold is
# dropped before the exact check: at J = threshold the chance of losing a true pair is ~3e-5
# (normal tail at 4 sigma), while most false candidates (J well below) go without a set merge.
PREFILTER_SIGMAS = 4.0


def _indices(
    n: int, left: npt.ArrayLike, right: npt.ArrayLike, m: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Checked int64 index arrays: ``left`` into [0, n), ``right`` into [0, m) (m = n if None)."""
    m = n if m is None else m
    a = np.ascontiguousarray(left, dtype=np.int64)
    b = np.ascontiguousarray(right, dtype=np.int64)
    if a.shape != b.shape or a.ndim != 1:
        raise ParamsError(f"pair index arrays must be 1-D of one length, got {a.shape} and {b.shape}")
    if a.size and (min(a.min(), b.min()) < 0 or a.max() >= n or b.max() >= m):
        raise ParamsError(
            f"pair indices must lie in [0, {n})"
            if m == n
            else f"pair indices must lie in [0, {n}) and [0, {m})"
        )
    return a, b


def exact_jaccard(sets: Ragged, left: npt.ArrayLike, right: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Exact Jaccard of set ``left[i]`` with set ``right[i]`` (each sorted and distinct, as from
    ``shingle_batch``); a pair of empty sets gives 0, since empty documents are never duplicates."""
    return exact_jaccard_across(sets, sets, left, right)


def exact_jaccard_across(
    first: Ragged, second: Ragged, left: npt.ArrayLike, right: npt.ArrayLike
) -> npt.NDArray[np.float64]:
    """Exact Jaccard of set ``left[i]`` of ``first`` with set ``right[i]`` of ``second`` (as
    ``exact_jaccard``), without concatenating the two batches."""
    a, b = _indices(len(first), left, right, len(second))
    return _on_pairs(_kernels.pair_jaccard, first, second, a, b)


def exact_jaccard_unsorted(
    first: Ragged | Sequence[Ragged],
    second: Ragged | Sequence[Ragged],
    left: npt.ArrayLike,
    right: npt.ArrayLike,
) -> npt.NDArray[np.float64]:
    """Exact Jaccard of shingles ``left[i]`` of ``first`` with shingles ``right[i]`` of ``second``,
    each as shingled (any order, repeats kept): the same values as ``exact_jaccard_across`` of their
    sorted distinct sets, without sorting them (a hash table per pair), for lists in few pairs.
    Either side may be parts (as a threaded sketch keeps them), taken in turn as one batch."""
    if isinstance(first, Ragged) and isinstance(second, Ragged):  # a query's: no grouping to pay for
        a, b = _indices(len(first), left, right, len(second))
        return _on_pairs(_kernels.pair_jaccard_unsorted, first, second, a, b)
    first_parts, first_starts = _parts(first)
    second_parts, second_starts = _parts(second)
    a, b = _indices(int(first_starts[-1]), left, right, int(second_starts[-1]))
    out = np.empty(a.size, dtype=np.float64)
    a_part = np.searchsorted(first_starts, a, "right") - 1
    b_part = np.searchsorted(second_starts, b, "right") - 1
    combo = a_part * len(second_parts) + b_part
    for c in distinct(combo).tolist():
        i, j = divmod(c, len(second_parts))
        mine = np.flatnonzero(combo == c)
        out[mine] = _on_pairs(
            _kernels.pair_jaccard_unsorted,
            first_parts[i],
            second_parts[j],
            a[mine] - first_starts[i],
            b[mine] - second_starts[j],
        )
    return out


def exact_overlaps(query: npt.NDArray[np.generic], sets: Ragged) -> npt.NDArray[np.int64]:
    """The size of the intersection of the sorted distinct set ``query`` with each set of
    ``sets`` (each sorted and distinct): exact, from which containment and Jaccard follow."""
    if len(sets) == 0:
        return np.zeros(0, dtype=np.int64)
    shared = np.isin(sets.values, query).astype(np.int64)
    totals = np.zeros(sets.values.size + 1, dtype=np.int64)
    np.cumsum(shared, out=totals[1:])
    return totals[sets.offsets[1:]] - totals[sets.offsets[:-1]]


def _on_pairs(
    kernel: Callable[..., npt.NDArray[np.float64]],
    first: Ragged,
    second: Ragged,
    a: np.ndarray,
    b: np.ndarray,
) -> npt.NDArray[np.float64]:
    """A pair kernel over checked indices ``a`` into ``first`` and ``b`` into ``second`` (uint32
    values, one array when both are the same batch)."""
    a_values = np.ascontiguousarray(first.values, dtype=np.uint32)
    b_values = a_values if second is first else np.ascontiguousarray(second.values, dtype=np.uint32)
    return kernel(a_values, first.offsets, b_values, second.offsets, a, b)


def _parts(batch: Ragged | Sequence[Ragged]) -> tuple[list[Ragged], npt.NDArray[np.int64]]:
    """A batch as a list of parts, and where each part's documents start in the whole."""
    parts = [batch] if isinstance(batch, Ragged) else list(batch)
    starts = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum([len(part) for part in parts], out=starts[1:])
    return parts, starts


def signature_agreement(
    signatures: npt.NDArray[np.uint32], left: npt.ArrayLike, right: npt.ArrayLike
) -> npt.NDArray[np.float64]:
    """Estimated Jaccard (share of agreeing rows) of signature rows ``left[i]`` and ``right[i]``."""
    sigs = np.ascontiguousarray(signatures, dtype=np.uint32)
    if sigs.ndim != 2:
        raise ParamsError(f"signatures must be 2-D (docs x num_perm), got shape {sigs.shape}")
    a, b = _indices(sigs.shape[0], left, right)
    return _kernels.pair_agreement(sigs, a, b)


def agreement_with(
    signature: npt.NDArray[np.uint32], others: npt.NDArray[np.uint32]
) -> npt.NDArray[np.float64]:
    """Estimated Jaccard of one signature with each row of ``others``, as ``signature_agreement``
    counts it (equal non-EMPTY rows); for one query's few candidates, with no index arrays."""
    sig = np.asarray(signature, dtype=np.uint32)
    rows = np.asarray(others, dtype=np.uint32)
    if sig.ndim != 1 or rows.ndim != 2 or rows.shape[1] != sig.shape[0]:
        raise ParamsError(f"expected a signature and rows of its length, got {sig.shape} and {rows.shape}")
    same = (rows == sig) & (sig != _kernels.EMPTY)
    return np.asarray(np.count_nonzero(same, axis=1) / sig.shape[0], dtype=np.float64)


def prefilter_floor(threshold: float, num_perm: int) -> float:
    """Lowest signature agreement worth an exact check at ``threshold`` (PREFILTER_SIGMAS below it)."""
    if not 0.0 < threshold <= 1.0:
        raise ParamsError(f"threshold must be in (0, 1], got {threshold}")
    return threshold - PREFILTER_SIGMAS * math.sqrt(threshold * (1.0 - threshold) / num_perm)
