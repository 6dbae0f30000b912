"""The bucket rows and the fullest buckets of a collection whose counts are estimated.

Counting a distributed collection's bucket rows, or grouping them by bucket to find the fullest,
reads every row of every shard of the buckets table (the bands of every content), which grows with
the collection however many workers share it. Where the counts are estimated from a sample of the
contents (``storage.statistics.sample_counts``), these two are found through the same sample:

- a content with at least one shingle has one bucket row a band, so the bucket rows are the bands
  times the sampled contents with a shingle, scaled as the sample's other counts are;
- a bucket of ``n`` contents has about ``n`` times the sampled share of the ids among the sample,
  so the fullest buckets are among the keys the sampled contents share most often: the band keys of
  the sampled contents are made again from their stored signatures, the ``CANDIDATES`` keys most
  often shared in the sample (then by band and key) are counted exactly, each a lookup of the
  bucket index on the shard of its key, and the fullest of those are reported. A bucket of ``n``
  contents is missed only if the sample holds none of them or too few against the candidates; on
  a collection whose buckets hold one or two contents each, the order among those ties is the
  sample's, not the table's.
"""

from __future__ import annotations

import numpy as np

from neardup.core.lsh import bucket_rows, most_shared
from neardup.core.minhash import empty_rows
from neardup.core.sketch import Sketcher
from neardup.storage import statistics
from neardup.storage.scope import Scope

# Keys counted exactly: enough that the fullest buckets' exact counts are among them when the
# sample holds a few of each (each is one index lookup on one shard).
CANDIDATES = 256


def sampled_buckets(
    scope: Scope, id_span: int, sketcher: Sketcher, largest: int
) -> tuple[int, list[tuple[int, int, int]]]:
    """(bucket rows, the ``largest`` fullest buckets as (band, bucket, contents)), estimated through
    the sample of the contents of a collection whose ids are below ``id_span``."""
    ids, signatures, scale = statistics.sampled_signatures(scope, id_span, sketcher.params.num_perm)
    bearing = ~empty_rows(signatures) if ids.size else np.zeros(0, dtype=np.bool_)
    ids, signatures = ids[bearing], signatures[bearing]
    if ids.size == 0:
        return 0, []
    keys = sketcher.band_keys(signatures)
    band, bucket, _ = bucket_rows(ids, keys)
    found = statistics.bucket_sizes(scope, *most_shared(band, bucket, CANDIDATES))
    found.sort(key=lambda r: (-r[2], r[0], r[1]))
    return round(ids.size * keys.shape[1] * scale), found[:largest]
