"""Opening a collection by name: its connection, scope and stored row, for ``Index.open`` and for
the writer processes of ``ingest.parallel`` (which need no ``Index``)."""

from __future__ import annotations

from neardup.config import IndexConfig
from neardup.core.params import Params
from neardup.errors import CollectionNotFoundError
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
