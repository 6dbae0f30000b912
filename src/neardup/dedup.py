"""Deduplicating a file with a collection: keeping each cluster's representative among records that
are stored (``neardup dedup``), or screening new records before they are stored, dropping those
that duplicate a stored document or an earlier record of the same input (``--against-index``)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from neardup.core.stream_dedup import StreamDeduplicator
from neardup.errors import InputError
from neardup.index import CHECK_BATCH_SIZE, Index
from neardup.readers import SourceRecord, checked
from neardup.records import SeenIds


def new_only(
    index: Index, records: Iterable[SourceRecord], batch_size: int = CHECK_BATCH_SIZE
) -> tuple[Iterator[SourceRecord], set[str]]:
    """The records, read lazily, and a set that holds, by the time each record is yielded, its id
    if it duplicates a stored document of ``index`` or an earlier record of the input at the
    collection's threshold; nothing is stored. Ids must be unique in the input (InputError at the
    first repeat). Records are checked ``batch_size`` at a time, as ``Index.check`` checks them."""
    within = StreamDeduplicator(index.params, index.threshold)
    duplicates: set[str] = set()

    def batches() -> Iterator[SourceRecord]:
        iterator = iter(records)
        seen = SeenIds()
        while batch := list(itertools.islice(iterator, batch_size)):
            for r in batch:
                if (earlier := seen.place_of(r.id)) is not None:
                    raise InputError(f"{r.where}: id {r.id!r:.80} repeats {earlier}")
                seen.add(r.id, r.where)
            documents = list(checked(batch))
            stored = index.check(documents)
            earlier_in_input = within.feed([d.text for d in documents])
            for d, hit, before in zip(documents, stored, earlier_in_input.tolist(), strict=True):
                if hit.matches or before >= 0:
                    duplicates.add(d.id)
            yield from batch

    return batches(), duplicates


@dataclass
class Unstored:
    """How many records read so far name no stored document (``representatives_only``)."""

    count: int = 0


def representatives_only(
    index: Index, records: Iterable[SourceRecord], batch_size: int = CHECK_BATCH_SIZE
) -> tuple[Iterator[SourceRecord], set[str], Unstored]:
    """The records, read lazily; the ids to drop (every clustered document but its cluster's
    representative, as the collection's ``keep`` policy chooses it); and the count of records
    whose id names no stored document, which this cannot judge (complete once the records are
    read). Ids are looked up ``batch_size`` at a time."""
    drop = {doc_id for c in index.clusters() for doc_id in c if doc_id != c.representative}
    unstored = Unstored()

    def batches() -> Iterator[SourceRecord]:
        iterator = iter(records)
        while batch := list(itertools.islice(iterator, batch_size)):
            known = index.stored(r.id for r in batch)
            unstored.count += sum(r.id not in known for r in batch)
            yield from batch

    return batches(), drop, unstored
