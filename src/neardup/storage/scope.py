"""A Scope: one connection, one schema, one collection; it composes SQL naming their objects."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from psycopg import sql

from neardup.storage.connect import Connection
from neardup.storage.names import PARTITIONED_TABLES, bucket_index_name, check_schema_name, partition_name


@lru_cache(maxsize=512)
def _compose(template: str, schema: str, collection_id: int) -> sql.Composed:
    names: dict[str, sql.Composable] = {"s": sql.Identifier(schema)}
    for table in PARTITIONED_TABLES:
        # {documents_p} etc. name the collection's own partition: no pruning work per statement.
        names[f"{table}_p"] = sql.Identifier(schema, partition_name(table, collection_id))
    names["bucket_index"] = sql.Identifier(bucket_index_name(collection_id))
    names["bucket_index_q"] = sql.Identifier(schema, bucket_index_name(collection_id))
    return sql.SQL(template).format(**names)


@dataclass(frozen=True)
class Scope:
    """Where storage functions act: a connection (the caller owns its transactions), a schema and
    a collection id (0 before a collection is chosen)."""

    conn: Connection
    schema: str
    collection_id: int = 0

    def __post_init__(self) -> None:
        check_schema_name(self.schema)

    def sql(self, template: str) -> sql.Composed:
        """``template`` with ``{s}``, ``{<table>_p}`` and ``{bucket_index}`` filled in as identifiers."""
        return _compose(template, self.schema, int(self.collection_id))

    def with_collection(self, collection_id: int) -> Scope:
        """The same connection and schema, acting on another collection."""
        return Scope(self.conn, self.schema, collection_id)
