"""Looking texts up in a collection: their bucket neighbours, verified like an ingest's candidates.

``similar`` answers one text; ``check`` answers a batch of documents at once (one bucket probe,
one read of signatures and texts), storing nothing.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from typing import NamedTuple

import numpy as np

from neardup.config import IndexConfig
from neardup.core.candidates import bucket_matches
from neardup.core.lsh import distinct_keys
from neardup.core.minhash import empty_rows
from neardup.core.ragged import Ragged
from neardup.core.sketch import Sketch, Sketcher
from neardup.core.verify import (
    agreement_with,
    exact_jaccard_unsorted,
    prefilter_floor,
    signature_agreement,
)
from neardup.errors import InputError, ParamsError
from neardup.records import Document
from neardup.storage import buckets, contents, documents
from neardup.storage.connect import transaction
from neardup.storage.scope import Scope, export_snapshot, read_snapshot


def similar(
    scope: Scope,
    config: IndexConfig,
    sketcher: Sketcher,
    text: str,
    min_jaccard: float | None = None,
    limit: int | None = None,
) -> list[tuple[str, float]]:
    """Stored documents similar to ``text``, best first: (id, similarity). See ``Index.query``."""
    if not isinstance(text, str):
        raise InputError(f"query text must be a string, got {type(text).__name__}")
    floor = config.threshold if min_jaccard is None else fraction(min_jaccard, "min_jaccard")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ParamsError(f"limit must be a non-negative integer, got {limit!r}")
    # One text: its signature alone (no content hash), its candidates' agreement in plain numpy,
    # and one shingling call for it and its hopeful candidates. Small calls are most of a query's
    # time in Python; a hand A/B on the Debian collection took 0.86x the time a query with these.
    signature = sketcher.signatures([text])
    if empty_rows(signature)[0]:
        return []
    found, signatures = buckets.lookup(
        scope, sketcher.band_keys(signature)[0], config.store_text, config.params.num_perm
    )
    if not found:
        return []
    sim = agreement_with(signature[0], signatures)
    if config.store_text:
        hopeful = np.flatnonzero(
            sim >= (prefilter_floor(floor, config.params.num_perm) if floor > 0 else 0.0)
        )
        sim = np.zeros(len(found))
        if hopeful.size:
            # The query's shingles first, then each hopeful candidate's: one shingling call for all,
            # each list used once, so compared as shingled, not sorted first.
            sets = sketcher.shingles([text, *(found[i][1] for i in hopeful)], unique=False)
            query_set, candidate_sets = np.zeros(hopeful.size, np.int64), np.arange(1, hopeful.size + 1)
            sim[hopeful] = exact_jaccard_unsorted(sets, sets, query_set, candidate_sets)
    results = [(doc_id, float(sim[i])) for i in np.flatnonzero(sim >= floor) for doc_id in found[i][2]]
    results.sort(key=lambda r: (-r[1], r[0]))
    return results[:limit] if limit is not None else results


def fraction(value: object, name: str) -> float:
    """``value`` as a float in [0, 1], else ParamsError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= float(value) <= 1.0:
        raise ParamsError(f"{name} must be in [0, 1], got {value!r}")
    return float(value)


# Threads that sketch a batch ahead (the kernels release the GIL; as ingest.writer's).
SKETCH_THREADS = 2
# Up to this many documents, check asks for each as query does (one statement each, which also
# reads the stored signatures, texts and ids); a larger batch is one probe for all its keys and
# one read of each kind, which costs a few round trips more but far fewer per document.
_ONE_BY_ONE = 8


# From this many distinct keys on, a batch's bucket probe is split in two key ranges, one read on a
# second connection in the same snapshot: the probe is one server process's index descents (most of
# a check of new texts, py-spy of bench_profile), and the other core is idle meanwhile. Below it,
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


# From this many candidate contents on, a batch's stored texts are read and shingled on the second
# connection (in the batch's snapshot) while this one reads their signatures: all of them, since
# which are hopeful is not known yet.
READ_AHEAD = 1_000


@contextmanager
def _shingles_ahead(
    scope: Scope, helper: Callable[[], Scope], sketcher: Sketcher, content_ids: np.ndarray
) -> Iterator[Future[Ragged]]:
    """The shingles (as shingled) of the stored text of each content, in ``content_ids``' order,
    read on ``helper()``'s connection in the snapshot of the caller's open transaction; the block
    ends only when that read has, so the second connection is free again whatever happened."""
    snapshot = export_snapshot(scope.conn)
    second = helper()

    def shingled() -> Ragged:
        with transaction(second.conn):
            read_snapshot(second.conn, snapshot=snapshot)
            texts = documents.texts(second, content_ids.tolist())
        return sketcher.shingles([texts[i] for i in content_ids.tolist()], unique=False)

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="neardup-texts") as pool:
        yield pool.submit(shingled)


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
    floor = config.threshold if min_jaccard is None else fraction(min_jaccard, "min_jaccard")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ParamsError(f"limit must be a non-negative integer, got {limit!r}")
    if len(batch) <= _ONE_BY_ONE:
        return [CheckResult(d.id, similar(scope, config, sketcher, d.text, floor, limit)) for d in batch]
    if sketch is None:
        sketch = sketcher.sketch([d.text for d in batch], hashed=False)
    bearing = np.flatnonzero(sketch.shingle_counts > 0)
    keys = sketcher.band_keys(sketch.signatures[bearing])
    found: dict[int, list[tuple[str, float]]] = {}
    with transaction(scope.conn):
        read_snapshot(scope.conn, read_only=False)
        stored = _members(scope, helper, *distinct_keys(keys)) if bearing.size else ()
        row, content = bucket_matches(keys, *stored) if bearing.size else (np.empty(0, np.int64),) * 2
        ids = np.unique(content)
        read_ahead = config.store_text and not scope.distributed and ids.size >= READ_AHEAD
        with (
            _shingles_ahead(scope, helper, sketcher, ids) if read_ahead and helper else nullcontext()
        ) as ahead:
            stored_ids, stored_sigs = contents.signatures(scope, ids.tolist(), config.params.num_perm)
            local = np.searchsorted(stored_ids, content)
            sigs = np.concatenate([sketch.signatures[bearing], stored_sigs])
            sim = signature_agreement(sigs, row, bearing.size + local)
            if config.store_text:
                least = prefilter_floor(floor, config.params.num_perm) if floor > 0 else 0.0
                hopeful = np.flatnonzero(sim >= least)
                # The shingles of the stored texts and of the inputs (as the sketch keeps them) are
                # compared as shingled, a hash table a pair: most are in one pair, and sorting them
                # first was most of a check's work where every input has a near-copy. Hand A/B,
                # 50,000 edited copies against bench_profile's 1M collection, two runs each: this
                # process's CPU 0.68x (4.3-4.6 against 6.2-6.6 s); wall 0.96x, the server's reads
                # now most of it, which the read-ahead overlaps (five more alternated pairs: 0.89x).
                if ahead is not None:
                    needed, stored_sets = ids, ahead.result()
                else:
                    needed = np.unique(content[hopeful])
                    texts = documents.texts(scope, needed.tolist())
                    stored_sets = sketcher.shingles([texts[i] for i in needed.tolist()], unique=False)
                sim = np.zeros(content.size)
                sim[hopeful] = exact_jaccard_unsorted(
                    sketch.shingles,
                    stored_sets,
                    bearing[row[hopeful]],
                    np.searchsorted(needed, content[hopeful]),
                )
        ok = np.flatnonzero(sim >= floor)
        names = documents.external_ids(scope, np.unique(content[ok]).tolist())
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
