"""Looking texts up in a collection: their bucket neighbours, verified like an ingest's candidates.

``similar`` answers one text; ``check`` answers a batch of documents at once (one bucket probe,
one read of signatures and texts), storing nothing.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numpy as np

from neardup import validate
from neardup.config import IndexConfig
from neardup.core.candidates import bucket_matches
from neardup.core.distinct import distinct
from neardup.core.lsh import distinct_keys
from neardup.core.minhash import empty_rows
from neardup.core.sketch import SKETCH_THREADS, Sketch, Sketcher
from neardup.records import Document
from neardup.storage import buckets, contents, documents
from neardup.storage.connect import transaction
from neardup.storage.scope import Scope, export_snapshot, read_snapshot
from neardup.verification import verify_matches, verify_query


def similar(
    scope: Scope,
    config: IndexConfig,
    sketcher: Sketcher,
    text: str,
    min_jaccard: float | None = None,
    limit: int | None = None,
) -> list[tuple[str, float]]:
    """Stored documents similar to ``text``, best first: (id, similarity). See ``Index.query``."""
    text = validate.text(text)
    floor = config.threshold if min_jaccard is None else validate.fraction(min_jaccard, "min_jaccard")
    limit = validate.limit(limit)
    # One text: its signature alone (no content hash), its candidates' agreement in plain numpy,
    # and one shingling call for it and its hopeful candidates (``verification.verify_query``).
    signature = sketcher.signatures([text])
    if empty_rows(signature)[0]:
        return []
    found, signatures = buckets.lookup(
        scope,
        sketcher.band_keys(signature)[0],
        config.store_text,
        config.params.num_perm,
        _most(limit),
        config.params.dense_cluster_size,
    )
    if not found:
        return []
    sim = verify_query(config, sketcher, text, signature[0], signatures, [f[1] for f in found], floor)
    results = [(doc_id, float(sim[i])) for i in np.flatnonzero(sim >= floor) for doc_id in found[i][2]]
    results.sort(key=lambda r: (-r[1], r[0]))
    return results[:limit] if limit is not None else results


# With a limit, a text is verified against at most this many candidates of one dense cluster per
# answer asked (and at least QUERY_CANDIDATES): a text of a dense cluster shares its buckets with
# thousands of its near-copies, any of which answers. Every candidate outside dense clusters is
# verified, so that the answers there are the true best.
CANDIDATES_PER_ANSWER = 10
QUERY_CANDIDATES = 200


def _most(limit: int | None) -> int | None:
    """The candidates of one dense cluster a lookup with ``limit`` reads at most (None: every one)."""
    return None if limit is None else max(QUERY_CANDIDATES, CANDIDATES_PER_ANSWER * limit)


# Up to this many documents, check asks for each as query does (one statement each, which also
# reads the stored signatures, texts and ids); a larger batch is one probe for all its keys and
# one read of each kind, which costs a few round trips more but far fewer per document.
_ONE_BY_ONE = 8


# From this many distinct keys on, a batch's bucket probe is split in two key ranges, one read on a
# second connection in the same snapshot: the probe is one server process's index descents (most of
# a check of new texts), and the other core is idle meanwhile. Below it,
# the two statements' round trips and the snapshot's export cost more than they save.
SPLIT_PROBE_KEYS = 20_000


def _members(
    scope: Scope, helper: Callable[[], Scope] | None, band: np.ndarray, bucket: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``buckets.members_of`` of the keys, in the caller's open repeatable-read transaction; the
    upper half of the key range read on ``helper()``'s connection (in that snapshot) at the same
    time. A distributed collection's probe is spread over its workers already."""
    if helper is None or scope.distributed or bucket.size < SPLIT_PROBE_KEYS:
        return buckets.members_of(scope, band, bucket)
    second = helper()
    # Bucket keys are 64-bit hashes spread evenly over the signed range (fmix64), so the negative
    # ones are about half of any batch's: a split with no sort (members_of sorts each half).
    upper_half = bucket >= 0
    snapshot = export_snapshot(scope.conn)

    def upper() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        with transaction(second.conn):
            read_snapshot(second.conn, read_only=False, snapshot=snapshot)
            return buckets.members_of(second, band[upper_half], bucket[upper_half])

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="neardup-probe") as pool:
        theirs = pool.submit(upper)
        mine = buckets.members_of(scope, band[~upper_half], bucket[~upper_half])
        rest = theirs.result()
    return (
        np.concatenate([mine[0], rest[0]]),
        np.concatenate([mine[1], rest[1]]),
        np.concatenate([mine[2], rest[2]]),
    )


