"""A Scope: one connection, one schema, one collection; it composes SQL naming their objects."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import psycopg
from psycopg import sql

from neardup.errors import InternalError
from neardup.storage.connect import Connection
from neardup.storage.names import (
    KEY_TABLE,
    PARTITIONED_TABLES,
    bucket_index_name,
    check_schema_name,
    partition_name,
)


@lru_cache(maxsize=512)
def _compose(template: str, schema: str, collection_id: int) -> sql.Composed:
    names: dict[str, sql.Composable] = {"s": sql.Identifier(schema)}
    for table in (*PARTITIONED_TABLES, KEY_TABLE):
        # {documents_p} etc. name the collection's own partition: no pruning work per statement.
        names[f"{table}_p"] = sql.Identifier(schema, partition_name(table, collection_id))
    names["bucket_index"] = sql.Identifier(bucket_index_name(collection_id))
    names["bucket_index_q"] = sql.Identifier(schema, bucket_index_name(collection_id))
    return sql.SQL(template).format(**names)


@lru_cache(maxsize=64)
def _rendered(template: str, schema: str, collection_id: int) -> bytes:
    # Identifiers render without a connection: neardup's schema and partition names are plain
    # ASCII (check_schema_name, partition_name), the same bytes in any client encoding.
    return _compose(template, schema, collection_id).as_bytes(None)


@dataclass(frozen=True)
class Scope:
    """Where storage functions act: a connection (the caller owns its transactions), a schema, a
    collection id (0 before a collection is chosen) and whether that collection is distributed."""

    conn: Connection
    schema: str
    collection_id: int = 0
    distributed: bool = False
    _cursor: list[psycopg.Cursor[Any]] = field(default_factory=list, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_schema_name(self.schema)

    def sql(self, template: str) -> sql.Composed:
        """``template`` with ``{s}``, ``{<table>_p}`` and ``{bucket_index}`` filled in as identifiers."""
        return _compose(template, self.schema, int(self.collection_id))

    def sql_bytes(self, template: str) -> bytes:
        """``sql(template)`` rendered once to the bytes psycopg sends: for a statement run once a
        query, whose rendering psycopg would otherwise repeat at every execute, a visible share of
        a short lookup."""
        return _rendered(template, self.schema, int(self.collection_id))

    def binary_cursor(self) -> psycopg.Cursor[Any]:
        """One binary cursor kept for this scope's statements that run often (a query's lookup). A
        new cursor finds its parameters' dumpers and its columns' loaders again on its first
        execute, a visible share of a short query. Like the connection, for one thread at a
        time."""
        if not self._cursor or self._cursor[0].closed:
            self._cursor[:] = [self.conn.cursor(binary=True)]
        return self._cursor[0]

    def with_collection(self, collection_id: int, distributed: bool = False) -> Scope:
        """The same connection and schema, acting on another collection."""
        return Scope(self.conn, self.schema, collection_id, distributed)


# Planner switches turned off around a batch's lookups (see index_probes).
_PROBE_SETTINGS = ("enable_hashjoin", "enable_mergejoin", "enable_seqscan")


@contextmanager
def index_probes(conn: Connection) -> Iterator[None]:
    """Within the caller's transaction, plan joins of a batch against stored rows as one index
    probe per batch row, whatever the statistics say.

    With many batch rows the planner may choose to hash or merge against a whole partition, a scan
    that grows with the archive, and with stale statistics it has chosen a nested loop over a
    sequential scan (measured: minutes instead of a second); index probes cost the same at any size.
    After an error the transaction rolls back, and these settings with it.
    """
    conn.execute("SELECT " + ", ".join(f"set_config('{name}', 'off', true)" for name in _PROBE_SETTINGS))
    yield
    conn.execute("; ".join(f"RESET {name}" for name in _PROBE_SETTINGS))


def read_snapshot(conn: Connection, *, read_only: bool = True, snapshot: str | None = None) -> None:
    """Make the caller's just-begun transaction repeatable-read (and read-only unless told
    otherwise: a bucket probe fills a temporary table), so that all its reads see one snapshot
    while writers carry on; with ``snapshot`` (from ``export_snapshot`` on another connection,
    whose transaction is still open) that transaction's snapshot."""
    conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ" + (", READ ONLY" if read_only else ""))
    if snapshot is not None:
        # SET takes no bound parameters; the identifier, which the server made, goes in quoted.
        conn.execute(sql.SQL("SET TRANSACTION SNAPSHOT {}").format(sql.Literal(snapshot)))


def export_snapshot(conn: Connection) -> str:
    """The identifier of the snapshot of the caller's repeatable-read transaction, for another
    connection's ``read_snapshot``: valid until this transaction ends."""
    row = conn.execute("SELECT pg_export_snapshot()").fetchone()
    if row is None:
        raise InternalError("pg_export_snapshot() returned no row")
    return str(row[0])
