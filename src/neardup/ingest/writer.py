"""Writing a collection: batches of documents, removals and rebuilds, each one transaction.

A batch goes: take the collection's writer lock (writers to one collection take turns), read what is
stored under the batch's ids and content hashes (one statement), plan it in memory
(``plan.plan_batch``), write contents, signatures, documents and bucket rows by binary COPY while a
second connection probes the stored buckets for the batch's keys, group the candidates in memory,
verify them (exact Jaccard of the shingle sets, or the signature estimate without texts), and store
the verified pairs and merged clusters before the transaction commits. So the pairs table is always
complete: every pair of stored documents at or above the threshold is in it.

An ``add`` into an empty collection (and a rebuild) defers the bucket index: its bucket rows go into
the unindexed partition, the rows it wrote are looked up in memory (``core.ingest_memory``), and the
index is built once at the end, or when the rows held reach ``DEFERRED_ROWS``. Building an index
once is far cheaper than inserting every row into it. Such a batch COPYs its documents on a worker
(on this connection, in the batch's transaction) while it finds and verifies its candidates, reading
what is stored on the second connection, and writes its bucket rows and pairs after. If another
writer changes the collection between two of its batches (the collection's write counter moved), the
ingest builds the index then and probes the database from there on; a writer that meets the
unindexed partition reads all its shared buckets (the bulk path) and builds the index itself. Either
way every pair is found. Readers meanwhile scan the partition instead of probing an index: slower,
and the same answers.

Such an ingest also writes each next batch's new contents and signatures ahead (``Ahead``): while a
batch's documents are COPYed, a thread of its own waits for the next batch's sketch, plans its new
contents from memory, takes their ids (``catalog.reserve``, committed at once) and COPYs them on a
spare connection, in a transaction it leaves open. That transaction then writes the rest of the next
batch, in its turn at the lock, as a batch does that wrote before its turn (``Prework``): if another
writer came between, what it stored meanwhile is matched again and the contents it made stale are
withdrawn. So two server processes write at once, where one wrote all of an ingest in turn; the
batches' transactions alternate between the index's connection and the spare one.

With other writers about (``add(..., concurrent=True)``, as ``neardup add --jobs`` runs its
writers), each batch does its heavy work before its turn at the collection's lock, while other
writers hold theirs (``Prework``): it probes and verifies against what is committed, in a snapshot
on the second connection, takes content ids for its new texts (``catalog.reserve``, committed at
once) and COPYs their contents and signatures inside its own transaction, and their bucket rows
where the bucket index stands and nobody is building or dropping it (``buckets.hold_indexed``). In
its turn it matches its ids and hashes again against what is committed: if another writer stored
some of its new texts meanwhile, it deletes what it wrote for those; if another dropped a content it
reused, it deletes all it wrote and writes its contents there and then; the rest stands. It then
finds its candidates as always, so completeness is kept, and verifies only those it had not judged:
pairs with what other writers committed meanwhile. If nobody wrote in between (the write counter did
not move), the probe is not repeated either. Documents are written in the turn: their external ids
must stay unique, and two writers holding the same id would wait on each other's rows.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent import futures
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from neardup.config import IndexConfig
from neardup.core.candidates import bucket_groups, candidate_pairs
from neardup.core.components import component_labels
from neardup.core.ingest_memory import IngestMemory
from neardup.core.lsh import bucket_rows, distinct_keys
from neardup.core.minhash import empty_rows
from neardup.core.params import Params
from neardup.core.ragged import Ragged, concat
from neardup.core.sketch import Sketch, Sketcher
from neardup.core.verify import exact_jaccard, exact_jaccard_unsorted, prefilter_floor, signature_agreement
from neardup.errors import CollectionNotFoundError, InputError, InternalError, ParamsError, SchemaError
from neardup.ingest.plan import Batch, BatchPlan, plan_batch
from neardup.ingest.stages import NO_CLOCK, StageClock
from neardup.records import Record, documents
from neardup.storage import buckets, catalog, contents, statistics, verified_pairs
from neardup.storage import documents as document_rows
from neardup.storage.connect import Connection, connect, transaction, translated
from neardup.storage.scope import Scope, read_snapshot

# Documents per transaction in add(): large enough that COPY and the set-based statements
# dominate, small enough that a batch's shingles and signatures stay in a few hundred MB.
DEFAULT_BATCH_SIZE = 50_000
# Bucket rows an ingest holds in memory while it defers the bucket index (``ROW_BYTES`` = 18 each,
# ~300 MB, twice that while two runs merge): a million documents under 16 bands; beyond that the
# index is built and probed.
DEFERRED_ROWS = 1 << 24
# A batch that stores at least this many new contents, more than the collection held before it,
# refreshes the planner's statistics before it commits: until autovacuum's ANALYZE (a minute
# or more later), the planner guesses a partition's rows, and guessed badly on bench_profile's 1M
# ingest (every stored text of the collection scanned to read a batch's few thousand). Smaller
# partitions are a few pages, quick under any plan.
ANALYZE_AFTER = 1_000
# Batch sizes from which an ingest starts with smaller batches (``batch_sizes``): below it the
# ramp would buy little, and a batch is exactly the size asked for.
RAMP_FROM = 8_192
# Threads that sketch a batch: the shingle and MinHash kernels and the content hashing release the
# GIL, so a second thread uses the core the database leaves idle between statements.
SKETCH_THREADS = 2
# Up to this many candidate pairs per text in them, verification compares shingles as shingled (a
# hash table a pair) instead of sorting each text's set once and merging each pair's. Past it, texts
# sit in large clusters and sorting once pays: from about 6 pairs a text for 1.5 KB synthetic texts,
# beyond 15 for Debian's short descriptions (bench/bench_verify.py, docs/benchmarks/verify.md).
UNSORTED_PAIRS_PER_TEXT = 4
# Similarity methods stored with each pair.
EXACT, ESTIMATE = "exact", "estimate"


@dataclass(frozen=True)
class AddResult:
    """What one ``add`` did: documents added, replaced, unchanged, and new verified pairs."""

    added: int = 0
    replaced: int = 0
    unchanged: int = 0
    new_pairs: int = 0
    empty: int = 0
    """Of the documents added or replaced, those whose text has no shingle (empty or only
    whitespace after normalisation): stored, and never anyone's duplicate."""

    def __add__(self, other: AddResult) -> AddResult:
        return AddResult(
            self.added + other.added,
            self.replaced + other.replaced,
            self.unchanged + other.unchanged,
            self.new_pairs + other.new_pairs,
            self.empty + other.empty,
        )


