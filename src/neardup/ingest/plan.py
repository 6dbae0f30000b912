"""A batch's plan: what writing it changes, decided in memory before anything is written.

``plan_batch`` is pure: from the batch's documents, their sketch, what is stored under their ids
and content hashes (one read), and the collection's id counters, it decides which documents are
unchanged, replaced or new, which contents are new and their ids, the documents' ids, the band keys
of the new contents, and whether the bucket rows go in as a bulk load.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from neardup.core.sketch import Sketch
from neardup.records import Document

# Stored bucket rows a batch groups at a time, at least; a batch of more rows of its own groups as
# many stored rows as its own at a time (``ingest.bucket_members``). Short records of one
# template fill the same buckets by the hundred thousand: a batch's buckets hold far more stored
# rows than its own, and all of them read at once and grouped made its memory follow what is
# stored.
CHUNK_ROWS = 1 << 18


@dataclass(frozen=True)
class Batch:
    """Documents written in one transaction, with the position of the first in the whole input."""

    start: int
    ids: list[str]
    texts: list[str]
    metas: list[dict[str, Any] | None]
    numbers: list[int] | None = None
    """The document id each document is written with, taken for it ahead in input order by the
    process that split the input among writers (``ingest.parallel``); None: the collection's
    counter numbers them in the batch's turn."""

    @classmethod
    def of(cls, documents: Sequence[Document], start: int, numbers: list[int] | None = None) -> Batch:
        """The batch of these (checked) documents (numbered ``numbers``, if given)."""
        return cls(
            start,
            [d.id for d in documents],
            [d.text for d in documents],
            [d.meta for d in documents],
            numbers,
        )

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def where(self) -> str:
        """The batch's records, for messages: ``records 100-199``."""
        return f"records {self.start}-{self.start + len(self.ids) - 1}"


class Stored(Protocol):
    """What is stored for one incoming document (``storage.documents.Match``)."""

    @property
    def position(self) -> int: ...
    @property
    def doc_id(self) -> int | None: ...
    @property
    def content_id(self) -> int | None: ...
    @property
    def existing_content(self) -> int | None: ...
    @property
    def text(self) -> str | None: ...
    @property
    def meta(self) -> Any: ...


