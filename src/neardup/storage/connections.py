"""The connections a collection's reader or writer opens besides its own (``Connections``)."""

from __future__ import annotations

from neardup.storage.connect import Connection, connect
from neardup.storage.scope import Scope


def on(scope: Scope, conn: Connection) -> Scope:
    """The collection of ``scope``, on ``conn``."""
    return Scope(conn, scope.schema, scope.collection_id, scope.distributed)


class Connections:
    """A writer's connections besides its own (``home``), each opened on first use: the second
    (probes, snapshots, id reservations; a reader such as ``Index.check`` may run transactions on
    it between the writer's statements) and the spare one an ingest writes batches ahead on."""

    def __init__(self, url: str, home: Scope) -> None:
        self._url, self.home = url, home
        self._second: Connection | None = None
        self._spare: Connection | None = None

    def second(self) -> Scope:
        """The collection on the second connection."""
        if self._second is None:
            self._second = connect(self._url)
        return on(self.home, self._second)

    def other_than(self, busy: Connection) -> Scope:
        """The collection on the writing connection that ``busy`` is not: the spare one while a
        batch writes on the writer's own, else the writer's own."""
        if busy is not self.home.conn:
            return self.home
        if self._spare is None:
            self._spare = connect(self._url)
        return on(self.home, self._spare)

    def discard(self, conn: Connection) -> None:
        """Close ``conn`` (broken); the spare one is opened again when next needed."""
        if conn is self._spare:
            self._spare = None
        conn.close()

    def close(self) -> None:
        """Close the second and the spare connection, if they were opened."""
        for conn in (self._second, self._spare):
            if conn is not None:
                conn.close()
        self._second = self._spare = None
