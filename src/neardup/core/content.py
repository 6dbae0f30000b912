"""Content hashes: exact duplicates (same normalised text) are found by hash, without MinHash.

A content hash is BLAKE2b-128 of the normalised text's bytes. Which bytes is the hash's version,
stored with a collection (``Params.content_hash``) and never changed for it, so that a text added
again years later still hashes to what is stored:

1. UTF-32-LE, four bytes a code point (collections made before version 2).
2. UTF-8, surrogate code points as three bytes each as Python's ``"surrogatepass"`` writes them:
   a quarter of the bytes to hash for ASCII text, which a pure-ASCII batch already holds one byte
   a code point. Hashing four bytes a code point was a large share of sketching, and a hash's
   cost follows the bytes it reads, so version 2 hashes the encoding that is smallest for the
   text most collections hold.
"""

from __future__ import annotations

import numpy as np

from neardup.core import _kernels
from neardup.core.ragged import Ragged
from neardup.errors import ParamsError

# The version a new collection gets.
CONTENT_HASH_VERSION = 2
CONTENT_HASH_VERSIONS = (1, 2)
# 128 bits: the chance of any collision among 10**12 distinct texts is about 1.5e-15.
CONTENT_HASH_BYTES = 16


# Code points converted to UTF-32 at a time: few enough that the conversion stays in cache, and a
# batch's hashing never holds a four-byte copy of all its text, which for a large batch of long
# texts would be several times the batch itself.
_CHUNK_CODE_POINTS = 1 << 20


def content_hashes(code_points: Ragged, version: int = CONTENT_HASH_VERSION) -> list[bytes]:
    """BLAKE2b-128 of each normalised text's bytes under hash ``version`` (the same for any batch)."""
    if version == 2:
        return _utf8_hashes(code_points)
    if version != 1:
        raise ParamsError(f"content_hash must be one of {CONTENT_HASH_VERSIONS}, got {version!r}")
    values, offsets = np.asarray(code_points.values), np.asarray(code_points.offsets, dtype=np.int64)
    digests: list[bytes] = []
    first = 0
    while first < offsets.size - 1:
        # The texts [first, last) hold at most _CHUNK_CODE_POINTS code points, or are one text.
        last = int(np.searchsorted(offsets, offsets[first] + _CHUNK_CODE_POINTS, "right")) - 1
        last = max(last, first + 1)
        base = int(offsets[first])
        utf32 = np.ascontiguousarray(values[base : offsets[last]], dtype="<u4")
        digests.extend(_digests(utf32.view(np.uint8), (offsets[first : last + 1] - base) * 4))
        first = last
    return digests


def _utf8_hashes(code_points: Ragged) -> list[bytes]:
    """Version 2: BLAKE2b-128 of each text as UTF-8; a pure-ASCII batch is hashed in place."""
    values, offsets = np.asarray(code_points.values), np.asarray(code_points.offsets, dtype=np.int64)
    if values.dtype == np.uint8 and (values.size == 0 or int(values.max()) < 0x80):
        data, bounds = np.ascontiguousarray(values), offsets
    else:
        data, bounds = _kernels.utf8_encode(values, offsets)
    return _digests(data, bounds)


def _digests(data: np.ndarray, bounds: np.ndarray) -> list[bytes]:
    """BLAKE2b-128 of each byte range ``data[bounds[i]:bounds[i + 1]]`` (uint8, contiguous)."""
    import hashlib  # here: importing it loads OpenSSL, which a query that hashes nothing never needs

    chunk, b = memoryview(data.data), bounds.tolist()
    return [
        hashlib.blake2b(chunk[b[i] : b[i + 1]], digest_size=CONTENT_HASH_BYTES).digest()
        for i in range(len(b) - 1)
    ]
