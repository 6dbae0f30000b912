"""Open indexes kept between requests: an Index per request in flight, reused by the next one.

An Index holds a connection and is used by one thread at a time, so each request takes one out
of its collection's idle list (opening one when the list is empty) and puts it back when done,
unless the request failed in the database (the Index is then closed, never reused) or the
collection was dropped meanwhile. At most ``max_idle`` indexes stay open between requests, across
all collections: the least recently used is closed first.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager

from neardup.database import Database
from neardup.errors import CollectionNotFoundError, DatabaseError, InternalError, NeardupError, ParamsError
from neardup.index import Index

# Indexes of one collection in use at once: more requests wait for one. Opening an Index costs
# far more than a query (a connection and the schema check), and a small server gains nothing
# from more concurrent queries than this; opening and closing indexes under a burst would cost more.
DEFAULT_PER_COLLECTION = 8
# Idle indexes kept across all collections, the least recently used closed first: each holds a
# connection, and a server that serves many collections must not keep DEFAULT_PER_COLLECTION
# connections open for every one it ever served (PostgreSQL refuses clients past max_connections).
DEFAULT_MAX_IDLE = 16


class BusyError(Exception):
    """Every index of the collection is in use and the caller asked not to wait."""


class IndexPool:
    """Up to ``size`` open indexes per collection of one Database (which opens them)."""

    def __init__(
        self, db: Database, size: int = DEFAULT_PER_COLLECTION, max_idle: int = DEFAULT_MAX_IDLE
    ) -> None:
        """Nothing is opened until a collection is first used."""
        self._db, self._size, self._max_idle = db, size, max_idle
        self._idle: dict[str, list[Index]] = {}
        self._recent: deque[tuple[str, Index]] = deque()
        """Every idle index with its collection, least recently returned first."""
        self._slots: dict[str, threading.BoundedSemaphore] = {}
        self._generation: dict[str, int] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._in_use = 0

    @contextmanager
    def index(self, name: str, *, wait: bool = True) -> Iterator[Index]:
        """An open Index of collection ``name``, for this thread until the block ends (waiting while
        ``size`` requests use the collection's indexes). Without ``wait``, BusyError is raised instead of
        waiting for a slot or opening an Index."""
        with self._lock:
            slots = self._slots.setdefault(name, threading.BoundedSemaphore(self._size))
        if not slots.acquire(blocking=wait):
            raise BusyError(name)
        with self._lock:
            self._in_use += 1
        try:
            with self._lock:
                idle = self._idle.get(name)
                index = idle.pop() if idle else None
                if index is not None:
                    self._recent.remove((name, index))
                generation = self._generation.get(name, 0)
            if index is None:
                if not wait:
                    raise BusyError(name)
                index = self._open(name, slots)
            reusable = False
            try:
                yield index
                reusable = True
            except NeardupError as exc:
                reusable = not isinstance(exc, DatabaseError | InternalError)
                raise
            finally:
                evicted = [index]  # closed unless it goes back to the idle list
                with self._lock:
                    if reusable and not self._closed and generation == self._generation.get(name, 0):
                        self._idle.setdefault(name, []).append(index)
                        self._recent.append((name, index))
                        evicted = self._evict()
                for closing in evicted:
                    closing.close()
        finally:
            with self._lock:
                self._in_use -= 1
            slots.release()

    def _evict(self) -> list[Index]:
        """Take the least recently used idle indexes out while more than ``max_idle`` are idle
        (under the lock; the caller closes them)."""
        evicted = []
        while len(self._recent) > self._max_idle:
            name, index = self._recent.popleft()
            self._idle[name].remove(index)
            evicted.append(index)
        return evicted

    def idle(self) -> int:
        """How many indexes are open between requests (each with its connection)."""
        with self._lock:
            return len(self._recent)

    def sizes(self) -> tuple[int, int]:
        """How many indexes requests use now, and how many are open between requests."""
        with self._lock:
            return self._in_use, len(self._recent)

    def _open(self, name: str, slots: threading.BoundedSemaphore) -> Index:
        """A new Index of ``name``. When there is no such collection its slots go too (unless an index
        of it came back meanwhile), so requests naming unknown collections leave nothing behind."""
        try:
            return self._db.open(name)
        except (CollectionNotFoundError, ParamsError):
            with self._lock:
                if self._slots.get(name) is slots and not self._idle.get(name):
                    del self._slots[name]
            raise

    def forget(self, name: str) -> None:
        """Close the idle indexes of ``name`` and keep none of those in use (it was dropped)."""
        with self._lock:
            self._generation[name] = self._generation.get(name, 0) + 1
            idle = self._idle.pop(name, [])
            self._recent = deque(entry for entry in self._recent if entry[0] != name)
        for index in idle:
            index.close()

    def close(self) -> None:
        """Close every idle index; those in use are closed when they come back."""
        with self._lock:
            self._closed = True
            idle, self._idle = [i for lst in self._idle.values() for i in lst], {}
            self._recent.clear()
        for index in idle:
            index.close()
