"""Ways of finding the stored members of a batch's buckets, one chosen per batch (``choose``).

Each groups the batch's new bucket rows with the stored rows that share a bucket with them
(``Members.groups``), writing the batch's rows where its way writes them:

- ``Probe``: the bucket index stands; the stored members are probed for the batch's keys (on the
  second connection while the batch writes, or here in a rebuild), the rows COPYed into the index.
  Where they hold more rows than a chunk (``plan.chunk_rows``: about the batch's own), the stored members
  come in chunks of contents, read on the batch's connection as pairing asks for them
  (``pairing.Chunked``): what a batch holds follows the batch, not what is stored.
- ``Bulk``: a batch into a partition whose index is missing; the index is dropped, the rows COPYed,
  every shared bucket read, and the index built again.
- ``Deferred``: an ingest into an empty collection defers the index (``Deferral``); the rows it
  wrote are looked up in memory (``core.ingest_memory``), and the batch's rows are COPYed into the
  unindexed partition once its candidates are verified (``Members.written``). Building an index
  once is far cheaper than inserting every row into it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from neardup.core.candidates import bucket_groups, keyed_groups, mixed_keys
from neardup.core.ingest_memory import IngestMemory
from neardup.core.lsh import distinct_keys
from neardup.core.ragged import Ragged
from neardup.ingest.before_lock import Prework
from neardup.ingest.context import BatchContext
from neardup.ingest.pairing import Chunk, Chunked
from neardup.ingest.plan import BatchPlan, chunk_rows
from neardup.ingest.store import insert_indexed
from neardup.stages import stage, submit
from neardup.storage import buckets, catalog
from neardup.storage import documents as document_rows
from neardup.storage.scope import Scope

# Bucket rows an ingest holds in memory while it defers the bucket index (a mixed key, a content id
# and a band each, twice that while two runs merge): enough for a million documents under the
# default banding, and small beside the memory such an ingest needs anyway; beyond that the index
# is built and probed.
DEFERRED_ROWS = 1 << 24

Rows = tuple[np.ndarray, ...]
"""Bucket rows: (band, bucket, content) columns."""


class Members(Protocol):
    """A way of finding the stored members of a batch's buckets."""

    def groups(self, ctx: BatchContext, plan: BatchPlan, rows: Rows) -> Ragged | Chunked:
        """The bucket groups of the batch's new ``rows`` with the stored rows sharing a bucket,
        whole or in chunks of stored contents."""
        ...

    def written(self, ctx: BatchContext, rows: Rows) -> None:
        """Write what is left of the batch's bucket rows, once its candidates are verified."""
        ...


class Deferral:
    """An ingest's deferral of the bucket index: the rows it holds in memory (None while the
    index stands), and the write counter its last batch left (another value means someone else
    wrote in between)."""

    def __init__(self) -> None:
        self.memory: IngestMemory | None = None
        self.writes = -1

    def begin(self, scope: Scope, row: catalog.CollectionRow, may_defer: bool) -> IngestMemory | None:
        """At a batch's turn: defer the index if the batch is an ingest's first into an empty
        collection, stop if another writer came between; the memory held, if deferring."""
        if may_defer and row.next_content_id == 1:
            self.memory = IngestMemory()
            buckets.drop_index(scope)  # the partition is empty; a rollback restores the index
        elif self.memory is not None and row.writes != self.writes:
            self.memory = None  # another writer came between: this batch finds the index or builds it
        return self.memory

    def planned(self, plan: BatchPlan, new_hashes: list[bytes]) -> IngestMemory | None:
        """Hold the plan's new contents; the memory held, if still deferring."""
        if self.memory is not None and plan.replaced_docs:
            # Never in an ingest that began on an empty collection with distinct ids; if it were,
            # the rows held would go stale with the deletes: the bulk path reads the partition.
            self.memory = None
        if self.memory is not None:
            self.memory.add_contents(new_hashes, plan.new_ids.tolist())
        return self.memory

    @staticmethod
    def match(memory: IngestMemory, hashes: Sequence[bytes]) -> list[document_rows.Match]:
        """What is stored for a batch while the index is deferred, read from memory: only this
        ingest has written, with ids distinct in its input, so no id is stored and a stored
        content is one of its own."""
        found = ((position, memory.content_of(h)) for position, h in enumerate(hashes))
        return [document_rows.Match(p, None, None, c, None, None) for p, c in found if c is not None]


