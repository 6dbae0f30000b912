"""An open collection's handle (``Collection``), and opening a collection by name: its
connection, scope and stored row, for ``Index.open`` and for the writer processes of
``ingest.parallel`` (which need no ``Index``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from neardup.config import IndexConfig
from neardup.core.params import Params
from neardup.core.sketch import Sketcher
from neardup.errors import CollectionNotFoundError
from neardup.storage import catalog, migrate
from neardup.storage.connect import Connection, connect, translated
from neardup.storage.connections import Connections
from neardup.storage.scope import Scope


@dataclass
class Collection:
    """One open collection: where it lives (``scope``, on its home connection; ``url`` for the
    others), its ``name``, its parameters (``config``) and their ``sketcher``, and the connections
    opened besides the home one. Its owner (``Index``, or a writer process) gives it to the writer
    and the readers; a rebuild changes the parameters here (``configure``), the one place both
    read them from."""

    url: str
    scope: Scope
    name: str
    config: IndexConfig
    connections: Connections
    sketcher: Sketcher = field(init=False)

    def __post_init__(self) -> None:
        self.sketcher = Sketcher(self.config.params)

    @classmethod
    def of(cls, url: str, scope: Scope, row: catalog.CollectionRow) -> Collection:
        """The handle of the collection stored as ``row``, on ``scope``'s connection."""
        scope = scope.with_collection(row.collection_id, row.distributed)
        return cls(url, scope, row.name, config_of(row), Connections(url, scope))

    def configure(self, config: IndexConfig) -> None:
        """Take ``config`` (a rebuild's, or the one before it when the rebuild failed)."""
        self.config, self.sketcher = config, Sketcher(config.params)

    def close(self) -> None:
        """Close the connections opened besides the home one (not the home one)."""
        self.connections.close()


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
