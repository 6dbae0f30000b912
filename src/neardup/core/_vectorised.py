"""The kernels of ``_kernels`` as whole-array numpy, for small batches: no numba to import or load.

Each function takes and returns what its kernel does, with the same bits (tests/core/test_kernels.py
checks them against the compiled kernels on arbitrary texts). uint32 and uint64 arrays wrap on
overflow as the kernels' explicit narrowing does, so the hashes and permutations are the kernels'
steps applied to every element at once.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from neardup.core._constants import (
    _BAND_SEED,
    _C1,
    _C2,
    _F1,
    _F2,
    _FIVE,
    _G1,
    _G2,
    _M1,
    _M2,
    _N1,
    EMPTY,
    MASK32,
    PRIME,
    U32,
    U64,
)

Array = npt.NDArray[Any]
# Densification tries this many probes of every empty bin at once: a document with few shingles may
# need dozens, and one round per probe would cost a numpy call each.
_PROBES_AT_ONCE = 64


def _rotl32(x: Array, r: int) -> Array:
    return (x << U32(r)) | (x >> U32(32 - r))


def _murmur_keys(cps: Array) -> Array:
    return _rotl32(cps.astype(np.uint32) * _C1, 15) * _C2


def _murmur_final(h: Array, n_bytes: Array) -> Array:
    h = h ^ n_bytes
    h = h ^ (h >> U32(16))
    h = h * _F1
    h = h ^ (h >> U32(13))
    h = h * _F2
    out: Array = h ^ (h >> U32(16))
    return out


def _murmur_slices(keys: Array, starts: Array, widths: Array) -> Array:
    """MurmurHash3_x86_32 (seed 0) of ``keys[starts[i]:starts[i] + widths[i]]`` for every i, the
    keys being code points already through the per-block transform."""
    acc = np.zeros(starts.shape[0], dtype=np.uint32)
    longest = int(widths.max()) if widths.size else 0
    uniform = bool(widths.size) and int(widths.min()) == longest
    for j in range(longest):
        if uniform:
            acc = _rotl32(acc ^ keys[starts + j], 13) * U32(5) + _N1
        else:
            on = widths > j
            acc[on] = _rotl32(acc[on] ^ keys[starts[on] + j], 13) * U32(5) + _N1
    return _murmur_final(acc, (widths * 4).astype(np.uint32))


def _fmix64(h: Array) -> Array:
    h = h ^ (h >> U64(33))
    h = h * _M1
    h = h ^ (h >> U64(33))
    h = h * _M2
    out: Array = h ^ (h >> U64(33))
    return out


def _permute(a: Array | np.uint64, b: Array | np.uint64, x: Array) -> Array:
    y = a * x + b
    t = (y >> U64(32)) * _FIVE + (y & MASK32)
    t = (t >> U64(32)) * _FIVE + (t & MASK32)
    return np.where(t >= PRIME, t - PRIME, t)


def _lengths(offsets: Array) -> npt.NDArray[np.int64]:
    return np.diff(offsets).astype(np.int64)


def _space(cps: Array, is_space: Array) -> npt.NDArray[np.bool_]:
    """Whether each code point is whitespace (code points beyond the table are not)."""
    inside = cps < is_space.shape[0]
    space = np.zeros(cps.shape[0], dtype=np.bool_)
    space[inside] = is_space[cps[inside]]
    return space


def _rebased(values: Array, offsets: Array) -> tuple[Array, npt.NDArray[np.int64]]:
    """The documents' values alone and offsets from 0 (a kernel reads only between the offsets)."""
    offsets = np.asarray(offsets, dtype=np.int64)
    return values[offsets[0] : offsets[-1]], offsets - offsets[0]


def collapse_whitespace(cps: Array, offsets: Array, is_space: Array) -> tuple[Array, Array]:
    """Strip each document and turn every whitespace run into one U+0020."""
    cps, offsets = _rebased(cps, offsets)
    space = _space(cps, is_space)
    after_space = np.empty_like(space)
    after_space[1:] = space[:-1]
    starts = offsets[:-1]
    after_space[starts[starts < cps.shape[0]]] = True  # a document's leading whitespace goes
    keep = ~(space & after_space)
    # A kept space with nothing kept after it in its document began trailing whitespace: it goes too.
    kept = np.flatnonzero(keep)
    doc = np.searchsorted(offsets, kept, side="right") - 1
    ends = kept[np.flatnonzero(np.diff(doc, append=-1) != 0)]  # the last kept of each document
    keep[ends[space[ends]]] = False
    out = np.where(space, np.asarray(0x20, dtype=cps.dtype), cps)[keep]
    counts = np.concatenate([[0], np.cumsum(keep, dtype=np.int64)])
    return out.astype(cps.dtype), counts[offsets]


