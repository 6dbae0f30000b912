"""Shingling: a normalised text becomes the set of its hashed character or word k-grams.

The hash of a shingle is MurmurHash3_x86_32 with seed 0 over the UTF-32-LE bytes of the shingle
(a word shingle is its k words joined by one space). It is the same on every platform and Python
version; ``mmh3.hash(shingle.encode("utf-32-le"), 0, signed=False)`` reproduces it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import numpy.typing as npt

from neardup import validate
from neardup.core import _kernels
from neardup.core.normalize import DEFAULT_NORMALIZATION, Normalization, encode_batch, is_space_table
from neardup.core.ragged import Ragged, concat
from neardup.errors import ParamsError

ShingleKind = Literal["char", "word"]
SHINGLE_KINDS: tuple[ShingleKind, ...] = ("char", "word")
# Beyond this a char shingle spans most of a sentence and near-copies stop sharing shingles.
MAX_K = 64


def check_shingling(kind: str, k: int) -> None:
    """Raise ParamsError unless kind and k describe a valid shingling."""
    if kind not in SHINGLE_KINDS:
        raise ParamsError(f"shingle kind must be one of {SHINGLE_KINDS}, got {kind!r}")
    validate.whole_in(k, "shingle k", 1, MAX_K)


def shingle_batch(
    texts: Sequence[str],
    kind: ShingleKind = "char",
    k: int = 5,
    normalization: Normalization = DEFAULT_NORMALIZATION,
    *,
    unique: bool = True,
) -> Ragged:
    """Shingle hashes of many texts in one pass; with ``unique`` each document's are sorted and distinct."""
    return shingle_code_points(encode_batch(texts, normalization), kind, k, unique=unique)


def shingle_code_points(
    cps: Ragged, kind: ShingleKind = "char", k: int = 5, *, unique: bool = True
) -> Ragged:
    """Shingle hashes of already normalised code points (as from ``encode_batch``)."""
    check_shingling(kind, k)
    if kind == "char":
        values, offsets = _kernels.char_shingle_hashes(cps.values, cps.offsets, int(k))
    else:
        values, offsets = _kernels.word_shingle_hashes(cps.values, cps.offsets, int(k), is_space_table())
    if unique:
        values, offsets = _kernels.unique_sorted(values, offsets)
    return Ragged(values, offsets)


def distinct_rows(sets: Ragged, rows: npt.NDArray[np.int64]) -> Ragged:
    """The values of documents ``rows`` (in that order), each sorted with repeats dropped."""
    values = np.ascontiguousarray(sets.values, dtype=np.uint32)
    picked = _checked_rows(rows, len(sets))
    return Ragged(*_kernels.unique_sorted_rows(values, sets.offsets, picked))


def distinct_rows_across(parts: Sequence[Ragged], rows: npt.NDArray[np.int64]) -> Ragged:
    """``distinct_rows`` of the documents of ``parts`` taken in turn as one batch, without first
    copying the parts into one: each part gives its own rows, which are then put in asked order."""
    starts = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum([len(part) for part in parts], out=starts[1:])
    picked = _checked_rows(rows, int(starts[-1]))
    part_of = np.searchsorted(starts, picked, "right") - 1
    # Rows grouped by part (stable: in asked order within a part), each part's in one kernel call.
    order = np.argsort(part_of, kind="stable")
    bounds = np.searchsorted(part_of[order], np.arange(len(parts) + 1))
    pieces = [
        distinct_rows(part, picked[order[bounds[j] : bounds[j + 1]]] - starts[j])
        for j, part in enumerate(parts)
        if bounds[j + 1] > bounds[j]
    ]
    grouped = concat(*pieces) if pieces else Ragged(np.empty(0, np.uint32), np.zeros(1, np.int64))
    if np.all(part_of[:-1] <= part_of[1:]):
        return grouped  # asked part by part: already in asked order
    # Back to asked order: picking the (already sorted, distinct) sets again leaves each as it is.
    back = np.empty_like(order)
    back[order] = np.arange(order.size)
    return Ragged(*_kernels.unique_sorted_rows(grouped.values, grouped.offsets, back))


def _checked_rows(rows: npt.ArrayLike, n: int) -> npt.NDArray[np.int64]:
    picked = np.ascontiguousarray(rows, dtype=np.int64)
    if picked.ndim != 1 or (picked.size and (picked.min() < 0 or picked.max() >= n)):
        raise ParamsError(f"rows must be 1-D indices in [0, {n})")
    return picked


def shingles(
    text: str,
    kind: ShingleKind = "char",
    k: int = 5,
    normalization: Normalization = DEFAULT_NORMALIZATION,
) -> npt.NDArray[np.uint32]:
    """Sorted distinct uint32 shingle hashes of one text (empty text: empty array)."""
    return shingle_batch([text], kind, k, normalization)[0]  # type: ignore[return-value]
