"""A small pool of open connections for many short statements from many threads (the service).

Opening a connection costs a few milliseconds, more than the statements a request runs; a pool
keeps a few open. A connection comes back only when it is idle and healthy; one that saw an error
is closed, so a broken connection is never handed out twice. At most ``most`` are open at once:
callers past that wait for one to come back, so that many requests at once (a crowd of longpolls,
each reading its first page) never open more connections than the server takes.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from psycopg.pq import TransactionStatus

from neardup.errors import DatabaseConnectionError
from neardup.storage.connect import Connection, connect, translated
from neardup.storage.scope import Scope

# How long a caller waits for one of the pool's connections when all are in use before it is told
# the database is busy: longer than any of the short statements a pooled connection runs.
WAIT_SECONDS = 30.0


class ConnectionPool:
    """Up to ``keep`` idle connections to ``url``, and at most ``most`` open at once (more callers
    wait for one)."""

    def __init__(self, url: str, schema: str, keep: int = 8, most: int = 16) -> None:
        """Nothing is opened until the first ``scope()``."""
        self.url, self.schema, self._keep = url, schema, keep
        self._idle: list[Connection] = []
        self._lock = threading.Lock()
        self._open = threading.BoundedSemaphore(max(most, keep))
        self._closed = False

    @contextmanager
    def scope(self) -> Iterator[Scope]:
        """A Scope on a pooled autocommit connection (the caller opens transactions);
        DatabaseConnectionError if none is free within ``WAIT_SECONDS``."""
        if not self._open.acquire(timeout=WAIT_SECONDS):
            raise DatabaseConnectionError(
                f"every one of the pool's connections stayed in use for {WAIT_SECONDS:.0f} s"
            )
        try:
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
        finally:
            self._open.release()

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
