"""One LISTEN connection for a whole process, fanning each notification of the changes feed out to
whoever waits on that collection.

A reader that waits for a collection's next change needs to hear the NOTIFY its writer sends
(``changes.record``). A connection of its own for each waiting reader costs the server a backend
each, and a waiting thread the client; here one thread on one connection hears every
notification of the schema and calls the callbacks registered for its collection, which only set
a flag (an event of an event loop, a threading event). So a thousand waiting readers hold one
connection and no thread.

Notifications sent while the connection was down are lost: after it connects again, every
callback is called once, so that each waiting reader reads again rather than miss a change.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable

from neardup.errors import DatabaseConnectionError
from neardup.storage.changes import CHANNEL
from neardup.storage.connect import Connection, connect, redacted

log = logging.getLogger("neardup.service")

Callback = Callable[[], None]
# Seconds a subscriber waits for the listening connection to be up before it is told the database
# is unavailable.
READY_SECONDS = 10.0
# How often (seconds) the listening thread looks whether it was closed, between notifications.
CHECK_SECONDS = 1.0
# Seconds between tries to connect again after the connection broke: doubling up to the last.
RETRY_SECONDS = (0.5, 1.0, 2.0, 5.0)


class ChangeListener:
    """Calls back, on its own thread, for each commit that recorded changes of a collection."""

    def __init__(self, url: str, schema: str) -> None:
        """Nothing is opened before the first ``subscribe``."""
        self._url, self._schema = url, schema
        self._callbacks: dict[str, dict[int, Callback]] = {}
        self._numbers = itertools.count()
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None
        self._conn: Connection | None = None
        self.reconnects = 0
        """How many times the connection broke and was made again."""

    def subscribe(self, collection_id: int, callback: Callback) -> Callback:
        """Call ``callback`` after each commit that records a change of the collection (and after
        a reconnection) until the function returned is called. Returns once the listening
        connection is up, so that no commit after this call goes unheard; DatabaseConnectionError
        when it does not come up within ``READY_SECONDS``."""
        key = f"{self._schema}.{collection_id}"
        number = next(self._numbers)
        with self._lock:
            self._callbacks.setdefault(key, {})[number] = callback
            if self._thread is None and not self._closed.is_set():
                self._thread = threading.Thread(target=self._run, name="neardup-listen", daemon=True)
                self._thread.start()

        def unsubscribe() -> None:
            with self._lock:
                mine = self._callbacks.get(key)
                if mine is not None:
                    mine.pop(number, None)
                    if not mine:
                        del self._callbacks[key]

        if not self._ready.wait(READY_SECONDS):
            unsubscribe()
            raise DatabaseConnectionError(
                f"listening for changes on {redacted(self._url)}: no connection within {READY_SECONDS:g} s"
            )
        return unsubscribe

    def waiting(self) -> int:
        """How many callbacks are registered."""
        with self._lock:
            return sum(len(c) for c in self._callbacks.values())

    @property
    def connected(self) -> bool:
        """Whether the listening connection is up."""
        return self._ready.is_set()

    def close(self) -> None:
        """Stop listening (the thread ends within ``CHECK_SECONDS``)."""
        self._closed.set()
        thread = self._thread
        if thread is not None:
            thread.join(CHECK_SECONDS * 3)

    def _call(self, key: str | None) -> None:
        """Call the callbacks of ``key`` (None: every one)."""
        with self._lock:
            if key is None:
                called = [c for mine in self._callbacks.values() for c in mine.values()]
            else:
                called = list(self._callbacks.get(key, {}).values())
        for callback in called:
            try:
                callback()
            except Exception:  # one waiter's failure must not stop the others' wake-ups
                log.exception("a changes-feed callback failed")

    def _run(self) -> None:
        """Listen until closed, connecting again after the connection breaks."""
        failures = 0
        while not self._closed.is_set():
            try:
                with connect(self._url) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    self._ready.set()
                    if failures:
                        self.reconnects += 1
                        log.warning("listening for changes again on %s", redacted(self._url))
                    failures = 0
                    self._call(None)  # what was sent while nobody listened is read again
                    while not self._closed.is_set():
                        for note in conn.notifies(timeout=CHECK_SECONDS):
                            self._call(note.payload)
            except Exception as exc:  # the database went away: try again, waiters read again
                self._ready.clear()
                self._call(None)
                wait = RETRY_SECONDS[min(failures, len(RETRY_SECONDS) - 1)]
                failures += 1
                log.warning("lost the connection that listens for changes (%s); again in %g s", exc, wait)
                self._closed.wait(wait)
        self._ready.clear()
