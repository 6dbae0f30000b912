"""Compiled inner loops (numba), loaded on first need. Private: the public modules wrap them with
checked arguments.

Every kernel works on a *ragged batch*: one flat array of values plus an ``offsets`` array of
length ``docs + 1``, document ``i`` owning ``values[offsets[i]:offsets[i + 1]]``. Code points may
come as uint8 (pure-ASCII batches, no widening copy) or uint32; numba compiles one version each.

Integer arithmetic is exact and platform-independent: 32-bit steps are narrowed with an explicit
``np.uint32(...)`` after every operation (numba widens uint32 operands to 64 bits otherwise), and
64-bit steps use uint64 operands only (mixing signed and unsigned would give floats). The same
code therefore gives the same bits run by the interpreter on numpy scalars (which wrap where numba
wraps). Most kernels also have a whole-array numpy version (``_vectorised``) with the same bits.
Until a kernel has run long enough to be worth loading (see ``_Kernel``), it runs as numpy, else
interpreted, so a command on a few texts never imports numba, let alone compiles.
"""

from __future__ import annotations

import functools
import threading
import types
from collections.abc import Callable
from typing import Any, TypeVar, cast

import numpy as np

from neardup.core import _constants, _vectorised
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
    MASK32,
    U32,
    U64,
)

# The public modules name these through here.
PRIME = _constants.PRIME
EMPTY = _constants.EMPTY

# Interpreted, a kernel takes roughly one unit of time per unit of ``work`` (about one inner-loop
# step); its numpy version (``_vectorised``, where it has one) takes a small fraction of that per
# unit plus a fixed cost per call. Loading a kernel means importing numba and reading numba's cache
# (or compiling, once per installation), which costs about INTERPRET_BUDGET units. So a kernel not
# yet loaded in this process runs its numpy version, else (below INTERPRET_BELOW units) the
# interpreter, until it has spent about what loading would have cost; then it loads once. A small
# command never imports numba, and a long-running process loads each kernel it keeps using.
INTERPRET_BELOW = 20_000
INTERPRET_BUDGET = 20_000
# Units of work a numpy version does in the time the interpreter does one (kept on the low side of
# what the hashing kernels achieve, so a long batch loads the compiled kernel sooner).
VECTORISED_SPEEDUP = 200
# Units of interpreted work a numpy call costs however small its input (numpy's per-call overhead).
VECTORISED_CALL = 100

# What ``_jit`` registered: the name of each function numba compiles, with its options.
_JITTED: dict[str, dict[str, Any]] = {}
_LOADING = threading.Lock()


class _Kernel:
    """A numba kernel loaded on first need; until then small inputs run its numpy version (if it has
    one) or the interpreter, until that has cost what loading it would."""

    def __init__(self, function: Callable[..., Any], work: Callable[..., int], vectorised: Any) -> None:
        self.py_func = function
        self.work = work
        self.vectorised: Callable[..., Any] | None = vectorised
        self.name: str = function.__name__
        self.spent = 0
        self._compiled: Any = None
        functools.update_wrapper(self, function)

    @property
    def compiled(self) -> Any:
        """The numba dispatcher (importing numba, loading from its cache or compiling on first call)."""
        if self._compiled is None:
            self._compiled = _compiled_namespace()[self.name]
        return self._compiled

    @property
    def loaded(self) -> bool:
        """Whether this process has compiled or loaded the kernel already."""
        return self._compiled is not None and bool(self._compiled.overloads)

    def __call__(self, *args: Any) -> Any:
        if self.loaded:
            return self.compiled(*args)
        work = self.work(*args)
        if self.vectorised is not None:
            cost, run = VECTORISED_CALL + work // VECTORISED_SPEEDUP, self.vectorised
        elif work < INTERPRET_BELOW:
            cost, run = work, interpreted(self.name)
        else:
            return self.compiled(*args)
        if self.spent + cost > INTERPRET_BUDGET:
            return self.compiled(*args)
        self.spent += cost
        return run(*args)


_F = TypeVar("_F", bound=Callable[..., Any])


def _jit(**options: Any) -> Callable[[_F], _F]:
    """Mark a function for numba (with these options) when the kernels load; until then it stays
    the plain Python function, so defining the kernels imports no numba."""

    def register(function: _F) -> _F:
        _JITTED[function.__name__] = options
        return function

    return register


def _kernel(work: Callable[..., int], vectorised: Callable[..., Any] | None = None) -> Callable[[_F], _F]:
    """A kernel compiled with numba (cached, GIL released) when needed, routed as _Kernel does."""

    def wrap(function: _F) -> _F:
        _jit(cache=True, nogil=True)(function)
        return cast(_F, _Kernel(function, work, vectorised))

    return wrap


def _namespace(wrap: Callable[[types.FunctionType, dict[str, Any]], Any], **fixed: Any) -> dict[str, Any]:
    """This module's globals with every registered function rebuilt on them and passed to ``wrap``
    (so that the functions call each other's wrapped versions), and ``fixed`` names as given."""
    namespace = dict(globals())
    namespace.update(fixed)
    for name, options in _JITTED.items():
        if name in fixed:
            continue
        value = globals()[name]
        f = value.py_func if isinstance(value, _Kernel) else value
        copy = types.FunctionType(f.__code__, namespace, f.__name__, f.__defaults__, f.__closure__)
        namespace[name] = wrap(copy, options)
    return namespace


@functools.cache
def _interpreted_namespace() -> dict[str, Any]:
    """Every kernel and helper as its plain Python function."""
    # Interpreted, a document's sort is numpy's: every correct sort gives the same values, and the
    # radix sort's passes over 2**11 counters are far too many steps for the interpreter.
    return _namespace(
        lambda f, options: f,
        _insertion_sort=np.sort,
        _radix_sort=lambda values, scratch, counts: np.sort(values),
    )


