"""Near-duplicates within a stream of texts: for each text, an earlier one it duplicates, if any.

Texts arrive in batches. Each batch is sketched, its band keys are matched against the keys of
every earlier text (sorted arrays per batch, in memory) and against each other, and the candidates
are verified by the exact Jaccard of their shingle sets, as the index verifies. The texts seen are
kept (as their shingles, unsorted, about 4 bytes a character), so memory grows with the stream:
this is for one input file, not an archive. Most texts are in no pair, so their shingles are never
sorted: a pair's are compared as shingled (``exact_jaccard_unsorted``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from neardup.core.candidates import bucket_matches
from neardup.core.distinct import distinct
from neardup.core.params import Params
from neardup.core.ragged import Ragged
from neardup.core.sketch import Sketcher
from neardup.core.tuning import check_threshold
from neardup.core.verify import exact_jaccard_unsorted


class StreamDeduplicator:
    """Remembers the texts it was fed and tells, for each new one, which earlier one it
    duplicates at ``threshold`` or more (exact Jaccard); candidates come from LSH, so a pair is
    missed with the probability the S-curve gives at its similarity."""

    def __init__(self, params: Params, threshold: float) -> None:
        self._sketcher = Sketcher(params)
        self._threshold = check_threshold(threshold)
        self._bands: list[npt.NDArray[np.int16]] = []
        self._buckets: list[npt.NDArray[np.int64]] = []
        self._owners: list[npt.NDArray[np.int64]] = []
        self._sets: list[npt.NDArray[np.uint32]] = []
        self._seen = 0

    def feed(self, texts: Sequence[str]) -> npt.NDArray[np.int64]:
        """For each text, the position (in everything fed so far) of the earliest text before it
        that it duplicates, else -1. Empty texts duplicate nothing."""
        sketch = self._sketcher.sketch(texts, hashed=False)
        n, first = len(texts), self._seen
        bearing = np.flatnonzero(sketch.shingle_counts > 0)
        keys = self._sketcher.band_keys(sketch.signatures[bearing])
        band = np.tile(np.arange(keys.shape[1], dtype=np.int16), bearing.size)
        owners = np.repeat(first + bearing, keys.shape[1])
        # Earlier texts and this batch's own, in one match; a text never matches itself or a later one.
        row, other = bucket_matches(
            keys,
            np.concatenate([*self._bands, band]),
            np.concatenate([*self._buckets, keys.reshape(-1)]),
            np.concatenate([*self._owners, owners]),
        )
        mine = first + bearing[row]
        earlier = other < mine
        mine, other = mine[earlier], other[earlier]
        self._sets.extend(np.asarray(s, np.uint32) for part in sketch.shingles for s in part)
        self._bands.append(band)
        self._buckets.append(keys.reshape(-1))
        self._owners.append(owners)
        self._seen += n
        found = np.full(n, -1, dtype=np.int64)
        if mine.size:
            ok = self._jaccard(mine, other) >= self._threshold
            mine, other = mine[ok], other[ok]
        if mine.size:
            order = np.lexsort((other, mine))  # per text, its earliest duplicate first
            mine, other = mine[order], other[order]
            firsts = np.r_[True, mine[1:] != mine[:-1]]
            found[mine[firsts] - first] = other[firsts]
        return found

    def _jaccard(self, left: npt.NDArray[np.int64], right: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        ids = distinct(np.concatenate([left, right]))
        sets = Ragged.from_arrays([self._sets[i] for i in ids.tolist()], np.uint32)
        return exact_jaccard_unsorted(sets, sets, np.searchsorted(ids, left), np.searchsorted(ids, right))