def _matches(
    scope: Scope,
    config: IndexConfig,
    keys: np.ndarray,
    band: np.ndarray,
    bucket: np.ndarray,
    member: np.ndarray,
    most: int | None,
) -> tuple[np.ndarray, np.ndarray]:
    """``bucket_matches`` of the probed rows: every stored content outside dense clusters, and
    with ``most``, at most that many of a dense cluster's in each bucket a row shares."""
    if most is None or member.size == 0:
        return bucket_matches(keys, band, bucket, member)
    ids = distinct(member)
    labels = contents.label_array(scope, ids)
    clusters = distinct(labels)
    sizes = contents.cluster_sizes(scope, clusters)
    dense = np.isin(member, ids[sizes[np.searchsorted(clusters, labels)] >= config.params.dense_cluster_size])
    if not dense.any():
        return bucket_matches(keys, band, bucket, member)
    row = np.empty(0, np.int64)
    content = np.empty(0, np.int64)
    for part, cap in ((~dense, None), (dense, most)):
        r, c = bucket_matches(keys, band[part], bucket[part], member[part], most=cap)
        row, content = np.r_[row, r], np.r_[content, c]
    order = np.lexsort((content, row))
    return row[order], content[order]


class CheckResult(NamedTuple):
    """An input document's id and its stored near-duplicates, (id, similarity) best first."""

    id: str
    matches: list[tuple[str, float]]


def check(
    scope: Scope,
    config: IndexConfig,
    sketcher: Sketcher,
    batch: Sequence[Document],
    min_jaccard: float | None = None,
    limit: int | None = None,
    sketch: Sketch | None = None,
    helper: Callable[[], Scope] | None = None,
) -> list[CheckResult]:
    """Each document's stored near-duplicates, in input order; nothing is stored. Similarity and
    recall as for ``similar`` (only documents sharing a bucket are seen). A batch of more than a few
    documents is read in one snapshot (``sketch``, if given, is the batch's, made beforehand); a
    small one document by document, each in its own. ``helper`` gives the collection's scope on a
    second connection, which takes half of a large batch's bucket probe."""
    floor = config.threshold if min_jaccard is None else validate.fraction(min_jaccard, "min_jaccard")
    limit = validate.limit(limit)
    if len(batch) <= _ONE_BY_ONE:
        return [CheckResult(d.id, similar(scope, config, sketcher, d.text, floor, limit)) for d in batch]
    if sketch is None:
        sketch = sketcher.sketch([d.text for d in batch], hashed=False)
    bearing = np.flatnonzero(sketch.shingle_counts > 0)
    keys = sketcher.band_keys(sketch.signatures[bearing])
    found: dict[int, list[tuple[str, float]]] = {}
    with transaction(scope.conn):
        read_snapshot(scope.conn, read_only=False)
        row, content = np.empty(0, np.int64), np.empty(0, np.int64)
        if bearing.size:
            band, bucket, member = _members(scope, helper, *distinct_keys(keys))
            row, content = _matches(scope, config, keys, band, bucket, member, _most(limit))
        sim = verify_matches(scope, config, sketcher, sketch, bearing[row], content, floor, helper)
        ok = np.flatnonzero(sim >= floor)
        names = documents.external_ids(scope, distinct(content[ok]).tolist())
    for i in ok.tolist():
        position = int(bearing[row[i]])
        found.setdefault(position, []).extend((name, float(sim[i])) for name in names[int(content[i])])
    results = []
    for position, document in enumerate(batch):
        matches = sorted(found.get(position, []), key=lambda m: (-m[1], m[0]))
        results.append(CheckResult(document.id, matches[:limit] if limit is not None else matches))
    return results


def check_all(
    scope: Scope,
    config: IndexConfig,
    sketcher: Sketcher,
    incoming: Iterator[Document],
    min_jaccard: float | None,
    limit: int | None,
    batch_size: int,
    helper: Callable[[], Scope] | None = None,
) -> Iterator[CheckResult]:
    """``check`` of each ``batch_size`` documents of ``incoming`` in turn, the next batch read and
    sketched on a worker thread while the database answers for this one."""

    def prepare() -> tuple[list[Document], Sketch | None]:
        batch = list(itertools.islice(incoming, batch_size))
        if len(batch) <= _ONE_BY_ONE:
            return batch, None
        return batch, sketcher.sketch([d.text for d in batch], threads=SKETCH_THREADS, hashed=False)

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="neardup-check") as pool:
        upcoming = pool.submit(prepare)
        while (ready := upcoming.result())[0]:
            batch, sketch = ready
            upcoming = pool.submit(prepare)
            yield from check(scope, config, sketcher, batch, min_jaccard, limit, sketch, helper)


__all__ = ["CheckResult", "check", "check_all", "similar"]
