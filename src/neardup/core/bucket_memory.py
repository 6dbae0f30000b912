"""Bucket rows held in memory while an ingest defers the bucket index: who shares a bucket with a batch.

An ingest into an empty collection writes its bucket rows into an unindexed partition and builds
the index once at the end, which costs a fraction of inserting every row into it (see
``ingest.writer``). Meanwhile the rows it wrote are looked up here instead of in the database: sorted
runs of mixed (band, bucket) keys, the newest runs merged into older ones as they grow, so a lookup
costs a binary search in a few runs and adding costs amortised linear time.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from neardup.core.candidates import mixed_keys, unmixed_buckets

# Bytes a row costs here: its mixed key (8, from which the bucket follows), content id (8), band (2).
ROW_BYTES = 18


class BucketMemory:
    """(band, bucket, content) rows in sorted runs; ``members_of`` finds the rows in given buckets.

    Lookups are by the mixed key of ``core.candidates``: two different (band, bucket) pairs share
    one with probability ~2**-64, which can only return an extra row, never lose one.
    """

    def __init__(self) -> None:
        # Each run: (mixed keys sorted ascending, band, content), all the same length.
        self._runs: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    @property
    def rows(self) -> int:
        """Rows held."""
        return sum(run[0].size for run in self._runs)

    def add(
        self, band: npt.NDArray[np.int16], bucket: npt.NDArray[np.int64], content: npt.NDArray[np.int64]
    ) -> None:
        """Hold these rows too."""
        if band.size == 0:
            return
        keys = mixed_keys(band, bucket)
        order = np.argsort(keys, kind="stable")
        self._runs.append((keys[order], band[order], content[order]))
        # Merge while the newest run is as large as its predecessor (a binary counter): O(log n)
        # runs at any time, and each row is merged O(log n) times.
        while len(self._runs) > 1 and self._runs[-1][0].size >= self._runs[-2][0].size:
            newer = self._runs.pop()
            self._runs.append(_merged(self._runs.pop(), newer))

    def members_of(
        self, band: npt.NDArray[np.int16], bucket: npt.NDArray[np.int64]
    ) -> tuple[npt.NDArray[np.int16], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """(band, bucket, content) of every held row whose (band, bucket) is one of the given
        distinct pairs (as ``storage.buckets.members_of`` reads them from the database)."""
        wanted = np.sort(mixed_keys(band, bucket))
        found: list[tuple[np.ndarray, ...]] = []
        for run in self._runs:
            keys = run[0]
            lo = np.searchsorted(keys, wanted, "left")
            hi = np.searchsorted(keys, wanted, "right")
            counts = hi - lo
            if not counts.any():
                continue
            starts = np.repeat(lo - np.r_[0, np.cumsum(counts)[:-1]], counts)
            at = starts + np.arange(int(counts.sum()))
            found.append(tuple(column[at] for column in run))
        if not found:
            return np.empty(0, np.int16), np.empty(0, np.int64), np.empty(0, np.int64)
        keys_out, band_out, content_out = (np.concatenate(parts) for parts in zip(*found, strict=True))
        return band_out, unmixed_buckets(band_out, keys_out), content_out


def _merged(
    older: tuple[np.ndarray, np.ndarray, np.ndarray], newer: tuple[np.ndarray, np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One sorted run of two, in linear time: each newer row goes after the older rows with keys
    at most its own."""
    at = np.searchsorted(older[0], newer[0], "right") + np.arange(newer[0].size)
    older_slots = np.ones(older[0].size + newer[0].size, dtype=bool)
    older_slots[at] = False
    columns = []
    for old, new in zip(older, newer, strict=True):
        column = np.empty(older_slots.size, dtype=old.dtype)
        column[at] = new
        column[older_slots] = old
        columns.append(column)
    return columns[0], columns[1], columns[2]
