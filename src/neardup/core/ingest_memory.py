"""What an ingest that defers the bucket index holds in memory: its bucket rows and content hashes.

An ingest into an empty collection writes its bucket rows into an unindexed partition and builds
the index once at the end, which costs a fraction of inserting every row into it (see
``ingest.bucket_members``). Meanwhile what it wrote is looked up here instead of in the database: bucket
rows in sorted runs of mixed (band, bucket) keys, the newest runs merged into older ones as they
grow (a lookup is one linear pass over a few runs, adding costs amortised linear time), and the
content id of each content hash.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from neardup.core import _kernels
from neardup.core.candidates import mixed_keys, unmixed_buckets


class IngestMemory:
    """(band, bucket, content) rows in sorted runs (``add`` returns the held rows that share a
    bucket with new ones), and the content id of each content hash written.

    Lookups are by the mixed key of ``core.candidates``: two different (band, bucket) pairs share
    one with probability ~2**-64, which can only return an extra row, never lose one.
    """

    def __init__(self) -> None:
        # Each run: (mixed keys sorted ascending, band, content), all the same length.
        self._runs: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self._contents: dict[bytes, int] = {}

    @property
    def rows(self) -> int:
        """Rows held."""
        return sum(run[0].size for run in self._runs)

    def add(
        self, band: npt.NDArray[np.int16], bucket: npt.NDArray[np.int64], content: npt.NDArray[np.int64]
    ) -> tuple[npt.NDArray[np.int16], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Hold these rows too; returns the rows held before that share a (band, bucket) with one
        of them (as ``storage.buckets.members_of`` reads them from the database)."""
        if band.size == 0:
            return np.empty(0, np.int16), np.empty(0, np.int64), np.empty(0, np.int64)
        keys = mixed_keys(band, bucket)
        order = np.argsort(keys)
        run = (keys[order], band[order], content[order])
        found = self._members(run[0])
        self._runs.append(run)
        # Merge while the newest run is as large as its predecessor (a binary counter): O(log n)
        # runs at any time, and each row is merged O(log n) times.
        while len(self._runs) > 1 and self._runs[-1][0].size >= self._runs[-2][0].size:
            newer = self._runs.pop()
            self._runs.append(_merged(self._runs.pop(), newer))
        return found

    def content_of(self, content_hash: bytes) -> int | None:
        """The content id written for ``content_hash``, or None."""
        return self._contents.get(content_hash)

    def add_contents(self, hashes: Sequence[bytes], content_ids: Sequence[int]) -> None:
        """Remember the ids of contents written."""
        self._contents.update(zip(hashes, content_ids, strict=True))

    def members_of(
        self, band: npt.NDArray[np.int16], bucket: npt.NDArray[np.int64]
    ) -> tuple[npt.NDArray[np.int16], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """(band, bucket, content) of every held row whose (band, bucket) is one of the given
        pairs."""
        return self._members(np.sort(mixed_keys(band, bucket)))

    def _members(
        self, wanted: npt.NDArray[np.int64]
    ) -> tuple[npt.NDArray[np.int16], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Held rows whose mixed key is one of ``wanted`` (sorted; repeats count once)."""
        wanted = wanted[np.r_[True, wanted[1:] != wanted[:-1]]] if wanted.size else wanted
        found: list[tuple[np.ndarray, ...]] = []
        for run in self._runs:
            lo, hi = _kernels.sorted_ranges(run[0], wanted)
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
    """One sorted run of two, in one linear pass (each newer row after the older rows with keys at
    most its own)."""
    keys, band, content = _kernels.merge_runs(*older, *newer)
    return keys, band, content