@dataclass(frozen=True)
class Prework:
    """What a batch did before its turn at the collection's lock: the write counter of its
    snapshot, the stored members of its buckets then, its verdict on each candidate pair it
    verified (``pair_keys``: similarity, or -1 below the threshold), the plan whose new contents
    and signatures it wrote (None if it wrote none), and whether it wrote their bucket rows too."""

    writes: int
    stored: tuple[np.ndarray, ...]
    verdicts: dict[tuple[int, int], float]
    written: BatchPlan | None = None
    bucket_rows: bool = False


@dataclass(frozen=True)
class Ahead:
    """The next batch's new contents and signatures, COPYed ahead on the spare connection in the
    transaction that then writes the rest of that batch: the batch, the connection, its open
    transaction (``stack``), and the plan with the ids reserved for those contents."""

    batch: Batch
    conn: Connection
    stack: ExitStack
    plan: BatchPlan


def pair_keys(cand: npt.NDArray[np.int64], plan: BatchPlan) -> list[tuple[int, int]]:
    """Keys of candidate pairs (stored or new content, new content) that survive a change of the
    batch's content ids: a stored content by its id, a new one by its position in the batch
    (a stored one as is, a new one as ``-1 - position`` on the left)."""
    left, right = plan.slots(cand[:, 0]), plan.slots(cand[:, 1])
    positions = plan.new_positions
    keys_left = np.where(left >= 0, -1 - positions[np.maximum(left, 0)], cand[:, 0])
    return list(zip(keys_left.tolist(), positions[right].tolist(), strict=True))


