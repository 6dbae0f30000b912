"""MinHash signatures: n values per document whose row-wise agreement estimates Jaccard similarity.

Two schemes, both built on the exact permutation x -> (a*x + b) mod p with p = 2**32 - 5:

* ``classic``: n independent permutations, row i keeps the minimum under permutation i.
  P[row i equal] = J exactly; cost n operations per shingle.
* ``oph``: one permutation splits the values into n bins, each keeping its minimum (one-permutation
  hashing); empty bins are filled by optimal densification (Shrivastava 2017). P[row i equal] = J
  as well, with sampling without replacement; cost about one operation per shingle. For documents
  with fewer distinct shingles than n, densified rows are copies, so the estimate is coarser.

The coefficients come from ``numpy.random.PCG64(seed).random_raw``, whose stream numpy keeps
stable across versions: for n rows, raw = random_raw(2n), ``a = 1 + raw[:n] % (p - 1)``,
``b = raw[n:] % p`` (modulo bias below 2**-31); ``oph`` uses n = 1 and takes its densification
probe seed from the third raw value, random_raw(3)[2].
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import numpy.typing as npt

from neardup import validate
from neardup.core import _kernels
from neardup.core.ragged import Ragged
from neardup.errors import ParamsError

Scheme = Literal["oph", "classic"]
SCHEMES: tuple[Scheme, ...] = ("oph", "classic")
DEFAULT_SCHEME: Scheme = "oph"
DEFAULT_SEED = 1
DEFAULT_NUM_PERM = 128

PRIME = int(_kernels.PRIME)
# A signature value that is no minimum at all: what every row of an empty document holds.
EMPTY = int(_kernels.EMPTY)
# The upper bound keeps the 64-bit band and bin arithmetic far from overflow and signatures sane.
MAX_NUM_PERM = 8192
# Seeds are stored in a PostgreSQL bigint.
MAX_SEED = 2**63 - 1


def check_minhash(num_perm: int, seed: int, scheme: str) -> None:
    """Raise ParamsError unless the MinHash settings are valid."""
    validate.whole_in(num_perm, "num_perm", 1, MAX_NUM_PERM)
    validate.whole_in(seed, "seed", 0, MAX_SEED, shown="[0, 2**63 - 1]")
    if scheme not in SCHEMES:
        raise ParamsError(f"scheme must be one of {SCHEMES}, got {scheme!r}")


def _coefficients(seed: int, count: int) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64]]:
    raw = np.random.PCG64(seed).random_raw(2 * count)
    a = np.uint64(1) + raw[:count] % np.uint64(PRIME - 1)
    b = raw[count:] % np.uint64(PRIME)
    return a, b


def _as_hashes(hashes: npt.ArrayLike, where: str) -> npt.NDArray[np.uint32]:
    arr = np.asarray(hashes)
    if arr.dtype == np.uint32:
        return arr.ravel()
    if arr.size == 0:
        return np.empty(0, dtype=np.uint32)
    if arr.dtype.kind not in "ui":
        raise ParamsError(f"{where}: shingle hashes must be integers, got dtype {arr.dtype}")
    if arr.min() < 0 or arr.max() > EMPTY:
        raise ParamsError(f"{where}: shingle hashes must lie in [0, 2**32), got [{arr.min()}, {arr.max()}]")
    return arr.astype(np.uint32).ravel()


class MinHasher:
    """Computes MinHash signatures (uint32, ``num_perm`` values) from shingle hash sets."""

    def __init__(
        self, num_perm: int = DEFAULT_NUM_PERM, seed: int = DEFAULT_SEED, scheme: Scheme = DEFAULT_SCHEME
    ) -> None:
        check_minhash(num_perm, seed, scheme)
        self.num_perm = int(num_perm)
        self.seed = int(seed)
        self.scheme: Scheme = scheme
        if scheme == "classic":
            self._a, self._b = _coefficients(self.seed, self.num_perm)
        else:
            self._a, self._b = _coefficients(self.seed, 1)
            self._probe_seed = np.random.PCG64(self.seed).random_raw(3)[2]

    def __repr__(self) -> str:
        return f"MinHasher(num_perm={self.num_perm}, seed={self.seed}, scheme={self.scheme!r})"

    def signature(self, hashes: npt.ArrayLike) -> npt.NDArray[np.uint32]:
        """Signature of one set of shingle hashes; an empty set gives all-EMPTY rows."""
        return self.signatures([hashes]).reshape(-1)

    def signatures(self, batch: Ragged | Sequence[npt.ArrayLike]) -> npt.NDArray[np.uint32]:
        """Signatures of many hash sets in one call: row i of the result belongs to document i."""
        if not isinstance(batch, Ragged):
            batch = Ragged.from_arrays(
                [_as_hashes(h, f"document {i}") for i, h in enumerate(batch)], np.uint32
            )
        elif batch.values.dtype != np.uint32:
            batch = Ragged(_as_hashes(batch.values, "batch"), batch.offsets)
        if self.scheme == "classic":
            return _kernels.minhash_classic(batch.values, batch.offsets, self._a, self._b)
        return _kernels.minhash_oph(
            batch.values, batch.offsets, self.num_perm, self._a[0], self._b[0], self._probe_seed
        )


def empty_rows(signatures: npt.NDArray[np.uint32]) -> npt.NDArray[np.bool_]:
    """True for each signature of an empty document (all rows EMPTY); such a document matches nothing."""
    sigs = np.atleast_2d(signatures)
    return np.asarray(sigs[:, 0] == EMPTY)