def choose(
    deferral: Deferral,
    plan: BatchPlan,
    probe: Future[Rows] | None,
    dropped: Sequence[int],
    *,
    rows_written: bool,
    documents_written: Future[None] | None,
    before_index: Callable[[], None] | None = None,
) -> Members:
    """The way this batch finds its stored members (``before_index``: see ``Deferred``)."""
    if deferral.memory is not None:
        return Deferred(deferral, deferral.memory, documents_written, before_index)
    if plan.bulk:
        return Bulk()
    return Probe(probe, dropped, rows_written)


def probe_early(
    ctx: BatchContext,
    plan: BatchPlan,
    pre: Prework | None,
    row: catalog.CollectionRow,
    pool: ThreadPoolExecutor | None,
) -> Future[Rows] | None:
    """The stored members of the batch's buckets, probed while the batch writes; None where it
    probes none (bulk), or probes when it needs them (without a pool: a rebuild)."""
    if plan.bulk or plan.keys.shape[0] == 0:
        return None
    if pre is not None and pre.stored and pre.writes == row.writes:
        probe: Future[Rows] = Future()  # nothing was committed since its snapshot: its probe is this one's
        probe.set_result(pre.stored)
        return probe
    if pool is None:
        return None
    # It sees what was committed before this batch, which is everything stored, since this
    # transaction holds the collection's lock, and nothing of this batch.
    return submit(pool, _probe, ctx.second, plan.keys, chunk_rows(plan))


def _probe(second: Callable[[], Scope], keys: npt.NDArray[np.int64], most: int) -> Rows:
    """Stored (band, bucket, content) rows sharing a bucket with ``keys``, read on the second
    connection: all of them, or the first ``most`` by content (then the batch reads on in
    chunks)."""
    scope = second()
    with scope.conn.transaction():
        return buckets.members_of(scope, *distinct_keys(keys), most=most)


@dataclass(frozen=True)
class Probe:
    """Stored members probed in the bucket index: ``probe`` yields them as read on the second
    connection (None: probed here, as a rebuild does); contents this transaction ``dropped`` are
    taken out of them. ``rows_written``: the batch's rows went into the index before its turn."""

    probe: Future[Rows] | None
    dropped: Sequence[int]
    rows_written: bool

    def groups(self, ctx: BatchContext, plan: BatchPlan, rows: Rows) -> Ragged | Chunked:
        # Stored members of the batch's buckets (few rows), then the batch's own rows, grouped in
        # memory: nothing the batch wrote is read back. Where the stored rows fill a chunk, the
        # rest are read in chunks on this connection, the batch's rows left out.
        most = chunk_rows(plan)
        if self.probe is None:
            stored = _probe_here(ctx.scope, plan, most)
            insert_indexed(ctx.scope, rows)
        else:
            if not self.rows_written:
                insert_indexed(ctx.scope, rows)  # while the probe may still run
            stored = _wait(self.probe)
        # Whether the probe stopped at ``most`` rows, judged before the contents this
        # transaction dropped leave them: their rows counted there.
        last = int(stored[2].max()) if stored[2].size >= most else None
        if self.probe is not None and len(self.dropped):
            alive = ~np.isin(stored[2], np.asarray(self.dropped, dtype=np.int64))
            stored = tuple(column[alive] for column in stored)
        if last is None:
            return _grouped_across(stored, rows, plan.first_new)
        return Chunked(_Chunks(ctx.scope, plan, rows, stored, most, last))

    def written(self, ctx: BatchContext, rows: Rows) -> None:
        """Nothing: the rows went in with the probe."""


@stage("probe stored buckets")
def _probe_here(scope: Scope, plan: BatchPlan, most: int) -> Rows:
    return buckets.members_of(scope, *distinct_keys(plan.keys), most=most)


@stage("wait for the probe of stored buckets")
def _wait(probe: Future[Rows]) -> Rows:
    return probe.result()


@stage("group buckets")
def _grouped_across(stored: Rows, rows: Rows, first_new: int) -> Ragged:
    # Contents stored by writers that took their ids after this batch (possible when it took them
    # before its turn) are above first_new; negated, they sort below it, so that the kernel pairs
    # them with new contents only.
    far = stored[2] >= first_new
    if far.any():
        stored = (stored[0], stored[1], np.where(far, -stored[2], stored[2]))
    return _grouped(stored, rows)


