"""Where an ingest's time goes: wall seconds per named stage, summed over batches.

``Index.add(..., clock=StageClock())`` fills one; benchmarks print it. The worker stages (reading
and checking a batch ahead on one thread, sketching the next on another) overlap each other and
those of the writing thread, so the stages of each thread add up to at most the wall time, not
all of them together.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager


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