_COMPILED: dict[str, Any] = {}


def _compiled_namespace() -> dict[str, Any]:
    """Every kernel and helper as a numba dispatcher (numba imported here, once, by one thread)."""
    from neardup.core import _numba_cache  # numba and what finds its cache, imported on first need

    with _LOADING:
        if not _COMPILED:
            _COMPILED.update(_namespace(_numba_cache.jit))
    return _COMPILED


def interpreted(name: str) -> Callable[..., Any]:
    """Kernel ``name`` run by the interpreter on numpy scalars: the same code, the same results."""
    function = _interpreted_namespace()[name]

    def run(*args: Any) -> Any:
        with np.errstate(over="ignore"):  # numpy scalars warn where numba silently wraps, as intended
            return function(*args)

    return run


def _docs(offsets: np.ndarray) -> int:
    return int(offsets.shape[0]) - 1


@_jit(inline="always")
def _rotl32(x: np.uint32, r: int) -> np.uint32:
    return U32((x << U32(r)) | (x >> U32(32 - r)))


@_jit(inline="always")
def _murmur_key(cp: np.uint32) -> np.uint32:
    """The per-block transform of MurmurHash3_x86_32 (depends on the block only)."""
    return U32(_rotl32(U32(cp * _C1), 15) * _C2)


@_jit(inline="always")
def _murmur_step(h: np.uint32, key: np.uint32) -> np.uint32:
    return U32(_rotl32(U32(h ^ key), 13) * U32(5) + _N1)


@_jit(inline="always")
def _murmur_final(h: np.uint32, n_bytes: np.uint32) -> np.uint32:
    h = U32(h ^ n_bytes)
    h = U32(h ^ (h >> U32(16)))
    h = U32(h * _F1)
    h = U32(h ^ (h >> U32(13)))
    h = U32(h * _F2)
    return U32(h ^ (h >> U32(16)))


@_jit(inline="always")
def _fmix64(h: np.uint64) -> np.uint64:
    h ^= h >> U64(33)
    h *= _M1
    h ^= h >> U64(33)
    h *= _M2
    h ^= h >> U64(33)
    return h


@_jit(inline="always")
def _permute(a: np.uint64, b: np.uint64, x: np.uint64) -> np.uint64:
    """(a * x + b) mod PRIME, exact for a, b < PRIME and x < 2**32."""
    y = a * x + b
    t = (y >> U64(32)) * _FIVE + (y & MASK32)  # < 6 * 2**32
    t = (t >> U64(32)) * _FIVE + (t & MASK32)  # < 2**32 + 30 < 2 * PRIME
    return t - PRIME if t >= PRIME else t


@_jit(cache=True, nogil=True)
def _max_length(offsets: np.ndarray) -> int:
    longest = 0
    for d in range(offsets.shape[0] - 1):
        longest = max(longest, offsets[d + 1] - offsets[d])
    return longest