def batch_sizes(batch_size: int) -> Iterator[int]:
    """The sizes of an ingest's batches: ``batch_size`` each, except that from ``RAMP_FROM`` on the
    first ones are an eighth, a quarter and a half of it, so that writing starts early (the first
    batch is read and sketched before anything else can happen) and a small ingest overlaps too."""
    if batch_size >= RAMP_FROM:
        yield from (batch_size // 8, batch_size // 4, batch_size // 2)
    yield from itertools.repeat(batch_size)


class Writer:
    """Writes one collection on the index's connection; a second connection probes buckets."""

    def __init__(self, conn: Connection, url: str, scope: Scope, name: str, config: IndexConfig) -> None:
        self._conn, self._url, self._scope, self.name = conn, url, scope, name
        self.config = config
        self.sketcher = Sketcher(config.params)
        # Opened on the first batch that probes: reads the stored buckets while the batch is written.
        self._reader: Connection | None = None
        self._clock = NO_CLOCK
        # While an ingest defers the bucket index: its bucket rows, and the write counter its last
        # batch left (another value means someone else wrote in between).
        self._memory: IngestMemory | None = None
        self._writes = -1
        # While such an ingest runs: the connection that writes the next batch's contents ahead
        # (the batches' transactions alternate between it and the index's), the thread that does it,
        # the next batch being prepared, and what was written ahead for it.
        self._spare: Connection | None = None
        self._ahead_pool: ThreadPoolExecutor | None = None
        self._upcoming: Future[tuple[tuple[Batch, Sketch] | None, Future[Batch] | None]] | None = None
        self._ahead: Future[Ahead | None] | None = None

    def close(self) -> None:
        """Close the probing connection and the spare writing one, if they were opened."""
        for conn in (self._reader, self._spare):
            if conn is not None:
                conn.close()
        self._reader = self._spare = None

    # -- public operations, one transaction each -------------------------------------------------

    def add(
        self,
        records: Iterable[Record],
        batch_size: int = DEFAULT_BATCH_SIZE,
        progress: Callable[[AddResult], None] | None = None,
        clock: StageClock = NO_CLOCK,
        concurrent: bool = False,
    ) -> AddResult:
        """Check, sketch and write ``records``, ``batch_size`` per transaction (see ``Index.add``);
        ``clock`` gets the time of each stage. ``concurrent``: other writers add to the collection
        meanwhile, so each batch probes and verifies before its turn at the lock (``Prework``)."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ParamsError(f"batch_size must be a positive integer, got {batch_size!r}")
        checked = documents(records)
        total = AddResult()
        self._clock = clock

        read_so_far = 0
        sizes = batch_sizes(batch_size)

        def read() -> Batch:
            """Read and check the next batch (on the reading thread)."""
            nonlocal read_so_far
            with clock.stage("worker: read and check records"):
                batch = Batch.of(list(itertools.islice(checked, next(sizes))), read_so_far)
            read_so_far += len(batch)
            return batch

        def prepare(reading: Future[Batch]) -> tuple[tuple[Batch, Sketch] | None, Future[Batch] | None]:
            """Sketch the batch being read (on a worker thread), and start reading the one after."""
            batch = reading.result()
            if not len(batch):
                return None, None
            following = reader.submit(read)
            with clock.stage("worker: normalise, shingle, sign"):
                return (batch, self.sketcher.sketch(batch.texts, threads=SKETCH_THREADS)), following

        # Three stages overlap: batch i+2 is read and checked on the reading thread (Python, holding
        # the GIL), batch i+1 sketched on a worker (numba kernels and hashing, which release it),
        # batch i written here (the database works on a core of its own); the second worker probes
        # the stored buckets for batch i.
        home = self._conn
        with (
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="neardup-read") as reader,
            ThreadPoolExecutor(max_workers=2, thread_name_prefix="neardup-add") as pool,
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="neardup-ahead") as ahead_pool,
        ):
            upcoming = pool.submit(prepare, reader.submit(read))
            self._ahead_pool = None if concurrent or self._scope.distributed else ahead_pool
            try:
                # A bad record in batch i+1 surfaces here, after batch i has committed.
                while (ready := self._next(upcoming)) is not None:
                    batch, sketch, following = ready
                    upcoming = self._upcoming = pool.submit(prepare, following)
                    with (
                        translated(f"adding {batch.where} to {self.name!r}"),
                        clock.stage("batch transaction, commit included"),
                        self._batch_transaction(batch) as ahead,
                    ):
                        pre = None
                        if ahead is not None:
                            pre = Prework(self._writes, (), {}, ahead.plan)
                        elif concurrent:
                            with clock.stage("before the lock: probe, verify, write contents"):
                                pre = self._prework(batch, sketch)
                        total += self._write(batch, sketch, pool, may_defer=batch.start == 0, pre=pre)
                    if progress is not None:
                        progress(total)
                self._end_deferral()
            except BaseException:
                self._abandon_deferral()
                raise
            finally:
                self._drop_ahead()  # none is left after the last batch; after an error, it goes
                self._clock = NO_CLOCK
                self._ahead_pool = self._upcoming = None
                self._use(home)
        return total

    @contextmanager
    def _batch_transaction(self, batch: Batch) -> Iterator[Ahead | None]:
        """A batch's transaction: a new one on the writing connection, or the one its contents
        were written ahead in (yielded), on the spare connection, which then writes until the next
        batch written ahead; committed when the block ends, rolled back on an error."""
        coming, self._ahead = self._ahead, None
        ahead = None
        if coming is not None:
            with self._clock.stage("wait for the contents COPY ahead"):
                ahead = coming.result()
        if ahead is None:
            with transaction(self._conn):
                yield None
            return
        if ahead.batch is not batch:  # never: the batch written ahead is always the next one
            self._roll_back(ahead)
            raise InternalError(f"contents written ahead for another batch than {batch.where}")
        self._use(ahead.conn)
        with ahead.stack:
            yield ahead

    def _use(self, conn: Connection) -> None:
        """Write on ``conn`` from now on (the index's connection or the spare one)."""
        if conn is self._conn:
            return
        self._spare, self._conn = self._conn, conn
        self._scope = self._scope_on(conn)

    def _scope_on(self, conn: Connection) -> Scope:
        """This writer's collection, on ``conn``."""
        s = self._scope
        return Scope(conn, s.schema, s.collection_id, s.distributed)

    def _write_ahead(self) -> None:
        """While this batch's documents are COPYed (an ingest that defers the bucket index), have
        the next batch's new contents written ahead: on a thread of their own, once that batch is
        sketched, planned from memory, their ids taken and COPYed with their signatures on the
        spare connection, in a transaction that writes the rest of that batch once this one has
        committed. So two server processes write at once, where one wrote all of an ingest in turn."""
        upcoming, memory, pool = self._upcoming, self._memory, self._ahead_pool
        if pool is None or upcoming is None or memory is None:
            return
        if self._spare is None:
            self._spare = connect(self._url)
        self._ahead = pool.submit(self._contents_ahead, upcoming, memory, self._scope_on(self._spare))

    def _contents_ahead(
        self,
        upcoming: Future[tuple[tuple[Batch, Sketch] | None, Future[Batch] | None]],
        memory: IngestMemory,
        scope: Scope,
    ) -> Ahead | None:
        """Write the next batch's new contents ahead on ``scope`` (see ``_write_ahead``); None if
        there is no next batch, it has none, or it failed to be read (its error surfaces where the
        loop takes it, after this batch has committed). Only this thread uses the spare connection
        and reads ``memory``'s content ids meanwhile; the writing thread adds to them only in the
        next batch's plan, after this is done."""
        try:
            prepared, _ = upcoming.result()
        except Exception:
            return None
        if prepared is None:
            return None
        batch, sketch = prepared
        with self._clock.stage("worker: ahead: plan the next batch's contents, take their ids"):
            stored = self._memory_match(memory, sketch.content_hashes)
            plan = plan_batch(
                batch,
                sketch,
                stored,
                1,
                1,
                store_text=self.config.store_text,
                indexed=False,
                band_keys=self.sketcher.band_keys,
            )
            if not plan.new_ids.size:
                return None
            # At once and for good, as concurrent writers take theirs: the batch before holds the
            # writer lock, not the collection's row (until it advances the counters at its end).
            plan = plan.rebased(catalog.reserve(scope, plan.new_ids.size))
        with ExitStack() as stack:  # its transaction stays open only if the COPY succeeded
            stack.enter_context(transaction(scope.conn))
            with self._clock.stage("worker: ahead: the next batch's contents and signatures COPY"):
                self._insert_contents(plan, sketch, scope)
            return Ahead(batch, scope.conn, stack.pop_all(), plan)

    def _drop_ahead(self) -> None:
        """Roll back what was written ahead for a batch that will not be written (an error in the
        one before it)."""
        coming, self._ahead = self._ahead, None
        if coming is None:
            return
        futures.wait([coming])
        if coming.exception() is None and (ahead := coming.result()) is not None:
            self._roll_back(ahead)

    def _roll_back(self, ahead: Ahead) -> None:
        """Roll back the transaction a batch's contents were written ahead in."""
        try:
            ahead.stack.__exit__(InterruptedError, InterruptedError("not written"), None)
        except Exception:  # a broken connection: it goes, the ingest's own error is the one to report
            if ahead.conn is self._spare:
                self._spare = None
            ahead.conn.close()

    def _end_deferral(self) -> None:
        """Build the bucket index an ingest deferred, in a transaction of its own."""
        if self._memory is None:
            return
        self._memory = None
        with (
            translated(f"building the bucket index of {self.name!r}"),
            self._clock.stage("build the deferred bucket index"),
            transaction(self._conn),
        ):
            self._lock()
            buckets.create_index(self._scope)

    def _abandon_deferral(self) -> None:
        """After a failed ingest, still build the deferred index if the connection allows: queries
        would scan the partition until the next write built it."""
        try:
            self._end_deferral()
        except Exception:  # the ingest's own error is the one to report
            self._memory = None

    def _next(
        self, upcoming: Future[tuple[tuple[Batch, Sketch] | None, Future[Batch] | None]]
    ) -> tuple[Batch, Sketch, Future[Batch]] | None:
        """The next prepared batch and the reading of the one after it, timing the wait for them."""
        with self._clock.stage("wait for the next batch"):
            prepared, following = upcoming.result()
        if prepared is None or following is None:
            return None
        return prepared[0], prepared[1], following

    def remove(self, ids: Iterable[str]) -> int:
        """Remove documents by id with their pairs; returns how many were found."""
        wanted = list(dict.fromkeys(ids))
        for i, doc_id in enumerate(wanted):
            if not isinstance(doc_id, str):
                raise InputError(f"id {i}: expected a string, got {type(doc_id).__name__}")
        if not wanted:
            return 0
        with translated(f"removing documents from {self.name!r}"), transaction(self._conn):
            self._lock()
            found, content_ids = document_rows.delete_by_external_id(self._scope, wanted)
            self._drop_orphans(content_ids)
            catalog.touch(self._scope)
        return len(found)

    def rebuild(self, config: IndexConfig, batch_size: int = DEFAULT_BATCH_SIZE) -> None:
        """Store ``config`` and recompute buckets, pairs and clusters under it, in one transaction:
        from the stored signatures when only the banding changes, else from the stored texts."""
        rebands = self.config.rebands_only(config)
        if not rebands and not self.config.store_text:
            raise ParamsError(
                f"collection {self.name!r} stores no text, so only threshold, bands and rows can change "
                f"(asked: {'; '.join(self.config.params.differences(config.params))})"
            )
        old = self.config, self.sketcher
        try:
            with translated(f"rebuilding {self.name!r}"), transaction(self._conn):
                self._lock()
                self.config, self.sketcher = config, Sketcher(config.params)
                catalog.set_params(self._scope, config.params.to_dict(), config.threshold)
                if rebands:
                    self._reband()
                else:
                    document_rows.stash(self._scope)
                    catalog.clear(self._scope)
                    start = 0
                    for rows in document_rows.stashed(self._scope, batch_size):
                        batch = Batch(start, *(list(column) for column in zip(*rows, strict=True)))
                        self._write(batch, self.sketcher.sketch(batch.texts), None, may_defer=start == 0)
                        start += len(batch)
                    if self._memory is not None:  # one transaction: nobody else wrote meanwhile
                        self._memory = None
                        buckets.create_index(self._scope)
        except BaseException:
            self.config, self.sketcher = old
            self._memory = None
            raise

    # -- one batch -------------------------------------------------------------------------------

    def _write(
        self,
        batch: Batch,
        sketch: Sketch,
        pool: ThreadPoolExecutor | None,
        *,
        may_defer: bool,
        pre: Prework | None = None,
    ) -> AddResult:
        """Write one checked and sketched batch inside the caller's transaction. With ``pool``, the
        stored buckets are probed on the second connection meanwhile, and content ids are taken
        there too; without it (a rebuild, one transaction) they are taken in this one.
        ``may_defer``: the first batch of an ingest, which defers the bucket index if the collection
        is empty. ``pre``: what the batch did before the lock; its probe stands if nobody wrote
        since, and its contents if nobody stored or dropped one it counted on."""
        scope, clock = self._scope, self._clock
        written = pre.written if pre is not None else None
        rows_written = pre is not None and pre.bucket_rows
        with clock.stage("lock, match ids and content hashes"):
            row = self._lock()
            if may_defer and row.next_content_id == 1:
                self._memory = IngestMemory()
                buckets.drop_index(scope)  # the partition is empty; a rollback restores the index
            elif self._memory is not None and row.writes != self._writes:
                self._memory = None  # another writer came between: this batch finds the index or builds it
            if self._memory is None:
                # What is committed: the batch's own contents, written before the lock, are not.
                if written is None:
                    stored = document_rows.match(scope, batch.ids, sketch.content_hashes)
                else:
                    second = self.second_scope()
                    with second.conn.transaction():
                        stored = document_rows.match(second, batch.ids, sketch.content_hashes)
                indexed = row.next_content_id == 1 or buckets.has_index(scope)
            else:
                stored = self._memory_match(self._memory, sketch.content_hashes)
                indexed = False
        with clock.stage("plan"):
            plan = self._plan(batch, sketch, stored, row, indexed=indexed)
            new_hashes = plan.new_hashes(sketch)
            if written is not None:
                id_of = dict(zip(written.new_hashes(sketch), written.new_ids.tolist(), strict=True))
                keeps_index = not (rows_written and plan.bulk)
                if keeps_index and all(h in id_of for h in new_hashes):
                    # Another writer may have stored some of the batch's new texts since its
                    # snapshot: what it wrote for those goes, the rest stands.
                    stale = id_of.keys() - set(new_hashes)
                    if stale:
                        self._withdraw(sorted(id_of[h] for h in stale), written, rows_written)
                    ids = np.array([id_of[h] for h in new_hashes], dtype=np.int64)
                    plan = plan.with_new_ids(ids, written.first_new)
                else:
                    # Another writer dropped a content the batch reused: a text is new now that was
                    # not then. Everything it wrote goes, and is written again with fresh ids.
                    self._withdraw(written.new_ids.tolist(), written, rows_written)
                    written, rows_written = None, False
            if written is None and plan.new_ids.size:
                plan = plan.rebased(self._reserve(plan.new_ids.size, here=pool is None))
        if self._memory is not None and plan.replaced_docs:
            # Never in an ingest that began on an empty collection with distinct ids; if it were,
            # the rows held would go stale with the deletes: the bulk path reads the partition.
            self._memory = None
        if self._memory is not None:
            self._memory.add_contents(new_hashes, plan.new_ids.tolist())
        probe: Future[tuple[np.ndarray, ...]] | None = None
        probing = self._memory is None and not plan.bulk and plan.keys.shape[0] > 0
        if probing and pre is not None and pre.stored and pre.writes == row.writes:
            probe = Future()  # nothing was committed since its snapshot: its probe is this one's
            probe.set_result(pre.stored)
        elif probing and pool is not None:
            # It sees what was committed before this batch, which is everything stored, since this
            # transaction holds the collection's lock, and nothing of this batch.
            probe = pool.submit(self._probe, plan.keys)
        with clock.stage("delete replaced documents"):
            old_contents = document_rows.delete(scope, plan.replaced_docs) if plan.replaced_docs else []
        if plan.new_ids.size and written is None:
            with clock.stage("contents and signatures: binary COPY"):
                self._insert_contents(plan, sketch)
        positions = plan.doc_positions.tolist()
        # With the bucket rows held in memory, the documents go in on a worker (this connection is
        # its own until it is done) while this thread finds and verifies the batch's candidates,
        # reading on the second connection: the server writes the documents meanwhile (0.88x the
        # 1M ingest's wall time in an alternated A/B of bench_profile.py, 106.7 and 112.2 s
        # against 122.4 and 125.3 s).
        overlapped = pool is not None and self._memory is not None and not old_contents

        def write_documents() -> None:
            with clock.stage("worker: documents: binary COPY" if overlapped else "documents: binary COPY"):
                document_rows.insert(
                    scope,
                    plan.doc_ids,
                    [batch.ids[i] for i in positions],
                    plan.doc_contents,
                    [batch.texts[i] if self.config.store_text else None for i in positions],
                    [batch.metas[i] for i in positions],
                )

        documents_written = pool.submit(write_documents) if pool is not None and overlapped else None
        if documents_written is None:
            write_documents()
        try:
            if documents_written is not None:
                self._write_ahead()
            with clock.stage("drop orphaned contents"):
                dropped = self._drop_orphans(old_contents) if old_contents else []
            new_pairs = self._pair_new_contents(
                plan,
                sketch,
                probe,
                dropped,
                pre.verdicts if pre else None,
                rows_written=rows_written,
                documents_written=documents_written,
            )
        finally:
            if documents_written is not None:
                futures.wait([documents_written])  # never leave the worker on this connection
        if documents_written is not None:
            documents_written.result()  # its error, if this thread had none
        with clock.stage("advance the id counters"):
            self._writes = catalog.advance(scope, plan.next_doc_id)
        grown = plan.new_ids.size
        # Contents stored before this batch: those below its ids (a batch that took its ids before
        # its turn finds them counted in the row).
        if grown >= ANALYZE_AFTER and grown > plan.first_new - 1 and not scope.distributed:
            with clock.stage("refresh the planner's statistics"):
                statistics.refresh_planner_statistics(scope)
        replaced = len(plan.replaced_docs)
        return AddResult(plan.doc_ids.size - replaced, replaced, plan.unchanged, new_pairs, plan.empty)

    def _insert_contents(self, plan: BatchPlan, sketch: Sketch, scope: Scope | None = None) -> None:
        """Store the plan's new contents and their signatures (binary COPY in ``contents.insert``),
        on ``scope`` (this writer's, unless given)."""
        contents.insert(
            scope or self._scope,
            plan.new_ids,
            plan.new_hashes(sketch),
            sketch.shingle_counts[plan.new_positions],
            sketch.signatures[plan.new_positions],
        )

    def _withdraw(self, content_ids: list[int], written: BatchPlan, with_rows: bool) -> None:
        """Delete contents and signatures the batch wrote before its turn, and their bucket rows
        ``with_rows`` (nothing else names them yet). A DELETE, not a rollback to a savepoint, which
        would also release the lock taken since."""
        with self._clock.stage("contents written before the lock, withdrawn"):
            if with_rows:
                going = np.isin(written.bearing_ids, np.asarray(content_ids, dtype=np.int64))
                if going.any():
                    buckets.delete(self._scope, *bucket_rows(written.bearing_ids[going], written.keys[going]))
            contents.delete(self._scope, content_ids)

    def _reserve(self, count: int, *, here: bool) -> int:
        """Take ``count`` content ids: in this transaction (``here``: it may already hold the
        collection's row, as a rebuild does), else at once on the second connection, so that the
        row is held for no longer than the update itself."""
        return catalog.reserve(self._scope if here else self.second_scope(), count)

    def _second(self) -> Connection:
        """The second connection (probes, snapshots, id reservations), opened on first use."""
        if self._reader is None:
            self._reader = connect(self._url)
        return self._reader

    def second_scope(self) -> Scope:
        """This writer's scope on its second connection (opened on first use); between the writer's
        own statements, a reader such as ``Index.check`` may run transactions on it."""
        return self._scope_on(self._second())

    def _plan(
        self,
        batch: Batch,
        sketch: Sketch,
        stored: Sequence[document_rows.Match],
        row: catalog.CollectionRow,
        *,
        indexed: bool,
    ) -> BatchPlan:
        """``plan_batch`` of the batch against what is ``stored`` and the collection's counters."""
        return plan_batch(
            batch,
            sketch,
            stored,
            row.next_content_id,
            row.next_doc_id,
            store_text=self.config.store_text,
            indexed=indexed,
            band_keys=self.sketcher.band_keys,
        )

    @staticmethod
    def _memory_match(memory: IngestMemory, hashes: Sequence[bytes]) -> list[document_rows.Match]:
        """What is stored for a batch while the index is deferred, read from memory: only this
        ingest has written, with ids distinct in its input, so no id is stored and a stored
        content is one of its own."""
        found = ((position, memory.content_of(h)) for position, h in enumerate(hashes))
        return [document_rows.Match(p, None, None, c, None, None) for p, c in found if c is not None]

    def _probe(self, keys: npt.NDArray[np.int64]) -> tuple[np.ndarray, ...]:
        """Stored (band, bucket, content) rows sharing a bucket with ``keys``, read on the second
        connection."""
        scope = self.second_scope()
        with scope.conn.transaction():
            return buckets.members_of(scope, *distinct_keys(keys))

    def _lock(self) -> catalog.CollectionRow:
        """Lock the collection's row for this transaction and check it is still the one opened."""
        row = catalog.get(self._scope, self.name, lock=True)
        if row is None or row.collection_id != self._scope.collection_id:
            raise CollectionNotFoundError(
                f"collection {self.name!r} was dropped or rebuilt since it was opened"
            )
        Params.from_dict(row.params).require_same(self.config.params, "stored", "opened with")
        return row

    def _pair_new_contents(
        self,
        plan: BatchPlan,
        sketch: Sketch,
        probe: Future[tuple[np.ndarray, ...]] | None,
        dropped: Sequence[int],
        verdicts: dict[tuple[int, int], float] | None = None,
        *,
        rows_written: bool = False,
        documents_written: Future[None] | None = None,
    ) -> int:
        """Bucket the new contents, find and verify their pairs, store them and merge clusters.

        ``probe``, when given, yields the stored members of the new contents' buckets as read on
        the second connection; contents this transaction ``dropped`` are taken out of them.
        ``verdicts``: candidate pairs judged before the lock (``Prework``), not verified again.
        ``rows_written``: the bucket rows went in before the lock (into the index, which stayed).
        ``documents_written``: the batch's documents COPY, running on this writer's connection:
        candidates are found and verified meanwhile (reading on the second connection), and the
        connection is used once it is done.
        """
        scope, clock = self._scope, self._clock

        def connection_free() -> None:
            if documents_written is not None:
                with clock.stage("wait for the documents COPY"):
                    documents_written.result()

        if plan.bearing_ids.size == 0:
            return 0
        rows = bucket_rows(plan.bearing_ids, plan.keys)
        stored: tuple[np.ndarray, ...]
        memory = self._memory
        # What the memory path writes, after its candidates are verified.
        write_held: Callable[[], None] = connection_free
        if memory is not None:
            # The partition holds only this ingest's rows, all of them in memory too.
            with clock.stage("deferred: look up and hold bucket rows in memory"):
                stored = memory.add(*rows)
            with clock.stage("group buckets"):
                groups = bucket_groups(*(np.concatenate([s, n]) for s, n in zip(stored, rows, strict=True)))

            def write_held() -> None:
                connection_free()
                with clock.stage("deferred: COPY bucket rows, no index"):
                    buckets.insert(scope, *rows)
                if memory.rows >= DEFERRED_ROWS:
                    with clock.stage("build the deferred bucket index"):
                        buckets.create_index(scope)
                    self._memory = None
        elif plan.bulk:
            with clock.stage("bulk: drop the bucket index, COPY bucket rows"):
                buckets.drop_index(scope)
                buckets.insert(scope, *rows)
            with clock.stage("bulk: read shared buckets"):
                shared = buckets.shared_buckets(scope)
            with clock.stage("group buckets"):
                groups = bucket_groups(*shared)
            with clock.stage("bulk: build the bucket index"):
                buckets.create_index(scope)
        else:
            # Stored members of the batch's buckets (few rows), then the batch's own rows, grouped
            # in memory: nothing the batch wrote is read back.
            if probe is None:
                # No pool (a rebuild): never a batch that wrote before its turn, which has one.
                with clock.stage("probe stored buckets"):
                    stored = buckets.members_of(scope, *distinct_keys(plan.keys))
                with clock.stage("bucket rows: binary COPY into the index"):
                    buckets.insert(scope, *rows)
            else:
                if not rows_written:
                    with clock.stage("bucket rows: binary COPY into the index"):
                        buckets.insert(scope, *rows)  # while the probe may still run
                with clock.stage("wait for the probe of stored buckets"):
                    stored = probe.result()
                if len(dropped):
                    alive = ~np.isin(stored[2], np.asarray(dropped, dtype=np.int64))
                    stored = tuple(column[alive] for column in stored)
            with clock.stage("group buckets"):
                # Contents stored by writers that took their ids after this batch (possible when it
                # took them before its turn) are above first_new; negated, they sort below it, so
                # that the kernel pairs them with new contents only.
                far = stored[2] >= plan.first_new
                if far.any():
                    stored = (stored[0], stored[1], np.where(far, -stored[2], stored[2]))
                groups = bucket_groups(*(np.concatenate([s, n]) for s, n in zip(stored, rows, strict=True)))
        with clock.stage("candidate pairs"):
            cand = candidate_pairs(groups, first_new=plan.first_new)
            cand[:, 0] = np.abs(cand[:, 0])
        found = None
        if cand.shape[0] and verdicts:  # prework's batches, never in memory nor beside the COPY
            found = self._verify_unjudged(cand, plan, sketch, verdicts)
        elif cand.shape[0]:
            # Stored contents read on the second connection while this one is busy: all are
            # committed (the batch's own come from its sketch).
            reading = self.second_scope() if documents_written is not None else None
            found = self._verify(cand, plan, sketch, reading)
        write_held()
        if found is None:
            return 0
        self._store_pairs(*found)
        return int(found[0].size)

    def _verify_unjudged(
        self,
        cand: npt.NDArray[np.int64],
        plan: BatchPlan,
        sketch: Sketch,
        verdicts: dict[tuple[int, int], float],
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``_verify`` of the candidates without a verdict; the others as judged before."""
        found = [verdicts.get(k) for k in pair_keys(cand, plan)]
        judged = np.array([v is not None for v in found], dtype=bool)
        earlier = np.array([-1.0 if v is None else v for v in found])
        kept = judged & (earlier >= 0)
        if judged.all():
            return cand[kept, 0], cand[kept, 1], earlier[kept]
        left, right, sim = self._verify(cand[~judged], plan, sketch)
        return (
            np.concatenate([cand[kept, 0], left]),
            np.concatenate([cand[kept, 1], right]),
            np.concatenate([earlier[kept], sim]),
        )

    def _prework(self, batch: Batch, sketch: Sketch) -> Prework | None:
        """Before the batch's turn at the lock, inside its transaction: probe and verify it against
        what is committed, in one snapshot on the second connection, then take ids for its new
        contents and COPY them with their signatures. None where the batch will be written in
        bulk or with the bucket index deferred, which find candidates their own way."""
        second = self.second_scope()
        with second.conn.transaction():
            read_snapshot(second.conn, read_only=False)  # members_of may fill a temporary table
            row = catalog.get(second, self.name)
            if row is None or row.collection_id != second.collection_id or row.next_content_id == 1:
                return None
            if self._memory is not None or not buckets.has_index(second):
                return None
            stored = document_rows.match(second, batch.ids, sketch.content_hashes)
            plan = self._plan(batch, sketch, stored, row, indexed=True)
            members: tuple[np.ndarray, ...] = ()
            verdicts: dict[tuple[int, int], float] = {}
            if plan.bearing_ids.size:
                members = buckets.members_of(second, *distinct_keys(plan.keys))
                rows = bucket_rows(plan.bearing_ids, plan.keys)
                groups = bucket_groups(*(np.concatenate([m, n]) for m, n in zip(members, rows, strict=True)))
                cand = candidate_pairs(groups, first_new=plan.first_new)
                if cand.shape[0]:
                    left, right, sim = self._verify(cand, plan, sketch, second)
                    verdicts = dict.fromkeys(pair_keys(cand, plan), -1.0)
                    accepted = pair_keys(np.stack([left, right], axis=1), plan)
                    verdicts.update(zip(accepted, sim.tolist(), strict=True))
        if not plan.new_ids.size:
            return Prework(row.writes, members, verdicts)
        plan = plan.rebased(self._reserve(plan.new_ids.size, here=False))
        with self._clock.stage("contents and signatures: binary COPY"):
            self._insert_contents(plan, sketch)
        # Its bucket rows too, where the partition's index stands and nobody is building or
        # dropping it (an ingest into an empty collection defers it): see buckets.hold_indexed.
        with_rows = bool(plan.bearing_ids.size) and buckets.hold_indexed(self._scope)
        if with_rows:
            with self._clock.stage("bucket rows: binary COPY into the index"):
                buckets.insert(self._scope, *bucket_rows(plan.bearing_ids, plan.keys))
        return Prework(row.writes, members, verdicts, plan, with_rows)

    def _verify(
        self,
        cand: npt.NDArray[np.int64],
        plan: BatchPlan | None,
        sketch: Sketch | None,
        scope: Scope | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The candidate pairs whose similarity (exact, or estimated without text) reaches the
        threshold. The plan's new contents are the batch's (in ``sketch``); the others are read
        from the store, on ``scope`` (this writer's, unless given)."""
        threshold, num_perm = self.config.threshold, self.config.params.num_perm
        scope = scope or self._scope
        ids = np.unique(cand)
        is_new = plan.is_new(ids) if plan is not None else np.zeros(ids.size, dtype=bool)
        old, new = ids[~is_new], ids[is_new]
        # Sketch rows of the batch's new contents.
        new_rows = plan.new_positions[plan.slots(new)] if plan is not None else np.empty(0, np.int64)
        # Local row r < len(old) is old[r]; the rest follow new's order.
        local = np.empty(ids.size, dtype=np.int64)
        local[np.flatnonzero(~is_new)] = np.arange(old.size)
        local[np.flatnonzero(is_new)] = old.size + np.arange(new.size)
        clock = self._clock
        with clock.stage("verify: read stored signatures"):
            old_ids, old_sigs = contents.signatures(scope, old.tolist(), num_perm)
        if old_ids.size != old.size:
            raise SchemaError(f"{old.size - old_ids.size} stored contents have no signature")
        sigs = old_sigs if sketch is None else np.concatenate([old_sigs, sketch.signatures[new_rows]])
        left, right = local[np.searchsorted(ids, cand[:, 0])], local[np.searchsorted(ids, cand[:, 1])]
        with clock.stage("verify: signature agreement"):
            agree = signature_agreement(sigs, left, right)
        if not self.config.store_text:
            ok = agree >= threshold
            return cand[ok, 0], cand[ok, 1], agree[ok]
        hopeful = agree >= prefilter_floor(threshold, num_perm)
        cand, left, right = cand[hopeful], left[hopeful], right[hopeful]
        used = np.unique(np.concatenate([left, right]))
        needed = used[used < old.size]
        with clock.stage("verify: read stored texts"):
            stored_texts = document_rows.texts(scope, old[needed].tolist())
        with clock.stage("verify: shingle sets and exact Jaccard"):
            # Texts in few pairs each are compared as shingled (a hash table a pair); sorting a text's
            # set once pays where it is in many (a large cluster's, which every member pairs with).
            unsorted = cand.shape[0] <= UNSORTED_PAIRS_PER_TEXT * used.size
            old_sets = self.sketcher.shingles(
                [stored_texts[i] for i in old[needed].tolist()], unique=not unsorted
            )
            # Shingle sets in local row order: old rows that are not needed get empty sets.
            lengths = np.zeros(old.size, dtype=np.int64)
            lengths[needed] = old_sets.lengths()
            old_sets = Ragged(old_sets.values, np.r_[0, np.cumsum(lengths)].astype(np.int64))
            if unsorted:
                # New local row old.size + k is the sketch's row new_rows[k].
                rows = np.r_[np.arange(old.size), old.size + new_rows].astype(np.int64)
                parts = [old_sets] if sketch is None else [old_sets, *sketch.shingles]
                exact = exact_jaccard_unsorted(parts, parts, rows[left], rows[right])
            else:
                sets = old_sets if sketch is None else concat(old_sets, sketch.distinct_shingles(new_rows))
                exact = exact_jaccard(sets, left, right)
        ok = exact >= threshold
        return cand[ok, 0], cand[ok, 1], exact[ok]

    def _store_pairs(
        self, left: npt.NDArray[np.int64], right: npt.NDArray[np.int64], sim: npt.NDArray[np.float64]
    ) -> None:
        """Store verified pairs and join the clusters they connect (a cluster's label is its
        smallest content id)."""
        if left.size == 0:
            return
        left, right = np.minimum(left, right), np.maximum(left, right)  # stored as content_a < content_b
        with self._clock.stage("pairs: binary COPY"):
            verified_pairs.insert(
                self._scope, left, right, sim, EXACT if self.config.store_text else ESTIMATE
            )
        with self._clock.stage("merge clusters"):
            ends = np.unique(np.concatenate([left, right]))
            labels = contents.cluster_labels(self._scope, ends.tolist())
            label_of = np.array([labels[i] for i in ends.tolist()], dtype=np.int64)
            la, lb = label_of[np.searchsorted(ends, left)], label_of[np.searchsorted(ends, right)]
            nodes = np.unique(label_of)
            merged = component_labels(nodes, la, lb)
            changed = merged != nodes
            if changed.any():
                contents.relabel_clusters(self._scope, nodes[changed].tolist(), merged[changed].tolist())

    def _drop_orphans(self, content_ids: Sequence[int]) -> list[int]:
        """Delete contents no document points at any more (with buckets, signatures, pairs) and
        recompute the clusters they were in, which may have split."""
        scope = self._scope
        orphan_ids, clusters_hit = contents.orphans(scope, sorted(set(content_ids)))
        if not orphan_ids:
            return []
        ids, sigs = contents.signatures(scope, orphan_ids, self.config.params.num_perm)
        buckets.delete(scope, *bucket_rows(ids, self.sketcher.band_keys(sigs)))
        contents.delete(scope, orphan_ids)
        members = contents.cluster_members(scope, sorted(set(clusters_hit)))
        if members:
            left, right = verified_pairs.among(scope, members)
            contents.set_labels(scope, members, component_labels(members, left, right).tolist())
        return orphan_ids

    def _reband(self) -> None:
        """Re-bucket every content from its stored signature and recompute all pairs and clusters."""
        scope = self._scope
        ids, sigs = contents.signatures(scope, None, self.config.params.num_perm)
        bearing = ~empty_rows(sigs) if ids.size else np.zeros(0, dtype=bool)
        ids, sigs = ids[bearing], sigs[bearing]
        verified_pairs.delete_all(scope)
        buckets.truncate(scope)
        buckets.drop_index(scope)
        contents.reset_labels(scope)
        if ids.size:
            buckets.insert(scope, *bucket_rows(ids, self.sketcher.band_keys(sigs)))
        groups = bucket_groups(*buckets.shared_buckets(scope))
        buckets.create_index(scope)
        cand = candidate_pairs(groups, first_new=0)
        if cand.shape[0]:
            self._store_pairs(*self._verify(cand, None, None))