def char_shingle_hashes(cps: Array, offsets: Array, k: int) -> tuple[Array, Array]:
    """MurmurHash3_x86_32 of every window of k code points (a shorter document: one, of all of it)."""
    cps, offsets = _rebased(cps, offsets)
    lengths = _lengths(offsets)
    counts = np.where(lengths >= k, lengths - k + 1, np.minimum(lengths, 1))
    out_off = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    total = int(out_off[-1])
    starts = np.repeat(offsets[:-1] - out_off[:-1], counts) + np.arange(total, dtype=np.int64)
    widths = np.repeat(np.minimum(lengths, k), counts)
    return _murmur_slices(_murmur_keys(cps), starts, widths), out_off


def word_shingle_hashes(cps: Array, offsets: Array, k: int, is_space: Array) -> tuple[Array, Array]:
    """MurmurHash3_x86_32 of every k words joined by one space (fewer words: one, of them all)."""
    cps, offsets = _rebased(cps, offsets)
    n_docs = offsets.shape[0] - 1
    word = ~_space(cps, is_space)
    edges = np.zeros(cps.shape[0] + 1, dtype=np.bool_)  # where a document starts or ends
    edges[offsets] = True
    prev = np.concatenate([[False], word[:-1]]) & ~edges[:-1]
    following = np.concatenate([word[1:], [False]]) & ~edges[1:]
    begin = np.flatnonzero(word & ~prev)
    end = np.flatnonzero(word & ~following) + 1
    words = np.bincount(np.searchsorted(offsets, begin, side="right") - 1, minlength=n_docs)
    # The words one after another, each followed by one space: a shingle is a slice of this.
    sizes = (end - begin).astype(np.int64)
    at = np.concatenate([[0], np.cumsum(sizes + 1)]).astype(np.int64)
    joined = np.full(int(at[-1]), 0x20, dtype=np.uint32)
    offset = np.arange(int(sizes.sum()), dtype=np.int64) - np.repeat(
        at[:-1] - np.arange(sizes.shape[0]), sizes
    )
    joined[np.repeat(at[:-1], sizes) + offset] = cps[np.repeat(begin, sizes) + offset]  # offset in its word
    width = np.minimum(words, k)
    counts = np.where(words > 0, words - width + 1, 0)
    out_off = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    first_word = np.concatenate([[0], np.cumsum(words)])[:-1]
    first = np.repeat(first_word - out_off[:-1], counts) + np.arange(int(out_off[-1]), dtype=np.int64)
    last = first + np.repeat(width - 1, counts)
    spans = at[last] + sizes[last] - at[first]
    return _murmur_slices(_murmur_keys(joined), at[first], spans), out_off


def minhash_classic(hashes: Array, offsets: Array, a: Array, b: Array) -> Array:
    """Row i of document d: min over its hashes x of (a[i] * x + b[i]) mod PRIME; EMPTY if none."""
    hashes, offsets = _rebased(hashes, offsets)
    lengths = _lengths(offsets)
    sig = np.full((lengths.shape[0], a.shape[0]), EMPTY, dtype=np.uint32)
    filled = lengths > 0
    if filled.any():
        permuted = _permute(a[None, :], b[None, :], hashes.astype(np.uint64)[:, None])
        sig[filled] = np.minimum.reduceat(permuted, offsets[:-1][filled], axis=0)
    return sig


def minhash_oph(
    hashes: Array, offsets: Array, n_bins: int, a: np.uint64, b: np.uint64, probe_seed: np.uint64
) -> Array:
    """One-permutation MinHash with optimal densification, as ``_kernels.minhash_oph``."""
    hashes, offsets = _rebased(hashes, offsets)
    lengths = _lengths(offsets)
    n_docs = lengths.shape[0]
    values = _permute(U64(a), U64(b), hashes.astype(np.uint64))
    bins = (values * U64(n_bins)) >> U64(32)
    acc = np.full((n_docs, n_bins), EMPTY, dtype=np.uint32)
    np.minimum.at(
        acc, (np.repeat(np.arange(n_docs), lengths), bins.astype(np.int64)), values.astype(np.uint32)
    )
    sig = acc.copy()
    doc, empty = np.nonzero((acc == EMPTY) & (lengths > 0)[:, None])
    attempt = 1
    while doc.size:  # every empty bin of a non-empty document copies the first non-empty bin it probes
        tries = np.arange(attempt, attempt + _PROBES_AT_ONCE, dtype=np.uint64)
        probe = _fmix64(U64(probe_seed) + empty.astype(np.uint64)[:, None] * _G1 + tries[None, :] * _G2)
        donor = (((probe & MASK32) * U64(n_bins)) >> U64(32)).astype(np.int64)
        found = acc[doc[:, None], donor]
        hit = found != EMPTY
        done = hit.any(axis=1)
        first = hit[done].argmax(axis=1)
        sig[doc[done], empty[done]] = found[done][np.arange(first.shape[0]), first]
        doc, empty = doc[~done], empty[~done]
        attempt += _PROBES_AT_ONCE
    return sig


