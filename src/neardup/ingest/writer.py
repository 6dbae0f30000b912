"""Writing a collection: batches of documents, removals and rebuilds, each one transaction.

A batch goes: take the collection's lock (writers to one collection take turns), read what is
stored under the batch's ids and content hashes, plan it in memory (``plan``), write its contents,
signatures and documents by binary COPY, find the stored members of its new contents' buckets (one
of the ways in ``members``), verify the candidates (``verification``), and store the verified pairs
and merged clusters (``store``) before the transaction commits. So the pairs table is always
complete: every pair of stored documents at or above the threshold is in it.

Around that loop: the batches are read and sketched ahead (``reading``); with other writers about,
a batch does its heavy work before its turn (``prework``); an ingest that defers the bucket index
writes each next batch's new contents ahead on a spare connection (``ahead``). Each step is given
the batch's connection and collection (``context.BatchContext``); none is kept on the writer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from concurrent import futures
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

from neardup import validate
from neardup.collection import Collection
from neardup.config import DEFAULT_BATCH_SIZE, IndexConfig
from neardup.core.lsh import bucket_rows
from neardup.core.sketch import Sketch, Sketcher
from neardup.errors import InputError, ParamsError
from neardup.ingest import before_lock, pairing, relink, store
from neardup.ingest.before_lock import Prework, Verdicts
from neardup.ingest.bucket_members import Deferral, Members, choose, probe_early
from neardup.ingest.context import BatchContext, on
from neardup.ingest.plan import Batch, BatchPlan
from neardup.ingest.reading import Upcoming
from neardup.ingest.sources import batch_sources
from neardup.ingest.write_ahead import WritingAhead
from neardup.records import Record, documents
from neardup.result import AddResult
from neardup.stages import NO_CLOCK, StageClock, stage, submit, timed, timing
from neardup.storage import buckets, catalog, fingerprints
from neardup.storage import documents as document_rows
from neardup.storage.connect import Connection, transaction, translated
from neardup.storage.scope import Scope

Finish = Callable[[Connection], None]
"""What ``sync`` runs on its connection just before its transaction commits."""
Synced = tuple[AddResult, int]
"""What ``sync`` did: the add's counts, and how many documents it removed."""


# Documents an add must write for it to vacuum the bucket partition of a collection with
# neighbours itself: a smaller add leaves a few pages to autovacuum, whose holders are checked in
# the heap meanwhile.
SETTLE_AFTER = 10_000


