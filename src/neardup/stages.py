"""Where an ingest's time goes: wall seconds per named stage, summed over batches.

``Index.add(..., clock=StageClock())`` fills one; benchmarks print it. The worker stages (reading
and checking a batch ahead on one thread, sketching the next on another) overlap each other and
those of the writing thread, so the stages of each thread add up to at most the wall time, not
all of them together.

The steps of an ingest are timed where they are defined, not inside their logic: a step function
is decorated with ``@stage(name)``, or the loop wraps a step in ``timed(name)``. Both time into the
clock the running ``add`` set with ``timing(clock)`` (a context variable, which ``submit`` carries
into worker threads); outside one, nothing is recorded.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar, copy_context
from typing import ParamSpec, TypeVar

_P = ParamSpec("_P")
_T = TypeVar("_T")


class StageClock:
    """Wall seconds and entries per stage; safe to use from the ingest's threads at once."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.entries: dict[str, int] = {}
        self._lock = threading.Lock()

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Add the wall time of the block to stage ``name``."""
        start = time.perf_counter()
        try:
            yield
        finally:
            elapsed = time.perf_counter() - start
            with self._lock:
                self.seconds[name] = self.seconds.get(name, 0.0) + elapsed
                self.entries[name] = self.entries.get(name, 0) + 1


class _NoClock(StageClock):
    """A clock that records nothing (the default: no timing calls kept)."""

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Run the block."""
        yield


NO_CLOCK: StageClock = _NoClock()

_CLOCK: ContextVar[StageClock] = ContextVar("neardup_stage_clock", default=NO_CLOCK)


@contextmanager
def timing(clock: StageClock) -> Iterator[None]:
    """Time the steps run in the block (and in work it ``submit``s) into ``clock``."""
    token = _CLOCK.set(clock)
    try:
        yield
    finally:
        _CLOCK.reset(token)


def timed(name: str) -> AbstractContextManager[None]:
    """Add the wall time of the block to stage ``name`` of the current clock."""
    return _CLOCK.get().stage(name)


def stage(name: str) -> Callable[[Callable[_P, _T]], Callable[_P, _T]]:
    """Decorate a step function: each call's wall time goes to stage ``name``."""

    def decorate(step: Callable[_P, _T]) -> Callable[_P, _T]:
        @functools.wraps(step)
        def timed_step(*args: _P.args, **kwargs: _P.kwargs) -> _T:
            with _CLOCK.get().stage(name):
                return step(*args, **kwargs)

        return timed_step

    return decorate


def submit(pool: Executor, work: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> Future[_T]:
    """``pool.submit(work, ...)``, timing the work's steps into this thread's clock."""
    context = copy_context()

    def run() -> _T:
        return context.run(work, *args, **kwargs)

    return pool.submit(run)
