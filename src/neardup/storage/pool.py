"""A small pool of open connections for many short statements from many threads (the service).

Opening a connection costs a few milliseconds, more than the statements a request runs; a pool
keeps a few open. A connection comes back only when it is idle and healthy; one that saw an error
is closed, so a broken connection is never handed out twice.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from psycopg.pq import TransactionStatus

from neardup.storage.connect import Connection, connect, translated
from neardup.storage.scope import Scope


class ConnectionPool:
    """Up to ``keep`` idle connections to ``url``; more are opened when all are in use."""

    def __init__(self, url: str, schema: str, keep: int = 8) -> None:
        """Nothing is opened until the first ``scope()``."""
        self.url, self.schema, self._keep = url, schema, keep
        self._idle: list[Connection] = []
        self._lock = threading.Lock()
        self._closed = False

    @contextmanager
    def scope(self) -> Iterator[Scope]:
        """A Scope on a pooled autocommit connection (the caller opens transactions)."""
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = connect(self.url)
        healthy = False
        try:
            yield Scope(conn, self.schema)
            healthy = not conn.closed and conn.info.transaction_status == TransactionStatus.IDLE
        finally:
            with self._lock:
                if healthy and not self._closed and len(self._idle) < self._keep:
                    self._idle.append(conn)
                    conn = None
            if conn is not None:
                conn.close()

    def idle(self) -> int:
        """How many connections are open between calls."""
        with self._lock:
            return len(self._idle)

    def ping(self) -> None:
        """Run ``SELECT 1``; DatabaseConnectionError when the database does not answer."""
        with self.scope() as scope, translated("checking the database"):
            scope.conn.execute("SELECT 1").fetchone()

    def close(self) -> None:
        """Close every idle connection; later ones are closed when they come back."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
