"""From raw texts to signatures and bucket keys under one ``Params``, in batches."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from neardup.core.lsh import band_keys
from neardup.core.minhash import MinHasher
from neardup.core.params import HASH_VERSION, Params
from neardup.core.ragged import Ragged
from neardup.core.shingle import shingle_batch
from neardup.errors import ParamsMismatchError


class Sketcher:
    """Turns batches of texts into shingles, signatures and band keys, all under one Params."""

    def __init__(self, params: Params) -> None:
        if params.hash_version != HASH_VERSION:
            raise ParamsMismatchError(
                f"hash_version: the parameters say {params.hash_version}, this neardup computes "
                f"{HASH_VERSION}; signatures would not match: rebuild the index with this version"
            )
        self.params = params
        self.minhasher = MinHasher(params.num_perm, params.seed, params.scheme)

    def shingles(self, texts: Sequence[str], *, unique: bool = True) -> Ragged:
        """Shingle hashes of each text (sorted and distinct when ``unique``)."""
        p = self.params
        return shingle_batch(texts, p.shingle, p.k, p.normalization, unique=unique)

    def signatures(self, texts: Sequence[str]) -> npt.NDArray[np.uint32]:
        """MinHash signatures of the texts, one row each; empty texts get all-EMPTY rows."""
        # Repeated shingles cannot change a minimum, so the sort-and-dedupe step is skipped.
        return self.minhasher.signatures(self.shingles(texts, unique=False))

    def band_keys(self, signatures: npt.NDArray[np.uint32]) -> npt.NDArray[np.int64]:
        """Bucket keys of signatures, shape docs x bands."""
        return band_keys(signatures, self.params.bands, self.params.rows)
