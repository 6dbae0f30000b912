"""Distributed collections on Citus: the schema's layout as Citus tables, and the SQL that differs.

A schema is plain or distributed as a whole: Citus lets a distributed partitioned table have only
distributed partitions, and each collection is a partition of the schema's parent tables. The
first ``Index.create(distributed=True)`` in a schema with no collection turns its tables into
Citus tables (``distribute``); every collection created afterwards gets Citus partitions by
itself. docs/distributed.md gives the layout and the reason for each choice.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from psycopg import sql

from neardup.errors import DistributedError, Hint
from neardup.storage.connect import Connection
from neardup.storage.names import KEY_TABLE
from neardup.storage.scope import Scope

# What the parents are distributed by. Contents, signatures, documents and pairs form one
# co-location group by content id (verification, the views and cluster reads join them shard by
# shard); buckets are distributed by the bucket key, in a group of their own, so a batch's probe
# and the all-pairs grouping run on each shard with no data moving between nodes; document_keys
# by external id, in a group of its own (``distribute``).
_LAYOUT = (
    ("contents", "content_id"),
    ("signatures", "content_id"),
    ("documents", "content_id"),
    ("pairs", "content_a"),
)

# Constraints Citus cannot enforce (a unique key must contain the distribution column), and what
# replaces them: a plain index for the lookups, and a key that does contain it. External ids stay
# unique through document_keys, distributed by external id. (Content hashes are kept unique by
# neardup's writers on every schema since migration 0006: docs/distributed.md.)
_RESHAPE = (
    "ALTER TABLE {s}.labels DROP CONSTRAINT labels_collection_fkey",
    "ALTER TABLE {s}.documents DROP CONSTRAINT documents_external_id_key",
    "CREATE INDEX documents_external_id_idx ON {s}.documents (collection_id, external_id)",
    "ALTER TABLE {s}.documents DROP CONSTRAINT documents_pkey",
    "ALTER TABLE {s}.documents ADD CONSTRAINT documents_pkey PRIMARY KEY (collection_id, content_id, doc_id)",
)


def version(conn: Connection) -> str | None:
    """The version of the citus extension installed in the connection's database, or None."""
    row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'citus'").fetchone()
    return str(row[0]) if row else None


def require(conn: Connection, where: str) -> str:
    """The installed Citus version; DistributedError naming what is missing when there is none."""
    found = version(conn)
    if found is None:
        available = conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'citus'").fetchone()
        missing = (
            "the citus extension is not installed in this database: run CREATE EXTENSION citus"
            if available
            else "the citus extension is not available on this server: install Citus, load it with "
            "shared_preload_libraries = 'citus', add worker nodes, and CREATE EXTENSION citus"
        )
        raise DistributedError(f"a distributed collection needs Citus at {where}; {missing}")
    return found


def is_distributed(scope: Scope) -> bool:
    """Whether the schema's tables are Citus tables (False on a database without Citus)."""
    if version(scope.conn) is None:
        return False
    row = scope.conn.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = to_regclass(%s))",
        (scope.sql("{s}.contents").as_string(scope.conn),),
    ).fetchone()
    return bool(row and row[0])


def shard_count(scope: Scope) -> int:
    """Number of shards of the schema's contents (and of its buckets)."""
    row = scope.conn.execute(
        "SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = %s::regclass",
        (scope.sql("{s}.contents").as_string(scope.conn),),
    ).fetchone()
    return int(row[0]) if row else 0


def distribute(scope: Scope, shards: int | None) -> None:
    """Turn the schema's tables into Citus tables: collections a reference table, the per-collection
    parents distributed (``shards`` each, else Citus's ``citus.shard_count``). The schema must hold
    no collection; the service's tables (tokens, sessions, labels) stay on the coordinator."""
    row = scope.conn.execute(scope.sql("SELECT count(*) FROM {s}.collections")).fetchone()
    if row and row[0]:
        raise DistributedError(
            f"schema {scope.schema!r} holds {row[0]} plain collection(s): a schema is plain or distributed "
            "as a whole",
            hint=Hint("create distributed collections in another schema with", "schema", "NAME"),
        )
    for statement in _RESHAPE:
        scope.conn.execute(scope.sql(statement))
    table = scope.sql("{s}.collections").as_string(scope.conn)
    scope.conn.execute("SELECT create_reference_table(%s)", (table,))
    count: dict[str, Any] = {} if shards is None else {"shard_count": int(shards)}
    first = scope.sql(f"{{s}}.{_LAYOUT[0][0]}").as_string(scope.conn)
    for name, column in _LAYOUT:
        table = scope.sql(f"{{s}}.{name}").as_string(scope.conn)
        colocation = {"colocate_with": "none", **count} if name == _LAYOUT[0][0] else {"colocate_with": first}
        _create_distributed(scope.conn, table, column, colocation)
    buckets = scope.sql("{s}.buckets").as_string(scope.conn)
    _create_distributed(scope.conn, buckets, "bucket", {"colocate_with": "none", **count})
    keys = scope.sql(f"{{s}}.{KEY_TABLE}").as_string(scope.conn)
    _create_distributed(scope.conn, keys, "external_id", {"colocate_with": "none", **count})


def prepare(scope: Scope, distributed: bool | None, shards: int | None, where: str) -> bool:
    """Make the schema fit a new collection and say whether the collection is distributed: True
    distributes a schema with no collection yet, None follows the schema, False refuses a
    distributed schema (DistributedError, as when Citus is missing). Takes the schema's migration
    lock."""
    scope.conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"neardup:{scope.schema}",))
    if distributed is None:
        return is_distributed(scope)
    if not distributed:
        if is_distributed(scope):
            raise DistributedError(
                f"schema {scope.schema!r} is distributed (Citus): its collections are distributed too; "
                "leave distributed out (or True), or use another schema for plain collections"
            )
        return False
    require(scope.conn, where)
    if not is_distributed(scope):
        distribute(scope, shards)
    elif shards is not None and shards != (have := shard_count(scope)):
        raise DistributedError(
            f"schema {scope.schema!r} is distributed with {have} shards per table, not {shards}: "
            "leave the shard count out, or use another schema"
        )
    return True


def _create_distributed(conn: Connection, table: str, column: str, options: dict[str, Any]) -> None:
    named = sql.SQL(", ").join(sql.SQL("{} => %s").format(sql.Identifier(k)) for k in options)
    conn.execute(
        sql.SQL("SELECT create_distributed_table(%s, %s, {})").format(named),
        (table, column, *options.values()),
    )


def insert_keys(scope: Scope, external_ids: Sequence[str], content_ids: npt.NDArray[np.int64]) -> None:
    """Insert the key rows of new documents (binary COPY); a stored external id fails the batch."""
    c = scope.collection_id
    with (
        scope.conn.cursor() as cur,
        cur.copy(
            scope.sql(
                f"COPY {{{KEY_TABLE}_p}} (collection_id, external_id, content_id) FROM STDIN (FORMAT BINARY)"
            )
        ) as copy,
    ):
        copy.set_types(["int4", "text", "int8"])
        for ext, content_id in zip(external_ids, content_ids.tolist(), strict=True):
            copy.write_row((c, ext, content_id))


def delete_keys(scope: Scope, external_ids: Sequence[str]) -> None:
    """Delete the key rows of removed documents."""
    if external_ids:
        scope.conn.execute(
            scope.sql(
                f"DELETE FROM {{{KEY_TABLE}_p}} WHERE collection_id = %s "
                'AND external_id IN (SELECT u COLLATE "C" FROM unnest(%s::text[]) AS u)'
            ),
            (scope.collection_id, list(external_ids)),
        )
