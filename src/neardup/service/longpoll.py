"""Longpolls of the changes feed: a waiting request holds no worker thread and no connection.

Each read of the feed is a short statement on a pooled connection, in a worker thread; between
reads a longpoll waits on the event loop for the Database's one listening connection to say that
its collection changed (``Database.on_change``). So waiting requests cost the service a callback
each, and the database nothing; how many may wait at once is bounded all the same (``Longpolls``),
and those past the bound get 503 with Retry-After.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from starlette.concurrency import run_in_threadpool

from neardup.database import ChangesPage, Database
from neardup.service.problems import ProblemError

# Longpolls one service process lets wait at once unless `neardup serve --max-longpolls` says
# otherwise: each costs a callback and an open socket, so this bounds what a token holder (or a
# crowd of honest consumers) can take, far below what the event loop could hold.
DEFAULT_MAX_LONGPOLLS = 1000
# Seconds between looks whether a waiting client has gone (its slot is freed then, not at its timeout).
GONE_CHECK_SECONDS = 2.0


class Longpolls:
    """How many longpolls wait, and how many may (per process; the event loop's thread only)."""

    def __init__(self, limit: int = DEFAULT_MAX_LONGPOLLS) -> None:
        """``limit``: the most that may wait at once."""
        self.limit = limit
        self.waiting = 0

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """A place among the waiting longpolls for the block, or 503 (Retry-After) when all are taken."""
        if self.waiting >= self.limit:
            raise ProblemError(
                503,
                f"{self.limit} longpolls are waiting already, the most this server takes: try again later",
            )
        self.waiting += 1
        try:
            yield
        finally:
            self.waiting -= 1


async def wait_for_changes(
    db: Database,
    name: str,
    since: int,
    limit: int,
    seconds: float,
    gone: Callable[[], Awaitable[bool]],
) -> ChangesPage:
    """The changes after ``since``, waiting up to ``seconds`` for a first one (or until ``gone``
    says the client left); read in worker threads, waited for on the event loop."""
    loop = asyncio.get_running_loop()
    woken = asyncio.Event()

    def wake() -> None:  # on the listening thread
        with contextlib.suppress(RuntimeError):  # the loop closed: the server is stopping
            loop.call_soon_threadsafe(woken.set)

    # Registered before the first read, so that no commit falls between the read and the wait.
    stop = await run_in_threadpool(db.on_change, name, wake)
    try:
        deadline = loop.time() + seconds
        while True:
            woken.clear()
            page = await run_in_threadpool(db.changes, name, since, limit=limit)
            if page.changes or loop.time() >= deadline:
                return page
            while not woken.is_set() and (left := deadline - loop.time()) > 0:
                try:
                    await asyncio.wait_for(woken.wait(), min(left, GONE_CHECK_SECONDS))
                except TimeoutError:
                    if await gone():
                        return page
    finally:
        stop()
