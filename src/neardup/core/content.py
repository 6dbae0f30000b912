"""Content hashes: exact duplicates (same normalised text) are found by hash, without MinHash."""

from __future__ import annotations

import hashlib

import numpy as np

from neardup.core.ragged import Ragged

# 128 bits: the chance of any collision among 10**12 distinct texts is about 1.5e-15.
CONTENT_HASH_BYTES = 16


def content_hashes(code_points: Ragged) -> list[bytes]:
    """BLAKE2b-128 of each normalised text's code points as UTF-32-LE (the same for any batch)."""
    data = np.ascontiguousarray(code_points.values, dtype="<u4").tobytes()
    offsets = (code_points.offsets * 4).tolist()
    view = memoryview(data)
    return [
        hashlib.blake2b(view[offsets[i] : offsets[i + 1]], digest_size=CONTENT_HASH_BYTES).digest()
        for i in range(len(offsets) - 1)
    ]