def band_keys(sig: Array, bands: int, rows: int) -> Array:
    """Key of band j: h = BAND_SEED; h = fmix64(h ^ v) for its r values in order; as int64."""
    grouped = sig[:, : bands * rows].reshape(sig.shape[0], bands, rows).astype(np.uint64)
    h = np.full((sig.shape[0], bands), _BAND_SEED, dtype=np.uint64)
    for i in range(rows):
        h = _fmix64(h ^ grouped[:, :, i])
    return h.view(np.int64)


def _distinct(values: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """The sorted distinct values (np.unique would import numpy.ma on its first call)."""
    ordered = np.sort(values)
    keep = np.ones(ordered.shape[0], dtype=np.bool_)
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    distinct: npt.NDArray[np.uint64] = ordered[keep]
    return distinct


def _keyed(values: Array, offsets: Array, rows: Array) -> npt.NDArray[np.uint64]:
    """The values of documents ``rows`` (in that order) as ``position << 32 | value``."""
    offsets = np.asarray(offsets, dtype=np.int64)
    lengths = np.diff(offsets)[rows]
    done = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    picked = np.repeat(offsets[:-1][rows] - done[:-1], lengths) + np.arange(int(done[-1]), dtype=np.int64)
    position = np.repeat(np.arange(rows.shape[0], dtype=np.uint64), lengths)
    keyed: npt.NDArray[np.uint64] = (position << U64(32)) | values[picked].astype(np.uint32).astype(np.uint64)
    return keyed


def unique_sorted_rows(values: Array, offsets: Array, rows: Array) -> tuple[Array, Array]:
    """Sort the values of documents ``rows`` (in that order) and drop repeats."""
    distinct = _distinct(_keyed(values, offsets, rows))
    counts = np.bincount((distinct >> U64(32)).astype(np.int64), minlength=rows.shape[0])
    out_off = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return (distinct & MASK32).astype(np.uint32).astype(values.dtype), out_off


def unique_sorted(values: Array, offsets: Array) -> tuple[Array, Array]:
    """Sort each document's values and drop repeats."""
    return unique_sorted_rows(values, offsets, np.arange(offsets.shape[0] - 1, dtype=np.int64))


def _jaccard(distinct_a: Array, distinct_b: Array, pairs: int) -> Array:
    """Jaccard of each pair from its sides' distinct values keyed by pair (as ``_keyed`` makes them)."""
    both = np.sort(np.concatenate([distinct_a, distinct_b]))
    shared = both[1:][both[1:] == both[:-1]]
    common = np.bincount((shared >> U64(32)).astype(np.int64), minlength=pairs)
    size = np.bincount((both >> U64(32)).astype(np.int64), minlength=pairs)
    union = size - common
    out = np.zeros(pairs, dtype=np.float64)
    np.divide(common, union, out=out, where=union > 0)
    return out


def pair_jaccard(
    a_values: Array, a_offsets: Array, b_values: Array, b_offsets: Array, left: Array, right: Array
) -> Array:
    """Exact Jaccard of sorted distinct sets ``left[i]`` of batch a and ``right[i]`` of batch b."""
    pairs = left.shape[0]
    return _jaccard(_keyed(a_values, a_offsets, left), _keyed(b_values, b_offsets, right), pairs)


def pair_jaccard_unsorted(
    a_values: Array, a_offsets: Array, b_values: Array, b_offsets: Array, left: Array, right: Array
) -> Array:
    """``pair_jaccard`` of sets given as shingled: in any order, with repeats."""
    a = _distinct(_keyed(a_values, a_offsets, left))
    b = _distinct(_keyed(b_values, b_offsets, right))
    return _jaccard(a, b, left.shape[0])


def pair_agreement(sigs: Array, left: Array, right: Array) -> Array:
    """Share of equal non-EMPTY rows of signatures ``left[i]`` and ``right[i]``."""
    a, b = sigs[left], sigs[right]
    same = ((a == b) & (a != EMPTY)).sum(axis=1)
    share: Array = same / sigs.shape[1]
    return share
