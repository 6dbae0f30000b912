"""The catalog of collections (the collections table): one row per independent index, with its
parameters and id counters; a lock on its name is how writers to one collection take turns."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from psycopg.types.json import Jsonb

from neardup.errors import InternalError
from neardup.storage.names import KEY_TABLE, PARTITIONED_TABLES
from neardup.storage.scope import Scope


@dataclass(frozen=True)
class CollectionRow:
    """A stored collection as read from the database."""

    collection_id: int
    name: str
    params: dict[str, Any]
    threshold: float
    store_text: bool
    unicode_version: str
    next_content_id: int
    next_doc_id: int
    created_at: datetime
    updated_at: datetime
    distributed: bool
    writes: int
    """Transactions that changed the collection so far (see ``advance`` and ``touch``)."""
    keep: str = "first"
    """Which document of a cluster is its representative (``config.check_keep``)."""
    change_feed: bool = False
    """Whether its writes are recorded in the changes feed (``storage.changes``)."""
    change_retention: timedelta | None = None
    """How long the feed keeps a change (None: every one)."""


_COLUMNS = (
    "collection_id, name, params, threshold, store_text, unicode_version, "
    "next_content_id, next_doc_id, created_at, updated_at, distributed, writes, keep, "
    "change_feed, change_retention"
)


def _row(values: tuple[Any, ...] | None) -> CollectionRow | None:
    if values is None:
        return None
    params = values[2] if isinstance(values[2], dict) else json.loads(values[2])
    return CollectionRow(values[0], values[1], params, *values[3:])


def get(scope: Scope, name: str, *, lock: bool = False) -> CollectionRow | None:
    """The collection called ``name``, or None; ``lock`` first takes the collection's writer lock
    until the transaction ends, which is how writers to one collection take turns.

    The writer lock is an advisory lock on the collection's name, not a lock on its row: the row
    stays free for ``reserve``, which concurrent writers call outside their turns (and on Citus a
    ``FOR UPDATE`` on one row of a reference table locks the whole table).
    """
    if lock:
        scope.conn.execute(
            "SELECT pg_advisory_xact_lock(hashtext(%s))", (f"neardup:{scope.schema}:writer:{name}",)
        )
    query = f"SELECT {_COLUMNS} FROM {{s}}.collections WHERE name = %s"
    return _row(scope.conn.execute(scope.sql(query), (name,)).fetchone())


def all_rows(scope: Scope) -> list[CollectionRow]:
    """Every collection of the schema, by name."""
    rows = scope.conn.execute(scope.sql(f"SELECT {_COLUMNS} FROM {{s}}.collections ORDER BY name")).fetchall()
    return [r for r in map(_row, rows) if r is not None]


def reserve(scope: Scope, count: int) -> int:
    """Take ``count`` consecutive content ids for the collection and return the first. On an
    autocommit connection the ids are taken at once and for good, whoever holds the writer lock
    (a batch that fails leaves a gap, never a reused id); inside a transaction, until it ends."""
    return _take(scope, "next_content_id", count)


def _take(scope: Scope, counter: str, count: int) -> int:
    """Move the collection's ``counter`` column on by ``count``; returns where it stood."""
    row = scope.conn.execute(
        scope.sql(
            f"UPDATE {{s}}.collections SET {counter} = {counter} + %s "
            f"WHERE collection_id = %s RETURNING {counter} - %s"
        ),
        (count, scope.collection_id, count),
    ).fetchone()
    if row is None:
        raise InternalError(f"collection {scope.collection_id} has no row to take {counter} from")
    return int(row[0])


def reserve_documents(scope: Scope, name: str, count: int) -> int:
    """Take ``count`` consecutive document ids for collection ``name`` and return the first, in a
    transaction of its own under the writer lock (a writer reads the counter in its turn and
    stores it after, so the counter moves only there). Ids taken so are for the caller to hand
    out (``ingest.parallel``); a batch written with them leaves the counter as it is."""
    with scope.conn.transaction():
        if get(scope, name, lock=True) is None:
            raise InternalError(f"collection {name!r} has no row to reserve document ids from")
        return _take(scope, "next_doc_id", count)


def reserve_past(scope: Scope, counter: int) -> None:
    """Move the content id counter to ``counter`` unless it is past it already (after a rebuild
    cleared the collection, so that ids used before it are never taken again)."""
    scope.conn.execute(
        scope.sql(
            "UPDATE {s}.collections SET next_content_id = greatest(next_content_id, %s) "
            "WHERE collection_id = %s"
        ),
        (counter, scope.collection_id),
    )


