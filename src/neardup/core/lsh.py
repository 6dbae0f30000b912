"""LSH banding: cut each signature into b bands of r rows and hash each band to a bucket key.

A band's key is fixed and documented: start from h = 0x243F6A8885A308D3, then for each of its r
values v in order h = fmix64(h XOR v) (MurmurHash3's 64-bit finaliser), and read h as a signed
int64 (PostgreSQL ``bigint``). The band number is not mixed in: it is stored beside the key.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from neardup import validate
from neardup.core import _kernels
from neardup.errors import ParamsError


def check_banding(bands: int, rows: int, num_perm: int) -> None:
    """Raise ParamsError unless b bands of r rows fit in num_perm rows."""
    for name, value in (("bands", bands), ("rows", rows)):
        validate.positive_int(value, name)
    if bands * rows > num_perm:
        raise ParamsError(f"bands*rows = {bands}*{rows} = {bands * rows} exceeds num_perm = {num_perm}")


def band_keys(signatures: npt.ArrayLike, bands: int, rows: int) -> npt.NDArray[np.int64]:
    """Bucket keys, shape docs x bands, of the first bands*rows rows of each signature.

    Two documents share key j when their band j agrees in every row, or (probability about
    2**-64 per pair and band) by a hash collision.
    """
    sigs = np.asarray(signatures)
    if sigs.ndim == 1:
        sigs = sigs[np.newaxis, :]
    if sigs.ndim != 2 or sigs.dtype != np.uint32:
        raise ParamsError(f"signatures must be a 2-D uint32 array, got {sigs.ndim}-D {sigs.dtype}")
    check_banding(bands, rows, sigs.shape[1])
    return _kernels.band_keys(np.ascontiguousarray(sigs), int(bands), int(rows))


def bucket_rows(
    content_ids: npt.NDArray[np.int64], keys: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int16], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(band, bucket, content) rows of a contents x bands key matrix, in index order by band and bucket."""
    n, bands = keys.shape
    # Rows in index order touch each btree leaf once, in sequence, instead of at random.
    order = np.argsort(keys, axis=0, kind="stable")  # per band: a sort of n keys, not of n*bands rows
    bucket = np.take_along_axis(keys, order, axis=0).T.reshape(-1)
    content = content_ids[order].T.reshape(-1)
    band = np.repeat(np.arange(bands, dtype=np.int16), n)
    return band, bucket, content


def most_shared(
    band: npt.NDArray[np.int16], bucket: npt.NDArray[np.int64], most: int
) -> tuple[npt.NDArray[np.int16], npt.NDArray[np.int64]]:
    """The ``most`` (band, bucket) pairs that occur most often among the rows, most first, then by
    band and bucket."""
    order = np.lexsort((bucket, band))
    b, k = np.asarray(band)[order], np.asarray(bucket)[order]
    first = np.ones(b.shape[0], dtype=np.bool_)
    first[1:] = (b[1:] != b[:-1]) | (k[1:] != k[:-1])
    starts = np.flatnonzero(first)
    counts = np.diff(np.r_[starts, b.shape[0]])
    pick = np.lexsort((k[starts], b[starts], -counts))[:most]
    return b[starts][pick], k[starts][pick]


def distinct_keys(keys: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int16], npt.NDArray[np.int64]]:
    """Distinct (band, bucket) pairs of a contents x bands key matrix, by band, then bucket.

    One sort of all the bands at once, not a ``np.unique`` per band: each numpy sort releases the
    GIL and must take it back, which on a thread beside the sketching ones (a check, an ingest)
    waited up to the interpreter's switch interval each time, and a call per band made those waits
    most of the checking thread's time."""
    by_band = np.sort(np.asarray(keys, dtype=np.int64).T, axis=1)
    first = np.ones(by_band.shape, dtype=np.bool_)
    first[:, 1:] = by_band[:, 1:] != by_band[:, :-1]
    band = np.nonzero(first)[0].astype(np.int16)
    return band, by_band[first]