@_kernel(lambda cps, offsets, is_space: cps.shape[0] + _docs(offsets), _vectorised.collapse_whitespace)
def collapse_whitespace(
    cps: np.ndarray, offsets: np.ndarray, is_space: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Strip each document and turn every whitespace run into one U+0020 (branch-free copy)."""
    n_docs = offsets.shape[0] - 1
    out = np.empty_like(cps)
    out_off = np.zeros(n_docs + 1, dtype=np.int64)
    table_len = is_space.shape[0]
    w = 0
    for d in range(n_docs):
        start_w = w
        prev_space = True  # drops leading whitespace
        for i in range(offsets[d], offsets[d + 1]):
            c = cps[i]
            space = c < table_len and is_space[c]
            out[w] = 0x20 if space else c
            w += 0 if (space and prev_space) else 1
            prev_space = space
        if w > start_w and prev_space:
            w -= 1  # drops the one trailing space kept above
        out_off[d + 1] = w
    return out[:w].copy(), out_off


@_kernel(lambda cps, offsets: cps.shape[0] * 2 + _docs(offsets))
def utf8_encode(cps: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each document's code points as UTF-8 (a surrogate as three bytes, as "surrogatepass" does):
    the bytes and their offsets, document ``d`` owning ``out[out_off[d]:out_off[d + 1]]``."""
    n_docs = offsets.shape[0] - 1
    out_off = np.zeros(n_docs + 1, dtype=np.int64)
    for d in range(n_docs):
        size = 0
        for i in range(offsets[d], offsets[d + 1]):
            c = cps[i]
            size += 1 if c < 0x80 else (2 if c < 0x800 else (3 if c < 0x10000 else 4))
        out_off[d + 1] = out_off[d] + size
    out = np.empty(out_off[n_docs], dtype=np.uint8)
    w = 0
    for d in range(n_docs):
        for i in range(offsets[d], offsets[d + 1]):
            c = np.uint32(cps[i])
            if c < 0x80:
                out[w] = c
                w += 1
            elif c < 0x800:
                out[w] = 0xC0 | (c >> 6)
                out[w + 1] = 0x80 | (c & 0x3F)
                w += 2
            elif c < 0x10000:
                out[w] = 0xE0 | (c >> 12)
                out[w + 1] = 0x80 | ((c >> 6) & 0x3F)
                out[w + 2] = 0x80 | (c & 0x3F)
                w += 3
            else:
                out[w] = 0xF0 | (c >> 18)
                out[w + 1] = 0x80 | ((c >> 12) & 0x3F)
                out[w + 2] = 0x80 | ((c >> 6) & 0x3F)
                out[w + 3] = 0x80 | (c & 0x3F)
                w += 4
    return out, out_off


@_kernel(lambda cps, offsets, k: cps.shape[0] * (k + 2) + _docs(offsets), _vectorised.char_shingle_hashes)
def char_shingle_hashes(cps: np.ndarray, offsets: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """MurmurHash3_x86_32 (seed 0) of the UTF-32-LE bytes of every window of k code points.

    A non-empty document shorter than k gives one hash, of the whole document; an empty one none.
    """
    n_docs = offsets.shape[0] - 1
    out_off = np.zeros(n_docs + 1, dtype=np.int64)
    for d in range(n_docs):
        length = offsets[d + 1] - offsets[d]
        out_off[d + 1] = out_off[d] + (length - k + 1 if length >= k else min(length, 1))
    out = np.empty(out_off[n_docs], dtype=np.uint32)
    longest = _max_length(offsets)
    keys = np.empty(longest, dtype=np.uint32)
    acc = np.empty(longest, dtype=np.uint32)
    for d in range(n_docs):
        start = offsets[d]
        length = offsets[d + 1] - start
        width = min(length, k)
        n = out_off[d + 1] - out_off[d]
        for i in range(length):
            keys[i] = _murmur_key(U32(cps[start + i]))
        # Loop order (window position innermost) lets LLVM vectorise across windows.
        for i in range(n):
            acc[i] = 0
        for j in range(width):
            for i in range(n):
                acc[i] = _murmur_step(acc[i], keys[i + j])
        n_bytes = U32(4 * width)
        o = out_off[d]
        for i in range(n):
            out[o + i] = _murmur_final(acc[i], n_bytes)
    return out, out_off


@_kernel(
    lambda cps, offsets, k, is_space: cps.shape[0] * (k + 2) + _docs(offsets), _vectorised.word_shingle_hashes
)
def word_shingle_hashes(
    cps: np.ndarray, offsets: np.ndarray, k: int, is_space: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """MurmurHash3_x86_32 (seed 0) of the UTF-32-LE bytes of every k words joined by one space.

    Words are maximal runs of non-whitespace. Fewer than k words give one hash of them all.
    """
    n_docs = offsets.shape[0] - 1
    table_len = is_space.shape[0]
    longest = _max_length(offsets)
    # A document of L code points has at most (L + 1) // 2 words, hence at most that many shingles.
    starts = np.empty(longest + 1, dtype=np.int64)
    ends = np.empty(longest + 1, dtype=np.int64)
    out = np.empty(cps.shape[0] + n_docs, dtype=np.uint32)
    out_off = np.zeros(n_docs + 1, dtype=np.int64)
    o = 0
    for d in range(n_docs):
        n_words = 0
        in_word = False
        for i in range(offsets[d], offsets[d + 1]):
            c = cps[i]
            space = c < table_len and is_space[c]
            if not space and not in_word:
                starts[n_words] = i
                in_word = True
            elif space and in_word:
                ends[n_words] = i
                n_words += 1
                in_word = False
        if in_word:
            ends[n_words] = offsets[d + 1]
            n_words += 1
        width = min(n_words, k)
        for s in range(n_words - width + 1 if n_words > 0 else 0):
            h = U32(0)
            n_cps = 0
            for w in range(s, s + width):
                if w > s:
                    h = _murmur_step(h, _murmur_key(U32(0x20)))
                    n_cps += 1
                for i in range(starts[w], ends[w]):
                    h = _murmur_step(h, _murmur_key(U32(cps[i])))
                    n_cps += 1
            out[o] = _murmur_final(h, U32(4 * n_cps))
            o += 1
        out_off[d + 1] = o
    return out[:o].copy(), out_off


# Radix sort digits: 3 passes of 11 bits cover 32-bit values with 2,048 counters per pass, few
# enough to clear per document (a document has ~10^2-10^4 shingles).
_RADIX_BITS = 11
_RADIX = 1 << _RADIX_BITS
_RADIX_MASK = U32(_RADIX - 1)


@_jit(inline="always")
def _radix_sort(values: np.ndarray, scratch: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Sort uint32 ``values`` (LSD radix, 3 passes); returns whichever buffer holds the result."""
    n = values.shape[0]
    src, dst = values, scratch
    for shift in range(0, 33, _RADIX_BITS):
        for d in range(_RADIX):
            counts[d] = 0
        for i in range(n):
            counts[(src[i] >> U32(shift)) & _RADIX_MASK] += 1
        total = 0
        for d in range(_RADIX):
            c = counts[d]
            counts[d] = total
            total += c
        for i in range(n):
            d = (src[i] >> U32(shift)) & _RADIX_MASK
            dst[counts[d]] = src[i]
            counts[d] += 1
        src, dst = dst, src
    return src


@_jit(inline="always")
def _insertion_sort(values: np.ndarray) -> np.ndarray:
    """Sort ``values`` in place (few values: no counting passes) and return it."""
    for i in range(1, values.shape[0]):
        v = values[i]
        j = i
        while j > 0 and values[j - 1] > v:
            values[j] = values[j - 1]
            j -= 1
        values[j] = v
    return values


@_kernel(
    lambda values, offsets: values.shape[0] * 2 + _docs(offsets), _vectorised.unique_sorted
)  # interpreted, numpy sorts
def unique_sorted(values: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sort each document's values and drop repeats."""
    return _unique_rows(values, offsets, np.arange(offsets.shape[0] - 1))


@_kernel(
    lambda values, offsets, rows: 2 * int(np.diff(offsets)[rows].sum()) + rows.shape[0],
    _vectorised.unique_sorted_rows,
)
def unique_sorted_rows(
    values: np.ndarray, offsets: np.ndarray, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Sort the values of documents ``rows`` (in that order) and drop repeats, without first
    gathering them into a batch of their own."""
    return _unique_rows(values, offsets, rows)


@_jit(nogil=True)
def _unique_rows(values: np.ndarray, offsets: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n_docs = rows.shape[0]
    total = 0
    longest = 0
    for d in range(n_docs):
        n = offsets[rows[d] + 1] - offsets[rows[d]]
        total += n
        longest = max(longest, n)
    out = np.empty(total, dtype=values.dtype)
    out_off = np.zeros(n_docs + 1, dtype=np.int64)
    buf_a = np.empty(longest, dtype=np.uint32)
    buf_b = np.empty(longest, dtype=np.uint32)
    counts = np.empty(_RADIX, dtype=np.int64)
    w = 0
    for d in range(n_docs):
        start = offsets[rows[d]]
        n = offsets[rows[d] + 1] - start
        # Element loops, not slice assignment or np.sort: those pull in numba's generic broadcasting
        # and quicksort, which add much compilation on first use for no speed here.
        for i in range(n):
            buf_a[i] = values[start + i]
        # An insertion sort is faster than three counting passes for a few values.
        part = _insertion_sort(buf_a[:n]) if n < 64 else _radix_sort(buf_a[:n], buf_b[:n], counts)
        for i in range(n):
            if i == 0 or part[i] != part[i - 1]:
                out[w] = part[i]
                w += 1
        out_off[d + 1] = w
    return out[:w].copy(), out_off


@_kernel(
    lambda hashes, offsets, a, b: (hashes.shape[0] + _docs(offsets)) * a.shape[0], _vectorised.minhash_classic
)
def minhash_classic(hashes: np.ndarray, offsets: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row i of document d: min over its hashes x of (a[i] * x + b[i]) mod PRIME; EMPTY if none."""
    n_docs = offsets.shape[0] - 1
    n_perm = a.shape[0]
    sig = np.empty((n_docs, n_perm), dtype=np.uint32)
    acc = np.empty(n_perm, dtype=np.uint64)
    for d in range(n_docs):
        acc[:] = U64(EMPTY)
        for j in range(offsets[d], offsets[d + 1]):
            x = U64(hashes[j])
            for i in range(n_perm):  # innermost over rows: vectorised
                v = _permute(a[i], b[i], x)
                if v < acc[i]:
                    acc[i] = v
        for i in range(n_perm):
            sig[d, i] = acc[i]
    return sig


@_kernel(
    lambda hashes, offsets, n_bins, a, b, seed: hashes.shape[0] * 2 + _docs(offsets) * n_bins,
    _vectorised.minhash_oph,
)
def minhash_oph(
    hashes: np.ndarray, offsets: np.ndarray, n_bins: int, a: np.uint64, b: np.uint64, probe_seed: np.uint64
) -> np.ndarray:
    """One-permutation MinHash with optimal densification (Shrivastava, ICML 2017).

    v = (a * x + b) mod PRIME permutes the hashes; bin floor(v * n_bins / 2**32) keeps its minimum,
    so bins hold disjoint value ranges. An empty bin i copies bin floor(lo32(p_t) * n_bins / 2**32)
    for the first t = 1, 2, ... that is non-empty, with p_t = fmix64(probe_seed + i*G1 + t*G2). The
    probe sequence depends on i alone, so documents with the same non-empty bins copy alike.
    """
    n_docs = offsets.shape[0] - 1
    sig = np.empty((n_docs, n_bins), dtype=np.uint32)
    acc = np.empty(n_bins, dtype=np.uint32)
    values = np.empty(_max_length(offsets), dtype=np.uint32)
    nb = U64(n_bins)
    for d in range(n_docs):
        start = offsets[d]
        n = offsets[d + 1] - start
        for j in range(n):  # vectorised: the permutation of every hash
            values[j] = U32(_permute(a, b, U64(hashes[start + j])))
        acc[:] = EMPTY
        for j in range(n):  # scatter-min into bins; a branchless min is twice as fast here
            v = values[j]
            bin_ = (U64(v) * nb) >> U64(32)
            acc[bin_] = min(acc[bin_], v)
        for i in range(n_bins):
            if acc[i] != EMPTY or n == 0:
                sig[d, i] = acc[i]
                continue
            t = U64(1)
            while True:
                probe = _fmix64(probe_seed + U64(i) * _G1 + t * _G2)
                donor = ((probe & MASK32) * nb) >> U64(32)
                if acc[donor] != EMPTY:
                    sig[d, i] = acc[donor]
                    break
                t += U64(1)
    return sig


@_kernel(lambda sig, bands, rows: sig.shape[0] * bands * rows, _vectorised.band_keys)
def band_keys(sig: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """Key of band j: h = BAND_SEED; h = fmix64(h ^ v) for its r values in order; as int64."""
    n_docs = sig.shape[0]
    out = np.empty((n_docs, bands), dtype=np.uint64)
    for d in range(n_docs):
        for j in range(bands):
            h = _BAND_SEED
            for i in range(j * rows, (j + 1) * rows):
                h = _fmix64(h ^ U64(sig[d, i]))
            out[d, j] = h
    return out.view(np.int64)


def _pair_values(a_offsets: np.ndarray, b_offsets: np.ndarray, left: np.ndarray, right: np.ndarray) -> int:
    """Values in all the pairs, both sides counted: a pair kernel's work estimate."""
    return int(np.diff(a_offsets)[left].sum() + np.diff(b_offsets)[right].sum())


@_kernel(
    lambda a_values, a_offsets, b_values, b_offsets, left, right: (
        left.shape[0] + _pair_values(a_offsets, b_offsets, left, right)
    ),
    _vectorised.pair_jaccard,
)
def pair_jaccard(
    a_values: np.ndarray,
    a_offsets: np.ndarray,
    b_values: np.ndarray,
    b_offsets: np.ndarray,
    left: np.ndarray,
    right: np.ndarray,
) -> np.ndarray:
    """Exact Jaccard of sorted distinct sets ``left[i]`` of batch a and ``right[i]`` of batch b
    (the same batch twice for pairs within one); two empty sets give 0."""
    out = np.empty(left.shape[0], dtype=np.float64)
    for p in range(left.shape[0]):
        out[p] = _merged_jaccard(
            a_values,
            a_offsets[left[p]],
            a_offsets[left[p] + 1],
            b_values,
            b_offsets[right[p]],
            b_offsets[right[p] + 1],
        )
    return out


@_jit(inline="always")
def _merged_jaccard(
    a_values: np.ndarray, i: np.int64, i_end: np.int64, b_values: np.ndarray, j: np.int64, j_end: np.int64
) -> float:
    """Exact Jaccard of the sorted distinct sets ``a_values[i:i_end]`` and ``b_values[j:j_end]``,
    by one merge (0 for two empty sets): the one Jaccard loop of the sorted kernels."""
    size = (i_end - i) + (j_end - j)
    common = 0
    while i < i_end and j < j_end:
        x, y = a_values[i], b_values[j]
        if x == y:
            common += 1
            i += 1
            j += 1
        elif x < y:
            i += 1
        else:
            j += 1
    union = size - common
    return common / union if union > 0 else 0.0


@_jit(inline="always")
def _agreement(sigs: np.ndarray, a: np.int64, b: np.int64) -> float:
    """Share of equal non-EMPTY rows of signatures ``a`` and ``b``."""
    n = sigs.shape[1]
    same = 0
    for c in range(n):
        v = sigs[a, c]
        same += (v == sigs[b, c]) & (v != EMPTY)
    return float(same / n)


# Golden-ratio multiplier of the pair kernel's hash table: spreads shingle hashes over its slots
# even if crafted texts make them share high bits.
_SLOT_MIX = U32(0x9E3779B1)
# Slot states of that table: empty, a value of set a (not yet seen in b), of b only, of both.
_FREE, _IN_A, _IN_B, _IN_BOTH = np.uint8(0), np.uint8(1), np.uint8(2), np.uint8(3)


@_jit(inline="always")
def _table_bits(n: int) -> int:
    """Bits of a table with at least twice ``n`` slots (at most half full with n values)."""
    bits = 1
    while (1 << bits) < 2 * n:
        bits += 1
    return bits


@_jit(inline="always")
def _slot_of(slots: np.ndarray, state: np.ndarray, v: np.uint32, shift: np.uint32, mask: int) -> np.int64:
    """The slot of the pair kernel's table that holds ``v``, else the free one it goes in."""
    s = np.int64(U32(v * _SLOT_MIX) >> shift)
    while state[s] != _FREE and slots[s] != v:
        s = (s + 1) & mask
    return s


@_kernel(
    lambda a_values, a_offsets, b_values, b_offsets, left, right: (
        left.shape[0] + 2 * _pair_values(a_offsets, b_offsets, left, right)
    ),
    _vectorised.pair_jaccard_unsorted,
)
def pair_jaccard_unsorted(
    a_values: np.ndarray,
    a_offsets: np.ndarray,
    b_values: np.ndarray,
    b_offsets: np.ndarray,
    left: np.ndarray,
    right: np.ndarray,
) -> np.ndarray:
    """``pair_jaccard`` of sets given as shingled: in any order, with repeats. Each pair's values go
    through one open-addressing table (a's first, then b's), which counts the distinct values of
    each side and of both without sorting either: the same counts, so the same quotient. The table
    has 2 to 4 slots (5 bytes each) a value of the longest pair, allocated once for all pairs."""
    n_pairs = left.shape[0]
    out = np.empty(n_pairs, dtype=np.float64)
    longest = 0
    for p in range(n_pairs):
        n = (a_offsets[left[p] + 1] - a_offsets[left[p]]) + (b_offsets[right[p] + 1] - b_offsets[right[p]])
        longest = max(longest, n)
    slots = np.empty(1 << _table_bits(longest), dtype=np.uint32)
    state = np.zeros(1 << _table_bits(longest), dtype=np.uint8)
    for p in range(n_pairs):
        i0, i1 = a_offsets[left[p]], a_offsets[left[p] + 1]
        j0, j1 = b_offsets[right[p]], b_offsets[right[p] + 1]
        bits = _table_bits((i1 - i0) + (j1 - j0))
        mask = (1 << bits) - 1
        shift = U32(32 - bits)
        for slot in range(1 << bits):  # an element loop: LLVM makes it a memset
            state[slot] = _FREE
        only_a = 0
        for i in range(i0, i1):
            s = _slot_of(slots, state, a_values[i], shift, mask)
            if state[s] == _FREE:
                slots[s] = a_values[i]
                state[s] = _IN_A
                only_a += 1
        common = 0
        only_b = 0
        for j in range(j0, j1):
            s = _slot_of(slots, state, b_values[j], shift, mask)
            if state[s] == _FREE:
                slots[s] = b_values[j]
                state[s] = _IN_B
                only_b += 1
            elif state[s] == _IN_A:
                state[s] = _IN_BOTH
                common += 1
                only_a -= 1
        union = only_a + only_b + common
        out[p] = common / union if union > 0 else 0.0
    return out


@_kernel(lambda sigs, left, right: left.shape[0] * sigs.shape[1], _vectorised.pair_agreement)
def pair_agreement(sigs: np.ndarray, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Share of equal non-EMPTY rows of signatures ``left[i]`` and ``right[i]`` (a Jaccard estimate)."""
    out = np.empty(left.shape[0], dtype=np.float64)
    for p in range(left.shape[0]):
        out[p] = _agreement(sigs, left[p], right[p])
    return out


@_kernel(lambda members, offsets, first_new: members.shape[0] + int((np.diff(offsets) ** 2).sum()))
def group_pairs(members: np.ndarray, offsets: np.ndarray, first_new: int) -> np.ndarray:
    """Pairs (a, b), a < b, of members sharing a group with b >= first_new; may repeat across groups.

    Members of each group must be sorted ascending, so the pairs among old members (both below
    ``first_new``), which were checked when the newer of them arrived, are never generated.
    """
    count = 0
    for g in range(offsets.shape[0] - 1):
        lo, hi = offsets[g], offsets[g + 1]
        for j in range(lo, hi):
            if members[j] >= first_new:
                count += j - lo
    out = np.empty((count, 2), dtype=np.int64)
    k = 0
    for g in range(offsets.shape[0] - 1):
        lo, hi = offsets[g], offsets[g + 1]
        for j in range(lo, hi):
            if members[j] >= first_new:
                for i in range(lo, j):
                    out[k, 0] = members[i]
                    out[k, 1] = members[j]
                    k += 1
    return out


@_kernel(lambda keys, wanted: keys.shape[0] + wanted.shape[0])
def sorted_ranges(keys: np.ndarray, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each value of ``wanted`` (sorted), the range [lo, hi) of ``keys`` (sorted) equal to it:
    one merge of the two, linear in their lengths and reading both in order."""
    lo = np.empty(wanted.shape[0], dtype=np.int64)
    hi = np.empty(wanted.shape[0], dtype=np.int64)
    i = 0
    n = keys.shape[0]
    for j in range(wanted.shape[0]):
        w = wanted[j]
        while i < n and keys[i] < w:
            i += 1
        lo[j] = i
        k = i
        while k < n and keys[k] == w:
            k += 1
        hi[j] = k
    return lo, hi


@_kernel(
    lambda older_keys, older_band, older_content, keys, band, content: older_keys.shape[0] + keys.shape[0]
)
def merge_runs(
    older_keys: np.ndarray,
    older_band: np.ndarray,
    older_content: np.ndarray,
    keys: np.ndarray,
    band: np.ndarray,
    content: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Two runs of rows sorted by key merged into one, each newer row after the older rows with
    keys at most its own: one pass over both."""
    n, m = older_keys.shape[0], keys.shape[0]
    out_keys = np.empty(n + m, dtype=older_keys.dtype)
    out_band = np.empty(n + m, dtype=older_band.dtype)
    out_content = np.empty(n + m, dtype=older_content.dtype)
    i = j = 0
    for k in range(n + m):
        if j == m or (i < n and older_keys[i] <= keys[j]):
            out_keys[k], out_band[k], out_content[k] = older_keys[i], older_band[i], older_content[i]
            i += 1
        else:
            out_keys[k], out_band[k], out_content[k] = keys[j], band[j], content[j]
            j += 1
    return out_keys, out_band, out_content


@_kernel(lambda values, offsets, left, right: left.shape[0] * 4 + values.shape[0] // 4)
def lists_meet(values: np.ndarray, offsets: np.ndarray, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Whether list ``left[p]`` and list ``right[p]`` of a ragged batch (each list sorted
    ascending) share a value: one merge of the two lists a pair."""
    out = np.zeros(left.shape[0], dtype=np.bool_)
    for p in range(left.shape[0]):
        i, i_end = offsets[left[p]], offsets[left[p] + 1]
        j, j_end = offsets[right[p]], offsets[right[p] + 1]
        while i < i_end and j < j_end:
            if values[i] == values[j]:
                out[p] = True
                break
            if values[i] < values[j]:
                i += 1
            else:
                j += 1
    return out


@_jit(inline="always")
def _both_leave(size_a: int, at_a: int, size_b: int, at_b: int, share: float) -> bool:
    """Whether sets of sizes ``size_a`` and ``size_b``, at positions ``at_a`` and ``at_b``, each
    leave at least ceil(share * (|A| + |B|)) shingles from there on."""
    need = np.ceil(share * (size_a + size_b) - 1e-9)
    return bool(size_a - at_a >= need and size_b - at_b >= need)


@_kernel(lambda members, position, size, offsets, first_new, share: _group_work(members, offsets))
def positional_pairs(
    members: np.ndarray,
    position: np.ndarray,
    size: np.ndarray,
    offsets: np.ndarray,
    first_new: int,
    share: float,
) -> np.ndarray:
    """As ``group_pairs``, keeping only the pairs whose members, at ``position`` in sets of
    ``size``, leave at least ceil(share * (|A| + |B|)) shingles each from there on."""
    count = 0
    for g in range(offsets.shape[0] - 1):
        lo, hi = offsets[g], offsets[g + 1]
        for j in range(lo, hi):
            if members[j] >= first_new:
                for i in range(lo, j):
                    if _both_leave(size[i], position[i], size[j], position[j], share):
                        count += 1
    out = np.empty((count, 2), dtype=np.int64)
    k = 0
    for g in range(offsets.shape[0] - 1):
        lo, hi = offsets[g], offsets[g + 1]
        for j in range(lo, hi):
            if members[j] >= first_new:
                for i in range(lo, j):
                    if _both_leave(size[i], position[i], size[j], position[j], share):
                        out[k, 0] = members[i]
                        out[k, 1] = members[j]
                        k += 1
    return out


def _group_work(members: np.ndarray, offsets: np.ndarray) -> int:
    return int(members.shape[0] + (np.diff(offsets) ** 2).sum())


# States of a group in ``link_groups``: not reached yet, linked member by member, or given up
# (too many classes or too much work: its pairs are enumerated instead).
_FRESH, _LINKING, _GIVEN_UP = 0, 1, 2
# What ``link_groups`` returns: done, it needs stored members' rows (in ``need``), or its output
# arrays are full.
LINK_DONE, LINK_NEED, LINK_FULL = 0, 1, 2


@_jit(inline="always")
def _find(parent: np.ndarray, x: np.int64) -> np.int64:
    """The root of ``x`` in the union-find ``parent``, halving the path on the way."""
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x


@_jit(inline="always")
def _similarity(
    a: np.int64,
    b: np.int64,
    set_values: np.ndarray,
    set_offsets: np.ndarray,
    sigs: np.ndarray,
    floor: float,
    exact: bool,
) -> float:
    """What verification says of rows ``a`` and ``b``: the signature agreement without texts;
    with them, the exact Jaccard of the sorted distinct sets where the agreement reaches ``floor``
    (-1 where it does not): ``pair_agreement`` and ``pair_jaccard``, one pair."""
    agree = _agreement(sigs, a, b)
    if not exact:
        return float(agree)
    if agree < floor:
        return -1.0
    return _merged_jaccard(
        set_values, set_offsets[a], set_offsets[a + 1], set_values, set_offsets[b], set_offsets[b + 1]
    )


@_jit(inline="always")
def _merged_classes(
    parent: np.ndarray,
    node: np.ndarray,
    head: np.ndarray,
    tail: np.ndarray,
    next_pos: np.ndarray,
    lo: int,
    n: int,
) -> int:
    """A group's ``n`` classes whose roots met since (through other groups) as one list, the later
    head first: how many classes are left."""
    k = 0
    for i in range(n):
        h = head[lo + i]
        r = _find(parent, node[h])
        merged = False
        for j in range(k):
            if _find(parent, node[head[lo + j]]) == r:
                if h > head[lo + j]:
                    next_pos[tail[lo + i]] = head[lo + j]
                    head[lo + j] = h
                else:
                    next_pos[tail[lo + j]] = h
                    tail[lo + j] = tail[lo + i]
                merged = True
                break
        if not merged:
            head[lo + k] = h
            tail[lo + k] = tail[lo + i]
            k += 1
    return k


@_jit(inline="always")
def _joined(
    parent: np.ndarray,
    node: np.ndarray,
    head: np.ndarray,
    tail: np.ndarray,
    next_pos: np.ndarray,
    lo: int,
    n: int,
    p: int,
    cap: int,
) -> int:
    """Member ``p`` on its class's list as its latest member (its hub from now on), or on a list
    of its own: the group's classes, or -1 past ``cap``."""
    rp = _find(parent, node[p])
    k = 0
    while k < n and _find(parent, node[head[lo + k]]) != rp:
        k += 1
    if k < n:
        next_pos[p] = head[lo + k]
        head[lo + k] = p
        return n
    if n == cap:
        return -1
    head[lo + k] = p
    tail[lo + k] = p
    next_pos[p] = -1
    return n + 1


@_jit(inline="always")
def _stored_classes(
    parent: np.ndarray,
    node: np.ndarray,
    head: np.ndarray,
    tail: np.ndarray,
    next_pos: np.ndarray,
    lo: int,
    p: int,
    cap: int,
) -> int:
    """A group's members before position ``p`` (its stored members) as classes by their roots,
    lists from ``lo`` in ``head``, ``tail`` and ``next_pos``: how many, or -1 past ``cap``."""
    c = 0
    for q in range(lo, p):
        c = _joined(parent, node, head, tail, next_pos, lo, c, q, cap)
        if c < 0:
            return -1
    return c


@_jit(inline="always")
def _unloaded(row: np.ndarray, next_pos: np.ndarray, h: int, need: np.ndarray) -> int:
    """The members after hub ``h`` on its class's list whose rows are not loaded, into ``need``:
    how many."""
    n = 0
    q = next_pos[h]
    while q >= 0:
        if row[q] < 0:
            need[n] = q
            n += 1
        q = next_pos[q]
    return n


_Arrays = tuple[np.ndarray, ...]
"""Arrays ``link_groups`` hands its step in one argument."""


@_jit(inline="always")
def _test_member(
    p: int, g: int, lo: int, node: np.ndarray, row: np.ndarray, rows: _Arrays,
    limits: tuple[float, float, bool], parent: np.ndarray, head: np.ndarray, next_pos: np.ndarray,
    groups: _Arrays, out: _Arrays, need: np.ndarray,
) -> int:  # fmt: skip
    """``link_groups``' step for new member ``p`` of group ``g`` (its arguments in tuples: ``rows``
    the loaded rows, ``limits`` threshold, floor and exact, ``groups`` each group's count, state,
    work and cap, ``out`` what the tests found): tested against each class but its own, the hub
    first, then, where it fails, the class's other members until one passes (all loaded first); a
    class that passes joined to it. LINK_DONE, LINK_NEED or LINK_FULL (``counters`` updated)."""
    set_values, set_offsets, sigs = rows
    threshold, floor, exact = limits
    count, state, work, cap_work = groups
    found, found_sim, tested, counters = out
    n_found, n_tested = counters[0], counters[1]
    nd = node[p]
    rd = row[p]
    i = 0
    while i < count[g]:
        h = head[lo + i]
        r = _find(parent, node[h])
        if r == _find(parent, nd):
            i += 1
            continue
        if row[h] < 0:
            need[0] = h
            counters[0], counters[1], counters[2] = n_found, n_tested, 1
            return LINK_NEED
        if n_tested == tested.shape[0] or n_found == found.shape[0]:
            counters[0], counters[1] = n_found, n_tested
            return LINK_FULL
        sim = _similarity(rd, row[h], set_values, set_offsets, sigs, floor, exact)
        tested[n_tested, 0] = h
        tested[n_tested, 1] = p
        n_tested += 1
        work[g] += 1
        passed = sim >= threshold
        if passed:
            found[n_found, 0] = h
            found[n_found, 1] = p
            found_sim[n_found] = sim
            n_found += 1
        else:
            # The hub failed: the class's other members, until one passes (all loaded first).
            n_need = _unloaded(row, next_pos, h, need)
            if n_need > 0:
                counters[0], counters[1], counters[2] = n_found, n_tested, n_need
                return LINK_NEED
            q = next_pos[h]
            while q >= 0 and not passed:
                if n_tested == tested.shape[0] or n_found == found.shape[0]:
                    counters[0], counters[1] = n_found, n_tested
                    return LINK_FULL
                sim = _similarity(rd, row[q], set_values, set_offsets, sigs, floor, exact)
                tested[n_tested, 0] = q
                tested[n_tested, 1] = p
                n_tested += 1
                work[g] += 1
                if sim >= threshold:
                    found[n_found, 0] = q
                    found[n_found, 1] = p
                    found_sim[n_found] = sim
                    n_found += 1
                    passed = True
                q = next_pos[q]
        if passed:
            a = _find(parent, nd)
            if a < r:
                parent[r] = a
            else:
                parent[a] = r
        if work[g] > cap_work[g]:
            state[g] = _GIVEN_UP
            break
        i += 1
    counters[0], counters[1] = n_found, n_tested
    return LINK_DONE


@_kernel(lambda *args: int(args[6].shape[0]) * 200 + int(args[0].shape[0]))
def link_groups(
    members: np.ndarray,
    offsets: np.ndarray,
    group_of: np.ndarray,
    node: np.ndarray,
    row: np.ndarray,
    is_new: np.ndarray,
    steps: np.ndarray,
    set_values: np.ndarray,
    set_offsets: np.ndarray,
    sigs: np.ndarray,
    threshold: float,
    floor: float,
    exact: bool,
    parent: np.ndarray,
    head: np.ndarray,
    tail: np.ndarray,
    next_pos: np.ndarray,
    count: np.ndarray,
    state: np.ndarray,
    work: np.ndarray,
    cap_classes: int,
    cap_work: np.ndarray,
    found: np.ndarray,
    found_sim: np.ndarray,
    tested: np.ndarray,
    counters: np.ndarray,
    need: np.ndarray,
    cursor: int,
) -> tuple[int, int]:
    """Link the new members of groups (each sorted ascending, stored members first) into the
    union-find ``parent`` over nodes (``node[q]``: member position q's), taking ``steps`` (member
    positions of new members, by member id) from ``cursor`` on. At each step the member is tested,
    in its group, against one member (the latest) of each class of the members before it whose
    root differs from its own; where that fails, against the class's other members there, until
    one passes. Members of one class are never tested against each other, so a group of
    near-copies costs about one test a member. Each group keeps its classes as lists of member
    positions (``head``, ``tail`` at the group's offset, linked by ``next_pos``; ``count`` of
    them), merged as their roots meet. A group of more than ``cap_classes`` classes, or whose
    tests pass ``cap_work[g]``, is given up (``state``) and left to the caller.

    ``row[q]`` is the row of member q's signature (in ``sigs``) and sorted distinct set (in
    ``set_values``/``set_offsets``), -1 while not loaded. Passing tests go to ``found`` (member
    positions) and ``found_sim``, every test to ``tested``; ``counters`` holds their counts and
    how many positions ``need`` names. Returns (LINK_DONE, steps done), (LINK_NEED, the step that
    waits for the rows of the members ``need`` names) or (LINK_FULL, the step to go on from once
    the output arrays are larger). Resuming at the returned cursor repeats no union."""
    counters[2] = 0
    while cursor < steps.shape[0]:
        p = steps[cursor]
        g = group_of[p]
        lo = offsets[g]
        if state[g] == _FRESH:
            c = _stored_classes(parent, node, head, tail, next_pos, lo, p, cap_classes)
            state[g] = _GIVEN_UP if c < 0 else _LINKING
            count[g] = max(c, 0)
        if state[g] == _GIVEN_UP:
            cursor += 1
            continue
        count[g] = _merged_classes(parent, node, head, tail, next_pos, lo, count[g])
        status = _test_member(
            p, g, lo, node, row, (set_values, set_offsets, sigs), (threshold, floor, exact), parent, head,
            next_pos, (count, state, work, cap_work), (found, found_sim, tested, counters), need,
        )  # fmt: skip
        if status != LINK_DONE:
            return status, cursor
        if state[g] == _LINKING:
            c = _joined(parent, node, head, tail, next_pos, lo, count[g], p, cap_classes)
            if c < 0:
                state[g] = _GIVEN_UP
            else:
                count[g] = c
        cursor += 1
    return LINK_DONE, cursor