def lock_name(scope: Scope, name: str) -> None:
    """Hold a lock on the collection name ``name`` in this schema until the transaction ends, so
    that processes creating the same collection take turns (the unique key would catch it anyway)."""
    scope.conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"neardup:{scope.schema}:{name}",))


def insert(
    scope: Scope,
    name: str,
    params: dict[str, Any],
    threshold: float,
    store_text: bool,
    unicode_version: str,
    distributed: bool = False,
    keep: str = "first",
    change_feed: bool = False,
    change_retention: timedelta | None = None,
) -> CollectionRow:
    """Insert a collection row and create its partitions (no rows, no bucket index yet); in a
    distributed schema the partitions are Citus tables, as their parents are. ``change_feed``:
    record its writes from the first (``storage.changes``), keeping each ``change_retention``."""
    row = _row(
        scope.conn.execute(
            scope.sql(
                "INSERT INTO {s}.collections (name, params, threshold, store_text, unicode_version, "
                "distributed, keep, change_feed, change_retention) "
                f"VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING {_COLUMNS}"
            ),
            (
                name,
                Jsonb(params),
                threshold,
                store_text,
                unicode_version,
                distributed,
                keep,
                change_feed,
                change_retention,
            ),
        ).fetchone()
    )
    if row is None:
        raise InternalError(f"inserting collection {name!r} returned no row")
    here = scope.with_collection(row.collection_id, distributed)
    for table in PARTITIONED_TABLES if not distributed else (*PARTITIONED_TABLES, KEY_TABLE):
        here.conn.execute(
            here.sql(
                f"CREATE TABLE {{{table}_p}} PARTITION OF {{s}}.{table} FOR VALUES IN ({row.collection_id})"
            )
        )
    return row


def advance(scope: Scope, next_doc_id: int) -> int:
    """Store the document id counter after a batch (content ids are taken by ``reserve``), touch
    ``updated_at`` and count the write; returns the write counter as this transaction leaves it."""
    row = scope.conn.execute(
        scope.sql(
            "UPDATE {s}.collections SET next_doc_id = %s, updated_at = now(), "
            "writes = writes + 1 WHERE collection_id = %s RETURNING writes"
        ),
        (next_doc_id, scope.collection_id),
    ).fetchone()
    if row is None:
        raise InternalError(f"collection {scope.collection_id} has no row to advance")
    return int(row[0])


def touch(scope: Scope) -> None:
    """Count a write that moves no id counter (a removal), and touch ``updated_at``."""
    scope.conn.execute(
        scope.sql(
            "UPDATE {s}.collections SET updated_at = now(), writes = writes + 1 WHERE collection_id = %s"
        ),
        (scope.collection_id,),
    )


def set_params(scope: Scope, params: dict[str, Any], threshold: float) -> None:
    """Replace the stored parameters (after a rebuild)."""
    scope.conn.execute(
        scope.sql(
            "UPDATE {s}.collections SET params = %s, threshold = %s, updated_at = now(), writes = writes + 1 "
            "WHERE collection_id = %s"
        ),
        (Jsonb(params), threshold, scope.collection_id),
    )


def set_keep(scope: Scope, keep: str) -> None:
    """Replace the stored representative policy (nothing else is recomputed: the views follow it)."""
    scope.conn.execute(
        scope.sql(
            "UPDATE {s}.collections SET keep = %s, updated_at = now(), writes = writes + 1 "
            "WHERE collection_id = %s"
        ),
        (keep, scope.collection_id),
    )


def clear(scope: Scope) -> None:
    """Remove every document, content, signature, bucket and pair of the collection; reset its ids.

    The tables listings read are emptied with DELETE, so that a listing still open on another
    connection keeps its snapshot instead of blocking this transaction (TRUNCATE waits for it, and
    is not safe for snapshots taken before it); the buckets, which no listing reads, are truncated.
    """
    for table in ("pairs", "signatures", "documents", "contents"):
        scope.conn.execute(scope.sql(f"DELETE FROM {{{table}_p}}"))
    if scope.distributed:
        scope.conn.execute(scope.sql(f"DELETE FROM {{{KEY_TABLE}_p}}"))
    scope.conn.execute(scope.sql("TRUNCATE {buckets_p}"))
    scope.conn.execute(
        scope.sql(
            "UPDATE {s}.collections SET next_content_id = 1, next_doc_id = 1, updated_at = now(), "
            "writes = writes + 1 WHERE collection_id = %s"
        ),
        (scope.collection_id,),
    )
