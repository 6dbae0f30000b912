"""Writing an ingest's next batch's new contents ahead, while this batch's documents are COPYed.

An ingest that defers the bucket index (``bucket_members.Deferral``) writes each batch's documents on a
worker while the writing thread verifies; meanwhile a thread of its own waits for the next batch's
sketch, plans its new contents from memory, takes their ids (``catalog.reserve``, committed at
once) and COPYs them with their signatures on the other writing connection, in a transaction it
leaves open (``Ahead``). That transaction then writes the rest of the next batch, in its turn at
the lock, as a batch does that wrote before its turn (``prework``): if another writer came between,
what it stored meanwhile is matched again and the contents it made stale are withdrawn. So two
server processes write at once, where one wrote all of an ingest in turn; the batches'
transactions alternate between the writer's connection and the spare one.
"""

from __future__ import annotations

from concurrent import futures
from concurrent.futures import Executor, Future
from contextlib import ExitStack
from dataclasses import dataclass

from neardup.core.ingest_memory import IngestMemory
from neardup.core.sketch import Sketch
from neardup.errors import InternalError
from neardup.ingest.bucket_members import Deferral
from neardup.ingest.context import BatchContext, Connections
from neardup.ingest.plan import Batch, BatchPlan, plan_batch
from neardup.ingest.reading import Prepared, Upcoming
from neardup.ingest.store import insert_contents
from neardup.stages import stage, submit, timed
from neardup.storage import catalog
from neardup.storage.connect import Connection, transaction
from neardup.storage.scope import Scope


@dataclass(frozen=True)
class Ahead:
    """The next batch's new contents and signatures, COPYed ahead on the spare connection in the
    transaction that then writes the rest of that batch: the batch, the connection, its open
    transaction (``stack``), and the plan with the ids reserved for those contents."""

    batch: Batch
    conn: Connection
    stack: ExitStack
    plan: BatchPlan


class WritingAhead:
    """An ingest's writing ahead: ``start`` while a batch's documents are COPYed, ``take`` at the
    next batch, ``drop`` when the ingest ends (what is left then was written for no batch)."""

    def __init__(
        self, pool: Executor, connections: Connections, upcoming: Upcoming, ctx: BatchContext
    ) -> None:
        self._pool, self._connections, self._upcoming, self._ctx = pool, connections, upcoming, ctx
        self._coming: Future[Ahead | None] | None = None

    def start(self, memory: IngestMemory, busy: Connection) -> None:
        """Have the next batch's new contents written ahead on the writing connection that is not
        ``busy`` (the one this batch writes on)."""
        scope = self._connections.other_than(busy)
        self._coming = submit(self._pool, self._contents_ahead, self._upcoming.next, memory, scope)

    def take(self, batch: Batch) -> Ahead | None:
        """What was written ahead for ``batch`` (the next one), if anything; its transaction is
        the batch's."""
        coming, self._coming = self._coming, None
        if coming is None:
            return None
        with timed("wait for the contents COPY ahead"):
            ahead = coming.result()
        if ahead is not None and ahead.batch is not batch:  # never: it is always the next one
            self._roll_back(ahead)
            raise InternalError(f"contents written ahead for another batch than {batch.where}")
        return ahead

    def drop(self) -> None:
        """Roll back what was written ahead for a batch that will not be written (an error in the
        one before it)."""
        coming, self._coming = self._coming, None
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
            self._connections.discard(ahead.conn)

    def _contents_ahead(self, upcoming: Future[Prepared], memory: IngestMemory, scope: Scope) -> Ahead | None:
        """Write the next batch's new contents ahead on ``scope``; None if there is no next batch,
        it has none, or it failed to be read (its error surfaces where the loop takes it, after
        this batch has committed). Only this thread uses ``scope``'s connection and reads
        ``memory``'s content ids meanwhile; the writing thread adds to them only in the next
        batch's plan, after this is done."""
        try:
            prepared, _ = upcoming.result()
        except Exception:
            return None
        if prepared is None:
            return None
        batch, sketch = prepared
        plan = self._plan(batch, sketch, memory, scope)
        if plan is None:
            return None
        with ExitStack() as stack:  # its transaction stays open only if the COPY succeeded
            stack.enter_context(transaction(scope.conn))
            with timed("worker: ahead: the next batch's contents and signatures COPY"):
                insert_contents(scope, plan, sketch, self._ctx.config.params)
            return Ahead(batch, scope.conn, stack.pop_all(), plan)

    @stage("worker: ahead: plan the next batch's contents, take their ids")
    def _plan(self, batch: Batch, sketch: Sketch, memory: IngestMemory, scope: Scope) -> BatchPlan | None:
        """The plan of the batch's new contents against ``memory``, with ids taken for them."""
        ctx = self._ctx
        stored = Deferral.match(memory, sketch.content_hashes)
        plan = plan_batch(
            batch,
            sketch,
            stored,
            1,
            1,
            store_text=ctx.config.store_text,
            indexed=False,
            band_keys=ctx.sketcher.band_keys,
        )
        if not plan.new_ids.size:
            return None
        # At once and for good, as concurrent writers take theirs: the batch before holds the
        # writer lock, not the collection's row (until it advances the counters at its end).
        return plan.rebased(catalog.reserve(scope, plan.new_ids.size))