@dataclass(frozen=True)
class BatchPlan:
    """What writing a batch does; positions index the batch's documents."""

    unchanged: int
    """Documents stored already with the same text and metadata: nothing is written for them."""
    replaced_docs: list[int]
    """Stored document ids the batch replaces (same external id, other text or metadata)."""
    doc_positions: npt.NDArray[np.int64]
    """Positions of the documents written, in batch order."""
    doc_ids: npt.NDArray[np.int64]
    """Their new document ids."""
    doc_contents: npt.NDArray[np.int64]
    """Their content ids (stored ones, or new ones below)."""
    new_positions: npt.NDArray[np.int64]
    """The first position of each new content (distinct normalised text not stored before)."""
    new_ids: npt.NDArray[np.int64]
    """Their content ids: consecutive from ``first_new`` as planned and ``rebased``; a subset of
    such a range after ``with_new_ids``."""
    first_new: int
    """No new content id is below it. A stored content id at or above it was taken by another writer
    after this batch took its own (``catalog.reserve`` before the batch's turn), never one of them."""
    bearing_ids: npt.NDArray[np.int64]
    """The new contents with at least one shingle (empty texts are never anyone's duplicate)."""
    keys: npt.NDArray[np.int64]
    """Their band keys, bearing contents x bands."""
    bulk: bool
    """Whether the bucket rows go into an unindexed partition whose index is built afterwards."""
    empty: int
    """Documents written whose text has no shingle."""
    next_doc_id: int
    """The collection's next document id once the batch is written."""

    def slots(self, content_ids: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """The index in ``new_ids`` (and ``new_positions``) of each content id, -1 where it is not
        one of the batch's new contents."""
        ids = np.asarray(content_ids, dtype=np.int64)
        if self.new_ids.size == 0:
            return np.full(ids.shape, -1, dtype=np.int64)
        order = np.argsort(self.new_ids, kind="stable")
        at = order[np.minimum(np.searchsorted(self.new_ids, ids, sorter=order), order.size - 1)]
        return np.where(self.new_ids[at] == ids, at, -1)

    def is_new(self, content_ids: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        """Whether each content id is one of the batch's new contents."""
        return self.slots(content_ids) >= 0

    def new_hashes(self, sketch: Sketch) -> list[bytes]:
        """The content hashes of the new contents, in ``new_ids``' order."""
        return [sketch.content_hashes[p] for p in self.new_positions.tolist()]

    def rebased(self, first_new: int) -> BatchPlan:
        """The same plan with the new contents' ids consecutive from ``first_new`` (ids taken by
        ``catalog.reserve``): stored content ids stay as they are."""
        if first_new == self.first_new:
            return self
        return self.with_new_ids(first_new + np.arange(self.new_ids.size, dtype=np.int64), first_new)

    def with_new_ids(self, new_ids: npt.NDArray[np.int64], first_new: int) -> BatchPlan:
        """The same plan with these ids for its new contents (one each, in ``new_ids``' order, none
        below ``first_new``): the documents and bucket rows of those contents follow."""
        slot = self.slots(self.doc_contents)
        bearing = self.slots(self.bearing_ids)
        moved = new_ids[np.maximum(slot, 0)] if new_ids.size else self.doc_contents
        return replace(
            self,
            doc_contents=np.where(slot >= 0, moved, self.doc_contents),
            new_ids=new_ids,
            first_new=first_new,
            bearing_ids=new_ids[bearing],
        )


class KeyFunction(Protocol):
    """Band keys of signatures (``Sketcher.band_keys``)."""

    def __call__(self, signatures: npt.NDArray[np.uint32], /) -> npt.NDArray[np.int64]: ...


def plan_batch(
    batch: Batch,
    sketch: Sketch,
    stored: Sequence[Stored],
    next_content_id: int,
    next_doc_id: int,
    *,
    store_text: bool,
    indexed: bool,
    band_keys: KeyFunction,
) -> BatchPlan:
    """Decide what writing ``batch`` does, given what is ``stored`` under its ids and content hashes.

    A document stored with the same content, text (when texts are stored) and metadata is
    unchanged; with anything else it is replaced. A document whose content hash is stored reuses
    that content; the others get new content ids, one per distinct hash in the batch. The bucket
    rows go in as a bulk load into an empty collection or one whose bucket index is missing
    (``indexed`` false): building the index once afterwards is far cheaper than inserting each row.
    """
    by_position = {m.position: m for m in stored}
    unchanged = 0
    replaced: list[int] = []
    content_of = np.full(len(batch), -1, dtype=np.int64)
    slot_of_hash: dict[bytes, int] = {}
    first_position: list[int] = []
    for pos in range(len(batch)):
        m = by_position.get(pos)
        if m is not None and m.doc_id is not None:
            same_content = m.existing_content is not None and m.existing_content == m.content_id
            same_text = not store_text or m.text == batch.texts[pos]
            if same_content and same_text and m.meta == batch.metas[pos]:
                unchanged += 1
                continue
            replaced.append(m.doc_id)
        if m is not None and m.existing_content is not None:
            content_of[pos] = m.existing_content
            continue
        slot = slot_of_hash.setdefault(sketch.content_hashes[pos], len(first_position))
        if slot == len(first_position):
            first_position.append(pos)
        content_of[pos] = next_content_id + slot
    new_positions = np.asarray(first_position, dtype=np.int64)
    new_ids = next_content_id + np.arange(new_positions.size, dtype=np.int64)
    bearing = sketch.shingle_counts[new_positions] > 0
    doc_positions = np.flatnonzero(content_of >= 0)
    if batch.numbers is None:
        doc_ids = next_doc_id + np.arange(doc_positions.size, dtype=np.int64)
        next_doc_id += doc_positions.size
    else:  # taken ahead, in input order, whichever writer commits first: the counter is past them
        doc_ids = np.asarray(batch.numbers, dtype=np.int64)[doc_positions]
    return BatchPlan(
        unchanged=unchanged,
        replaced_docs=replaced,
        doc_positions=doc_positions,
        doc_ids=doc_ids,
        doc_contents=content_of[doc_positions],
        new_positions=new_positions,
        new_ids=new_ids,
        first_new=next_content_id,
        bearing_ids=new_ids[bearing],
        keys=band_keys(sketch.signatures[new_positions[bearing]]),
        bulk=next_content_id == 1 or not indexed,
        empty=int(np.count_nonzero(sketch.shingle_counts[doc_positions] == 0)),
        next_doc_id=next_doc_id,
    )


def chunk_rows(plan: BatchPlan) -> int:
    """The stored bucket rows the batch groups at a time (``CHUNK_ROWS``): a probe reads at most
    this many, by content, and one that fills it leaves the rest to be read in chunks."""
    return max(CHUNK_ROWS, int(plan.keys.size))
