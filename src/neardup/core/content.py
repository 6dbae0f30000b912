"""Content hashes: exact duplicates (same normalised text) are found by hash, without MinHash."""

from __future__ import annotations

import hashlib

import numpy as np

from neardup.core.ragged import Ragged

# 128 bits: the chance of any collision among 10**12 distinct texts is about 1.5e-15.
CONTENT_HASH_BYTES = 16


# Texts converted to UTF-32 at a time: a few MB, so the conversion stays in cache and a batch's
# hashing never holds a 4-byte copy of all its text (600 MB for 100,000 texts of 1.5 KB).
_CHUNK_CODE_POINTS = 1 << 20


def content_hashes(code_points: Ragged) -> list[bytes]:
    """BLAKE2b-128 of each normalised text's code points as UTF-32-LE (the same for any batch)."""
    values, offsets = np.asarray(code_points.values), np.asarray(code_points.offsets, dtype=np.int64)
    digests: list[bytes] = []
    first = 0
    while first < offsets.size - 1:
        # The texts [first, last) hold at most _CHUNK_CODE_POINTS code points, or are one text.
        last = int(np.searchsorted(offsets, offsets[first] + _CHUNK_CODE_POINTS, "right")) - 1
        last = max(last, first + 1)
        base = int(offsets[first])
        utf32 = np.ascontiguousarray(values[base : offsets[last]], dtype="<u4")
        chunk = memoryview(utf32.view(np.uint8).data)
        bounds = ((offsets[first : last + 1] - base) * 4).tolist()
        digests.extend(
            hashlib.blake2b(chunk[bounds[i] : bounds[i + 1]], digest_size=CONTENT_HASH_BYTES).digest()
            for i in range(len(bounds) - 1)
        )
        first = last
    return digests