class Writer:
    """Writes one collection (its handle's, on the handle's home connection); a second connection
    probes buckets. The handle's owner closes its connections."""

    def __init__(self, collection: Collection) -> None:
        self._collection = collection
        self._scope, self.name = collection.scope, collection.name
        self._connections = collection.connections
        self._deferral = Deferral()

    @property
    def config(self) -> IndexConfig:
        """The collection's parameters, as its handle holds them."""
        return self._collection.config

    @property
    def sketcher(self) -> Sketcher:
        """The sketcher of those parameters."""
        return self._collection.sketcher

    def _context(self, conn: Connection | None = None) -> BatchContext:
        scope = self._scope if conn is None else on(self._scope, conn)
        return BatchContext(scope, self._connections.second, self.name, self.config, self.sketcher)

    # -- public operations, one transaction each -------------------------------------------------

    def add(
        self,
        records: Iterable[Record],
        batch_size: int | None = DEFAULT_BATCH_SIZE,
        progress: Callable[[AddResult], None] | None = None,
        clock: StageClock = NO_CLOCK,
        concurrent: bool = False,
        numbers: Iterator[int] | None = None,
    ) -> AddResult:
        """Check, sketch and write ``records``, ``batch_size`` per transaction (None: all in one;
        see ``Index.add``); ``clock`` gets the time of each stage. ``concurrent``: other writers add
        to the collection meanwhile, so each batch probes and verifies before its turn at the lock
        (``prework``). ``numbers``: the document id of each record in turn, taken ahead in input
        order (``catalog.reserve_documents``), so that the earliest in the input is the earliest
        stored whichever writer commits first."""
        batch_size = validate.batch_size(batch_size, whole=True)
        # Batch i+1 is sketched on a worker while batch i is written here; the second worker probes
        # the stored buckets for batch i, or writes its documents.
        with (
            timing(clock),
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="neardup-read") as reader,
            ThreadPoolExecutor(max_workers=2, thread_name_prefix="neardup-add") as pool,
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="neardup-ahead") as ahead_pool,
        ):
            upcoming = Upcoming(records, batch_size, self.sketcher, reader, pool, numbers)
            ahead = None
            if not (concurrent or self._scope.distributed):
                ahead = WritingAhead(ahead_pool, self._connections, upcoming, self._context())
            try:
                total = self._batches(upcoming, pool, ahead, progress, concurrent)
                self._end_deferral()
            except BaseException:
                self._abandon_deferral()
                raise
        if self.config.params.neighbours and total.added + total.replaced >= SETTLE_AFTER:
            self._settle()
        return total

    def _settle(self) -> None:
        """Mark the bucket partition's pages all-visible after a large add (a VACUUM, after the
        commit), so that top-k and containment queries read fingerprint holders from the lookup
        index alone at once, not after autovacuum's visit."""
        with translated(f"vacuuming the buckets of {self.name!r}"), timed("vacuum the bucket partition"):
            buckets.vacuum(self._scope)

    def _batches(
        self,
        upcoming: Upcoming,
        pool: ThreadPoolExecutor,
        ahead: WritingAhead | None,
        progress: Callable[[AddResult], None] | None,
        concurrent: bool,
    ) -> AddResult:
        """Write each batch of ``upcoming`` in a transaction of its own."""
        total = AddResult()
        try:
            # A bad record in batch i+1 surfaces here, after batch i has committed.
            while (ready := upcoming.take()) is not None:
                batch, sketch = ready
                with (
                    translated(f"adding {batch.where} to {self.name!r}"),
                    timed("batch transaction, commit included"),
                    self._batch_transaction(batch, ahead) as (ctx, pre),
                ):
                    if pre is None and concurrent:
                        with timed("before the lock: probe, verify, write contents"):
                            pre = before_lock.before_turn(
                                ctx, batch, sketch, deferring=self._deferral.memory is not None
                            )
                    total += self._write(ctx, batch, sketch, pool, ahead, may_defer=batch.start == 0, pre=pre)
                if progress is not None:
                    progress(total)
        finally:
            if ahead is not None:
                ahead.drop()  # none is left after the last batch; after an error, it goes
        return total

    @contextmanager
    def _batch_transaction(
        self, batch: Batch, ahead: WritingAhead | None
    ) -> Iterator[tuple[BatchContext, Prework | None]]:
        """A batch's transaction, and what it did before its turn: a new transaction on the
        writer's connection, or the one its contents were written ahead in, on the connection
        they were written on; committed when the block ends, rolled back on an error."""
        written = ahead.take(batch) if ahead is not None else None
        if written is None:
            with transaction(self._scope.conn):
                yield self._context(), None
            return
        with written.stack:
            yield self._context(written.conn), Prework(self._deferral.writes, (), {}, written.plan)

    def remove(self, ids: Iterable[str]) -> int:
        """Remove documents by id with their pairs; returns how many were found."""
        wanted = list(dict.fromkeys(ids))
        for i, doc_id in enumerate(wanted):
            if not isinstance(doc_id, str):
                raise InputError(f"id {i}: expected a string, got {type(doc_id).__name__}")
        if not wanted:
            return 0
        with translated(f"removing documents from {self.name!r}"), transaction(self._scope.conn):
            ctx = self._context()
            ctx.feed.begin(ctx.scope, store.lock(ctx), wanted)
            found, content_ids = document_rows.delete_by_external_id(ctx.scope, wanted)
            relink.drop_orphans(ctx, content_ids)
            ctx.feed.end(ctx.scope)
            catalog.touch(ctx.scope)
        return len(found)

    def set_keep(self, keep: str) -> None:
        """Store the representative policy ``keep`` (checked), as a write to the collection."""
        with translated(f"setting what {self.name!r} keeps"), transaction(self._scope.conn):
            ctx = self._context()
            store.lock(ctx)
            catalog.set_keep(ctx.scope, keep)

    def rebuild(self, config: IndexConfig, batch_size: int = DEFAULT_BATCH_SIZE) -> None:
        """Store ``config`` and recompute buckets, pairs and clusters under it, in one transaction:
        from the stored signatures when only the banding changes, else from the stored texts."""
        rebands = self.config.rebands_only(config)
        if not rebands and not self.config.store_text:
            raise ParamsError(
                f"collection {self.name!r} stores no text, so only threshold, bands and rows can change "
                f"(asked: {'; '.join(self.config.params.differences(config.params))})"
            )
        old = self.config
        try:
            with translated(f"rebuilding {self.name!r}"), transaction(self._scope.conn):
                row = store.lock(self._context())
                self._collection.configure(config)
                ctx = self._context()
                ctx.feed.begin_rebuild(ctx.scope, row)
                catalog.set_params(ctx.scope, config.params.to_dict(), config.threshold)
                if config.params.neighbours:
                    fingerprints.prepare(ctx.scope)
                if rebands:
                    relink.reband(ctx)
                else:
                    self._resketch(ctx, batch_size)
                ctx.feed.end(ctx.scope, rebuild=True)
        except BaseException:
            self._collection.configure(old)
            self._deferral.memory = None
            raise

    def _resketch(self, ctx: BatchContext, batch_size: int) -> None:
        """Write every stored document again, sketched under the new parameters (a rebuild)."""
        document_rows.stash(ctx.scope)
        counter = store.lock(ctx).next_content_id
        catalog.clear(ctx.scope)
        start = 0
        for rows in document_rows.stashed(ctx.scope, batch_size):
            batch = Batch(start, *(list(column) for column in zip(*rows, strict=True)))
            self._write(ctx, batch, self.sketcher.sketch(batch.texts), None, None, may_defer=start == 0)
            start += len(batch)
        store.restore_clusters(ctx, counter)
        if self._deferral.memory is not None:  # one transaction: nobody else wrote meanwhile
            self._deferral.memory = None
            buckets.create_index(ctx.scope, ctx.config.params.neighbours)

    def _end_deferral(self) -> None:
        """Build the bucket index an ingest deferred, in a transaction of its own."""
        if self._deferral.memory is None:
            return
        self._deferral.memory = None
        with (
            translated(f"building the bucket index of {self.name!r}"),
            timed("build the deferred bucket index"),
            transaction(self._scope.conn),
        ):
            store.lock(self._context())
            buckets.create_index(self._scope, self.config.params.neighbours)

    def _abandon_deferral(self) -> None:
        """After a failed ingest, still build the deferred index if the connection allows: queries
        would scan the partition until the next write built it."""
        try:
            self._end_deferral()
        except Exception:  # the ingest's own error is the one to report
            self._deferral.memory = None

    # -- a follower's batch ------------------------------------------------------------------------

    def sync(self, records: Iterable[Record], removed: Iterable[str], also: Finish | None = None) -> Synced:
        """Add or replace ``records`` and remove the documents ``removed``, all in one transaction
        (memory follows the records); ``also`` runs on the writer's connection inside it, just
        before it commits. Returns what the add did and how many documents were removed."""
        batch = Batch.of(list(documents(records)), 0)
        wanted = _ids(removed)
        with translated(f"applying changes to {self.name!r}"), transaction(self._scope.conn):
            ctx = self._context()
            store.lock(ctx)
            found = 0
            if wanted:
                gone, content_ids = document_rows.delete_by_external_id(ctx.scope, wanted)
                relink.drop_orphans(ctx, content_ids)
                catalog.touch(ctx.scope)
                found = len(gone)
            result = AddResult()
            if len(batch):
                sketch = self.sketcher.sketch(batch.texts)
                result = self._write(ctx, batch, sketch, None, None, may_defer=False)
            if also is not None:
                also(self._scope.conn)
        return result, found

    # -- one batch -------------------------------------------------------------------------------

    def _write(
        self,
        ctx: BatchContext,
        batch: Batch,
        sketch: Sketch,
        pool: ThreadPoolExecutor | None,
        ahead: WritingAhead | None,
        *,
        may_defer: bool,
        pre: Prework | None = None,
    ) -> AddResult:
        """Write one checked and sketched batch inside ``ctx``'s transaction. With ``pool``, the
        stored buckets are probed on the second connection meanwhile, and content ids are taken
        there too; without it (a rebuild, one transaction) they are taken in this one.
        ``may_defer``: the first batch of an ingest, which defers the bucket index if the collection
        is empty. ``pre``: what the batch did before the lock; its probe stands if nobody wrote
        since, and its contents if nobody stored or dropped one it counted on."""
        row, stored, indexed = self._match(
            ctx, batch, sketch, may_defer, pre is not None and pre.written is not None
        )
        plan, new_hashes, written, rows_written = self._plan(
            ctx, batch, sketch, stored, row, indexed, pre, pool
        )
        memory = self._deferral.planned(plan, new_hashes)
        probe = probe_early(ctx, plan, pre, row, pool) if memory is None else None
        ctx.feed.begin(ctx.scope, row, [batch.ids[i] for i in plan.doc_positions.tolist()])
        old_contents = store.delete_replaced(ctx.scope, plan)
        if plan.new_ids.size and written is None:
            store.copy_contents(ctx.scope, plan, sketch, ctx.config.params)
        # With the bucket rows held in memory, the documents go in on a worker (this connection is
        # its own until it is done) while this thread finds and verifies the batch's candidates,
        # reading on the second connection: the server writes the documents meanwhile.
        documents_written = None
        if pool is not None and memory is not None and not old_contents:
            documents_written = submit(pool, _documents, ctx, batch, plan, "worker: documents: binary COPY")
        else:
            _documents(ctx, batch, plan, "documents: binary COPY")
        try:
            writing_ahead = None
            if documents_written is not None and ahead is not None and memory is not None:
                ahead.start(memory, ctx.scope.conn)
                writing_ahead = ahead
            dropped = relink.drop_orphans(ctx, old_contents)
            members = choose(
                self._deferral,
                plan,
                probe,
                dropped,
                rows_written=rows_written,
                documents_written=documents_written,
                before_index=None if writing_ahead is None else writing_ahead.drop,
            )
            reading = ctx.second() if documents_written is not None else ctx.scope
            new_pairs = _pair(ctx, plan, sketch, members, pre.verdicts if pre else None, reading)
        finally:
            if documents_written is not None:
                futures.wait([documents_written])  # never leave the worker on this connection
        if documents_written is not None:
            documents_written.result()  # its error, if this thread had none
        ctx.feed.end(ctx.scope)
        self._deferral.writes = store.advance(ctx.scope, plan)
        store.refresh_statistics(ctx.scope, plan)
        replaced = len(plan.replaced_docs)
        return AddResult(plan.doc_ids.size - replaced, replaced, plan.unchanged, new_pairs, plan.empty)

    @stage("lock, match ids and content hashes")
    def _match(
        self, ctx: BatchContext, batch: Batch, sketch: Sketch, may_defer: bool, written: bool
    ) -> tuple[catalog.CollectionRow, list[document_rows.Match], bool]:
        """Lock the collection; what is stored under the batch's ids and content hashes (in memory
        while the index is deferred); and whether the bucket index stands."""
        row = store.lock(ctx)
        memory = self._deferral.begin(ctx.scope, row, may_defer)
        if memory is not None:
            return row, Deferral.match(memory, sketch.content_hashes), False
        # What is committed: the batch's own contents, written before the lock, are not.
        if not written:
            stored = document_rows.match(ctx.scope, batch.ids, sketch.content_hashes)
        else:
            second = ctx.second()
            with second.conn.transaction():
                stored = document_rows.match(second, batch.ids, sketch.content_hashes)
        return row, stored, row.next_content_id == 1 or buckets.has_index(ctx.scope)

    @stage("plan")
    def _plan(
        self,
        ctx: BatchContext,
        batch: Batch,
        sketch: Sketch,
        stored: list[document_rows.Match],
        row: catalog.CollectionRow,
        indexed: bool,
        pre: Prework | None,
        pool: ThreadPoolExecutor | None,
    ) -> tuple[BatchPlan, list[bytes], BatchPlan | None, bool]:
        """The batch's plan with ids for its new contents, their hashes, and what stands of the
        contents (and bucket rows) it wrote before its turn."""
        plan = before_lock.plan_of(ctx, batch, sketch, stored, row, indexed=indexed)
        new_hashes = plan.new_hashes(sketch)
        written, rows_written = (pre.written, pre.bucket_rows) if pre is not None else (None, False)
        if written is not None:
            plan, written, rows_written = before_lock.reconcile(
                ctx, plan, sketch, new_hashes, written, rows_written
            )
        if written is None and plan.new_ids.size:
            # In this transaction without a pool (a rebuild, which may hold the collection's row
            # already), else at once on the second connection, so that the row is held for no
            # longer than the update itself.
            plan = plan.rebased(
                catalog.reserve(ctx.scope if pool is None else ctx.second(), plan.new_ids.size)
            )
        return plan, new_hashes, written, rows_written


