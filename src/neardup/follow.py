"""Following a table of an application's database: its rows indexed, then kept up with.

``install`` puts statement triggers on the table that queue the id of every row a write touches
(``storage.follow``), then queues every id already there: the triggers stand before the snapshot is
read, so a write during it is queued twice at worst, never missed. A ``Follower`` drains the queue
in batches: for each queued id, the row as it is now is added (or replaces the stored document), or
the document is removed when the row is gone. Each batch is one transaction of the index; when the
index lives in the table's own database the batch's changes leave the queue inside that
transaction, else just after it commits, and a batch applied again after a crash in between
changes nothing. So across crashes no change is lost, and none is applied twice to any effect.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from neardup.errors import CollectionNotFoundError, DatabaseError, InternalError, SchemaError
from neardup.index import Index
from neardup.records import check_id, document_of
from neardup.result import AddResult
from neardup.storage import follow as queue
from neardup.storage.connect import Connection, connect, redacted, transaction, translated
from neardup.storage.names import DEFAULT_SCHEMA, check_schema_name

# Queued changes applied per transaction: each is one row read and one document written.
DEFAULT_FOLLOW_BATCH = 5_000
# How long a follower waits for the one before it to let go (a killed one's session ends when its
# server notices the closed connection).
LOCK_WAIT_SECONDS = 30.0


@dataclass(frozen=True)
class Source:
    """A followed table: its database, ``schema.table``, id, text and metadata columns, and the
    neardup schema of that database its change queue lives in."""

    url: str
    table: str
    id_column: str
    text_column: str
    meta_columns: tuple[str, ...] = ()
    schema: str = DEFAULT_SCHEMA

    def _checked(self, conn: Connection) -> queue.Table:
        check_schema_name(self.schema)
        with translated(f"reading table {self.table!r} of {redacted(self.url)}"):
            found = queue.table(conn, self.table)
        queue.check_columns(
            found,
            {
                "--id-column": [self.id_column],
                "--text-column": [self.text_column],
                "--meta-columns": list(self.meta_columns),
            },
        )
        return found


@dataclass(frozen=True)
class Applied:
    """What a drain did: queued changes applied, documents added or replaced, documents removed."""

    changes: int = 0
    added: AddResult = field(default_factory=AddResult)
    removed: int = 0

    def __add__(self, other: Applied) -> Applied:
        return Applied(self.changes + other.changes, self.added + other.added, self.removed + other.removed)


def install(source: Source) -> int:
    """Put the queue's triggers on the table (again, if there), then queue every row it holds for
    the first indexing; returns how many rows were queued."""
    with connect(source.url) as conn:
        found = source._checked(conn)
        with translated(f"installing the triggers on {found}"), transaction(conn):
            queue.install(conn, source.schema, found, source.id_column)
        # Its own transaction, after the triggers commit: the table's writers wait only for those.
        with translated(f"queueing the rows of {found}"), transaction(conn):
            return queue.enqueue_all(conn, source.schema, found, source.id_column)


def uninstall(source: Source) -> bool:
    """Drop the table's triggers and queued changes (the queue itself once no table uses it);
    False when the table had no triggers."""
    with connect(source.url) as conn:
        with translated(f"reading table {source.table!r} of {redacted(source.url)}"):
            found = queue.table(conn, source.table)
        with translated(f"removing the triggers on {found}"), transaction(conn):
            return queue.uninstall(conn, source.schema, found)


def open_or_create(url: str, collection: str, schema: str) -> Index:
    """The collection, created with the default parameters if it does not exist (the schema
    migrated first if it is missing or behind, as ``Index.create`` does)."""
    try:
        return Index.open(url, collection, schema=schema)
    except (CollectionNotFoundError, SchemaError):
        return Index.create(url, collection, schema=schema, exist_ok=True)


class Follower:
    """Applies a followed table's queued changes to a collection (created with the default
    parameters if missing); the table's one follower into its queue while open (a session lock in
    the table's database)."""

    def __init__(
        self,
        source: Source,
        url: str,
        collection: str = "default",
        *,
        schema: str = DEFAULT_SCHEMA,
        lock_wait: float = LOCK_WAIT_SECONDS,
    ) -> None:
        """Open the collection in the database at ``url``, check the table and its triggers, and
        take the follower's lock (DatabaseError if another follower keeps it ``lock_wait`` seconds)."""
        self.source = source
        self._conn = connect(source.url)
        try:
            self.table = source._checked(self._conn)
            with translated(f"checking the triggers on {self.table}"):
                queue.require_installed(self._conn, source.schema, self.table, source.id_column)
                self._lock(lock_wait)
                self.same_database = _identity(url) == queue.identity(self._conn)
            self.index = open_or_create(url, collection, schema)
        except BaseException:
            self._conn.close()
            raise

    def _lock(self, lock_wait: float) -> None:
        deadline = time.monotonic() + lock_wait
        while not queue.try_lock(self._conn, self.source.schema, self.table):
            if time.monotonic() >= deadline:
                raise DatabaseError(
                    f"another follower of {self.table} into schema {self.source.schema!r} is running"
                )
            time.sleep(0.2)

    def close(self) -> None:
        """Close the collection, and the connection to the table's database (which lets go of the
        lock)."""
        try:
            self.index.close()
        finally:
            self._conn.close()

    def __enter__(self) -> Follower:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def pending(self) -> tuple[int, int]:
        """The table's queued changes, and the bytes of the queue on disk."""
        with translated(f"reading the queue of {self.table}"):
            return queue.queue_size(self._conn, self.source.schema, self.table)

    def drain(
        self, batch_size: int = DEFAULT_FOLLOW_BATCH, progress: Callable[[Applied], None] | None = None
    ) -> Applied:
        """Apply the changes queued so far, ``batch_size`` a transaction (changes queued meanwhile
        wait for the next drain); ``progress`` gets the running total after each."""
        with translated(f"reading the queue of {self.table}"):
            up_to = queue.last_seq(self._conn, self.source.schema, self.table)
        total = Applied()
        while batch := self._batch(up_to, batch_size):
            total += batch
            if progress is not None:
                progress(total)
        return total

    def _batch(self, up_to: int, batch_size: int) -> Applied | None:
        """Apply the oldest ``batch_size`` queued changes up to ``up_to``; None when there are none."""
        src = self.source
        with translated(f"reading the changes queued for {self.table}"):
            queued = queue.pending(self._conn, src.schema, self.table, up_to, batch_size)
            if not queued:
                return None
            ids = list(dict.fromkeys(doc_id for _, doc_id in queued))
            rows = queue.rows(self._conn, self.table, src.id_column, src.text_column, src.meta_columns, ids)
        records = [document_of(i, text, meta, f"table {self.table}, row {i!r:.80}") for i, text, meta in rows]
        kept = {r.id for r in records}
        gone = [check_id(i, f"table {self.table}, row {i!r:.80}") for i in ids if i not in kept]
        seqs = [seq for seq, _ in queued]
        if self.same_database:
            added, removed = self.index.sync(
                records, gone, also=lambda conn: _dequeue(conn, src.schema, seqs)
            )
        else:
            added, removed = self.index.sync(records, gone)
            # After a crash here the batch is applied again, to no effect: the rows are read anew.
            with translated(f"removing applied changes from the queue of {self.table}"):
                queue.dequeue(self._conn, src.schema, seqs)
        return Applied(len(queued), added, removed)

    def run(
        self,
        batch_size: int = DEFAULT_FOLLOW_BATCH,
        poll: float = 60.0,
        progress: Callable[[Applied], None] | None = None,
    ) -> None:
        """Drain, then wait for the triggers' notification (or ``poll`` seconds) and drain again,
        until interrupted."""
        with translated(f"listening for changes of {self.table}"):
            queue.listen(self._conn)
        while True:
            done = self.drain(batch_size)
            if done.changes and progress is not None:
                progress(done)
            with translated(f"waiting for changes of {self.table}"):
                for _ in self._conn.notifies(timeout=poll, stop_after=1):
                    pass


def _dequeue(conn: Connection, schema: str, seqs: Sequence[int]) -> None:
    """Delete applied changes inside the index's transaction; all of them must still be there."""
    deleted = queue.dequeue(conn, schema, list(seqs))
    if deleted != len(seqs):  # the lock keeps other followers out: never
        raise InternalError(f"{len(seqs) - deleted} of the changes applied left the queue meanwhile")


def _identity(url: str) -> tuple[object, ...]:
    with connect(url) as conn, translated(f"reading which database {redacted(url)} is"):
        return queue.identity(conn)


__all__ = ["DEFAULT_FOLLOW_BATCH", "Applied", "Follower", "Source", "install", "open_or_create", "uninstall"]