def _grouped(stored: Rows, rows: Rows) -> Ragged:
    return bucket_groups(*(np.concatenate([s, n]) for s, n in zip(stored, rows, strict=True)))


class _Chunks:
    """The stored members of a batch's buckets in chunks of contents, read on the batch's own
    connection (which sees what was committed before its turn and what it deleted since, as the
    probe does, and the batch's own rows, left out): the first chunk the probe's rows of the
    contents before the last of its first ``most`` rows, each next one up to ``most`` rows on from
    there (at least one content's). The first reading finds where the chunks start; a second reads the
    same ranges again. Each chunk comes grouped with the batch's rows, with each group's size as
    the bucket index counts it (every stored member, and the batch's)."""

    def __init__(self, scope: Scope, plan: BatchPlan, rows: Rows, probed: Rows, most: int, last: int) -> None:
        self._scope, self._plan, self._rows = scope, plan, rows
        self._keys = distinct_keys(plan.keys)
        self._most = max(most, plan.keys.shape[1] + 1)  # a content's rows, and one more
        # The probe's rows below the last content it read (``last``, whose rows it may have
        # cut), and no more than a chunk's (a probe made before the batch's turn read every row).
        contents = np.sort(probed[2])
        cut = min(last, int(contents[min(self._most, contents.size) - 1])) if contents.size else last
        del contents
        below = probed[2] < cut
        self._probed: Rows | None = tuple(column[below] for column in probed)
        self._starts = [cut]
        self._read_through = False
        self._sizes: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]] | None = None

    def __call__(self, needed: npt.NDArray[np.int64] | None = None) -> Iterator[Chunk]:
        if self._sizes is None:
            band, bucket, count = _key_sizes(self._scope, *self._keys)
            key = mixed_keys(band, bucket)
            order = np.argsort(key)
            self._sizes = key[order], np.asarray(count, np.int64)[order]
        if not self._read_through:
            yield from self._first_reading()
            return
        keys, rows = (self._keys, self._rows) if needed is None else self._buckets_of(needed)
        if keys[0].size == 0:
            return
        bounds: list[int | None] = [None, *self._starts, None]
        for c in range(len(bounds) - 1):
            _, stored = self._read(bounds[c], bounds[c + 1], None, keys)
            yield self._chunk(stored, later=c > 0, rows=rows)

    def _buckets_of(self, needed: npt.NDArray[np.int64]) -> tuple[tuple[np.ndarray, np.ndarray], Rows]:
        """The buckets of the new contents ``needed``, and the batch's rows in them (every new
        member's, ``needed`` or not)."""
        band, bucket, content = self._rows
        key = mixed_keys(band, bucket)
        keep = np.isin(key, key[np.isin(content, needed)])
        _, first = np.unique(key[keep], return_index=True)
        rows = tuple(column[keep] for column in self._rows)
        return (rows[0][first], rows[1][first]), rows

    def _first_reading(self) -> Iterator[Chunk]:
        probed, self._probed = self._probed, None
        if probed is None:
            raise RuntimeError("the chunks' first reading ran twice")
        yield self._chunk(probed, later=False)
        del probed
        while True:
            last, stored = self._read(self._starts[-1], None, self._most)
            if last is None:
                yield self._chunk(stored, later=True)
                break
            below = stored[2] < last
            cut = last
            self._starts.append(cut)
            yield self._chunk(tuple(column[below] for column in stored), later=True)
        self._read_through = True

    def _read(
        self,
        lo: int | None,
        hi: int | None,
        most: int | None,
        keys: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> tuple[int | None, Rows]:
        """The rows of stored contents from ``lo`` below ``hi`` in the batch's buckets (or
        ``keys``), at most ``most`` of every row's; and, where that cut them, the last content
        read (whose rows may be cut; it starts the next chunk), else None. The batch's own rows
        count, though left out."""
        found = _read_chunk(self._scope, self._keys if keys is None else keys, lo, hi, most)
        stored = ~self._plan.is_new(found[2])
        last = int(found[2].max()) if most is not None and found[2].size >= most else None
        return last, tuple(column[stored] for column in found)

    def _chunk(self, stored: Rows, *, later: bool, rows: Rows | None = None) -> Chunk:
        groups, keys = _grouped_chunk(stored, self._rows if rows is None else rows, self._plan.first_new)
        if later:
            # Groups of new members alone were paired with the first chunk.
            with_stored = np.asarray(groups.values)[groups.offsets[:-1]] < self._plan.first_new
            groups = groups.take(np.flatnonzero(with_stored))
            keys = keys[with_stored]
        known, size = self._sizes if self._sizes is not None else (keys, groups.lengths())
        return Chunk(groups, size[np.minimum(np.searchsorted(known, keys), known.size - 1)], keys)


@stage("probe stored buckets: sizes")
def _key_sizes(
    scope: Scope, band: npt.NDArray[np.int16], bucket: npt.NDArray[np.int64]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return buckets.key_sizes(scope, band, bucket)


@stage("probe stored buckets: a chunk")
def _read_chunk(
    scope: Scope, keys: tuple[np.ndarray, np.ndarray], lo: int | None, hi: int | None, most: int | None
) -> Rows:
    return buckets.members_of(scope, *keys, lo=lo, hi=hi, most=most)


@stage("group buckets")
def _grouped_chunk(stored: Rows, rows: Rows, first_new: int) -> tuple[Ragged, npt.NDArray[np.int64]]:
    far = stored[2] >= first_new  # as in ``_grouped_across``
    if far.any():
        stored = (stored[0], stored[1], np.where(far, -stored[2], stored[2]))
    return keyed_groups(*(np.concatenate([s, n]) for s, n in zip(stored, rows, strict=True)))


class Bulk:
    """A batch into a partition without its bucket index: the rows COPYed unindexed, every shared
    bucket read back, the index built again."""

    def groups(self, ctx: BatchContext, plan: BatchPlan, rows: Rows) -> Ragged:
        _bulk_insert(ctx.scope, rows)
        groups = _grouped_shared(_shared_buckets(ctx.scope))
        _build_index(ctx.scope, ctx.config.params.neighbours)
        return groups

    def written(self, ctx: BatchContext, rows: Rows) -> None:
        """Nothing: the rows went in before the shared buckets were read."""


@stage("bulk: drop the bucket index, COPY bucket rows")
def _bulk_insert(scope: Scope, rows: Rows) -> None:
    buckets.drop_index(scope)
    buckets.insert(scope, *rows)


@stage("bulk: read shared buckets")
def _shared_buckets(scope: Scope) -> Rows:
    return buckets.shared_buckets(scope)


@stage("group buckets")
def _grouped_shared(shared: Rows) -> Ragged:
    return bucket_groups(*shared)


@stage("bulk: build the bucket index")
def _build_index(scope: Scope, fingerprints: bool) -> None:
    buckets.create_index(scope, fingerprints)


@dataclass(frozen=True)
class Deferred:
    """Stored members looked up in the ingest's memory (the partition holds only its rows, all of
    them in memory too); the batch's rows are COPYed unindexed after verification, once
    ``documents_written`` (the batch's documents COPY on this connection, if running) is done."""

    deferral: Deferral
    memory: IngestMemory
    documents_written: Future[None] | None
    # Called before the index is built: it rolls back the next batch's contents written ahead,
    # whose open transaction holds the partition the index build must lock (its fingerprints).
    before_index: Callable[[], None] | None = None

    def groups(self, ctx: BatchContext, plan: BatchPlan, rows: Rows) -> Ragged:
        return _grouped_held(_hold(self.memory, rows), rows)

    def written(self, ctx: BatchContext, rows: Rows) -> None:
        if self.documents_written is not None:
            _wait_documents(self.documents_written)
        _insert_unindexed(ctx.scope, rows)
        if self.memory.rows >= DEFERRED_ROWS:
            if self.before_index is not None:
                self.before_index()
            _build_deferred_index(ctx.scope, ctx.config.params.neighbours)
            self.deferral.memory = None


@stage("deferred: look up and hold bucket rows in memory")
def _hold(memory: IngestMemory, rows: Rows) -> Rows:
    return memory.add(*rows)


_grouped_held = stage("group buckets")(_grouped)


@stage("wait for the documents COPY")
def _wait_documents(documents_written: Future[None]) -> None:
    documents_written.result()


@stage("build the deferred bucket index")
def _build_deferred_index(scope: Scope, fingerprints: bool) -> None:
    buckets.create_index(scope, fingerprints)


@stage("deferred: COPY bucket rows, no index")
def _insert_unindexed(scope: Scope, rows: Rows) -> None:
    buckets.insert(scope, *rows)