def _ids(ids: Iterable[str]) -> list[str]:
    """Distinct ids in order, or InputError naming the first that is no string."""
    wanted = list(dict.fromkeys(ids))
    for i, doc_id in enumerate(wanted):
        if not isinstance(doc_id, str):
            raise InputError(f"id {i}: expected a string, got {type(doc_id).__name__}")
    return wanted


def _documents(ctx: BatchContext, batch: Batch, plan: BatchPlan, name: str) -> None:
    """The batch's documents COPY, timed as stage ``name``."""
    with timed(name):
        store.insert_documents(ctx, batch, plan)


def _pair(
    ctx: BatchContext,
    plan: BatchPlan,
    sketch: Sketch,
    members: Members,
    verdicts: Verdicts | None,
    reading: Scope,
) -> int:
    """Find the new contents' candidate pairs with ``members``, verify them (stored contents read
    on ``reading``; ``verdicts``: pairs judged before the turn, not verified again), store the
    pairs their clusters need (``pairing``: every one of a cluster under the density bound, a
    connecting subset of a dense one) and merge clusters; returns how many pairs were stored.
    Small buckets' candidates go in parts, each verified and stored before the next is made, and
    hot buckets are linked without enumerating their pairs, so that a hot bucket (its pairs
    growing with the square of its size) costs neither memory nor the square of its time."""
    if plan.bearing_ids.size == 0:
        return 0
    rows = bucket_rows(plan.bearing_ids, plan.keys)
    groups = members.groups(ctx, plan, rows)
    paired = pairing.pair(groups, plan.first_new, batch_sources(ctx, reading, plan, sketch, verdicts))
    store.join_clusters(ctx, paired.nodes, paired.component, plan.new_ids)
    members.written(ctx, rows)
    return paired.stored
