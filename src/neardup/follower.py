"""Following a table of an application's database: its rows indexed, then kept up with.

``install`` puts statement triggers on the table that queue the id of every row a write touches
(``storage.follow_queue``), then queues every id already there: the triggers stand before the snapshot is
read, so a write during it is queued twice at worst, never missed. A ``Follower`` drains the queue
in batches: for each queued id, the row as it is now is added (or replaces the stored document), or
the document is removed when the row is gone. Each batch is one transaction of the index; when the
index lives in the table's own database the batch's changes leave the queue inside that
transaction, else just after it commits, and a batch applied again after a crash in between
changes nothing. So across crashes no change is lost, and none is applied twice to any effect.

A row the index cannot hold (an id too long, a text over the length limit, an id two rows share)
is skipped with a warning naming the table and the row, and the rest of its batch applied: its
change leaves the queue with the others, and the row is looked at again when a write fixes it.
A follower that ``run``s connects again after its databases went away (a restart), trying a
bounded number of times with a growing wait.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from neardup.errors import (
    CollectionNotFoundError,
    DatabaseConnectionError,
    DatabaseError,
    InputError,
    InternalError,
    SchemaError,
)
from neardup.index import Index
from neardup.records import Document, check_id, document_of
from neardup.result import AddResult
from neardup.storage import follow_queue as queue
from neardup.storage.connect import Connection, connect, redacted, transaction, translated
from neardup.storage.names import DEFAULT_SCHEMA, check_schema_name
from neardup.text_limits import DEFAULT_MAX_TEXT_LENGTH

# Queued changes applied per transaction: each is one row read and one document written.
DEFAULT_FOLLOW_BATCH = 5_000
# How long a follower waits for the one before it to let go (a killed one's session ends when its
# server notices the closed connection).
LOCK_WAIT_SECONDS = 30.0
# Tries in a row to connect again after a database went away, and the waits before them (the last
# repeated): about five minutes in all, enough for a restart or a failover, not for an outage.
RECONNECT_TRIES = 10
RECONNECT_WAITS = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0)

Warn = Callable[[str], None]


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
                "id column": [self.id_column],
                "text column": [self.text_column],
                "meta column": list(self.meta_columns),
            },
        )
        return found


@dataclass(frozen=True)
class Applied:
    """What a drain did: queued changes applied, documents added or replaced, documents removed,
    and rows skipped (each reported as it was)."""

    changes: int = 0
    added: AddResult = field(default_factory=AddResult)
    removed: int = 0
    skipped: int = 0

    def __add__(self, other: Applied) -> Applied:
        return Applied(
            self.changes + other.changes,
            self.added + other.added,
            self.removed + other.removed,
            self.skipped + other.skipped,
        )


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
        max_text_length: int = DEFAULT_MAX_TEXT_LENGTH,
        warn: Warn | None = None,
    ) -> None:
        """Open the collection in the database at ``url``, check the table and its triggers, and
        take the follower's lock (DatabaseError if another follower keeps it ``lock_wait`` seconds).
        A row whose text is longer than ``max_text_length`` characters is skipped, as ``add``
        refuses it; ``warn`` is told of each row skipped and each connection lost and made again."""
        self.source = source
        self.max_text_length = max_text_length
        self._target = (url, collection, schema, lock_wait)
        self._warn: Warn = warn or (lambda _: None)
        self._connect()

    def _connect(self) -> None:
        """Connect to the table's database, check the table and take the lock, then open the index."""
        source, (url, collection, schema, lock_wait) = self.source, self._target
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

    def _reconnect(self) -> None:
        """Drop both connections (broken, or as good as) and make them again."""
        with contextlib.suppress(Exception):
            self.index.close()
        with contextlib.suppress(Exception):
            self._conn.close()
        self._connect()

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
            rows = queue.rows(
                self._conn,
                self.table,
                src.id_column,
                src.text_column,
                src.meta_columns,
                ids,
                self.max_text_length,
            )
        records, gone, skipped = self._checked(ids, rows)
        for problem in skipped:
            self._warn(problem)
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
        return Applied(len(queued), added, removed, len(skipped))

    def _checked(
        self, ids: list[str], rows: list[tuple[str, str | None, int, Any]]
    ) -> tuple[list[Document], list[str], list[str]]:
        """The documents of ``rows``, the ids of ``ids`` whose rows are gone, and what is wrong with
        each row skipped (an id the index cannot hold, a text over the limit, an id two rows share)."""
        shared = Counter(row[0] for row in rows)
        records: list[Document] = []
        skipped: list[str] = []
        for doc_id, text, length, meta in rows:
            where = f"table {self.table}, row {doc_id!r:.80}"
            if shared[doc_id] > 1:
                continue  # said once below
            try:
                if text is None:
                    check_id(doc_id, where)
                    raise InputError(
                        f"{where}: field 'text' has {length:,} characters, over the limit of "
                        f"{self.max_text_length:,} (--max-text-length)"
                    )
                records.append(document_of(doc_id, text, meta, where))
            except InputError as exc:
                skipped.append(f"{exc}; skipped")
        for doc_id, count in shared.items():
            if count > 1:
                skipped.append(
                    f"table {self.table}, row {doc_id!r:.80}: {count} rows have this id (the id column must "
                    "be unique); skipped, the stored document left as it was"
                )
        gone: list[str] = []
        for doc_id in ids:
            if doc_id not in shared:
                try:
                    gone.append(check_id(doc_id, f"table {self.table}, row {doc_id!r:.80}"))
                except InputError as exc:
                    skipped.append(f"{exc}; skipped")
        return records, gone, skipped

    def run(
        self,
        batch_size: int = DEFAULT_FOLLOW_BATCH,
        poll: float = 60.0,
        progress: Callable[[Applied], None] | None = None,
        reconnect_tries: int = RECONNECT_TRIES,
        reconnect_waits: Sequence[float] = RECONNECT_WAITS,
    ) -> None:
        """Drain, then wait for the triggers' notification (or ``poll`` seconds) and drain again,
        until interrupted. When a database goes away (a restart), connect again after the next of
        ``reconnect_waits`` seconds (the last repeated), up to ``reconnect_tries`` times in a row;
        then DatabaseConnectionError."""
        failures = 0
        while True:
            try:
                if failures:
                    self._reconnect()
                    self._warn(f"connected again; following {self.table}")
                with translated(f"listening for changes of {self.table}"):
                    queue.listen(self._conn)
                while True:
                    done = self.drain(batch_size)
                    failures = 0
                    if done.changes and progress is not None:
                        progress(done)
                    with translated(f"waiting for changes of {self.table}"):
                        for _ in self._conn.notifies(timeout=poll, stop_after=1):
                            pass
            except DatabaseConnectionError as exc:
                if failures >= reconnect_tries:
                    raise DatabaseConnectionError(
                        f"{exc} (gave up after {reconnect_tries} tries to connect again)"
                    ) from exc
                wait = reconnect_waits[min(failures, len(reconnect_waits) - 1)]
                failures += 1
                self._warn(
                    f"lost the connection ({exc}); connecting again in {wait:g} s "
                    f"(try {failures} of {reconnect_tries})"
                )
                time.sleep(wait)


def _dequeue(conn: Connection, schema: str, seqs: Sequence[int]) -> None:
    """Delete applied changes inside the index's transaction; all of them must still be there."""
    deleted = queue.dequeue(conn, schema, list(seqs))
    if deleted != len(seqs):  # the lock keeps other followers out: never
        raise InternalError(f"{len(seqs) - deleted} of the changes applied left the queue meanwhile")


def _identity(url: str) -> tuple[object, ...]:
    with connect(url) as conn, translated(f"reading which database {redacted(url)} is"):
        return queue.identity(conn)


__all__ = [
    "DEFAULT_FOLLOW_BATCH",
    "RECONNECT_TRIES",
    "Applied",
    "Follower",
    "Source",
    "install",
    "open_or_create",
    "uninstall",
]
