"""Opening a collection by name: its connection, scope and stored row, for ``Index.open`` and for
the writer processes of ``ingest.parallel`` (which need no ``Index``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from neardup.config import IndexConfig
from neardup.core.params import Params
from neardup.errors import CollectionNotFoundError
from neardup.ingest.writer import Writer
from neardup.storage import catalog, migrate
from neardup.storage.connect import Connection, connect, translated
from neardup.storage.scope import Scope


def open_collection(url: str, schema: str, name: str) -> tuple[Connection, Scope, catalog.CollectionRow]:
    """A new connection, the schema's scope on it and collection ``name``'s row; the connection
    is closed if the collection cannot be opened."""
    conn = connect(url)
    try:
        scope = Scope(conn, schema)
        migrate.require_head(conn, schema)
        with translated(f"opening collection {name!r}"):
            row = catalog.get(scope, name)
        if row is None:
            raise CollectionNotFoundError(f"no collection named {name!r} in schema {schema!r}")
        return conn, scope, row
    except BaseException:
        conn.close()
        raise


def config_of(row: catalog.CollectionRow) -> IndexConfig:
    """The threshold, parameters and text storage a collection's row holds."""
    return IndexConfig(row.threshold, Params.from_dict(row.params), row.store_text)


@contextmanager
def opened_writer(url: str, schema: str, name: str) -> Iterator[Writer]:
    """A writer of collection ``name`` on a connection of its own, closed when the block ends."""
    conn, scope, row = open_collection(url, schema, name)
    writer = Writer(
        conn, url, scope.with_collection(row.collection_id, row.distributed), row.name, config_of(row)
    )
    try:
        yield writer
    finally:
        writer.close()
        conn.close()
