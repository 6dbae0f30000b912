"""An ingest's batches read, checked and sketched ahead of the writing thread.

Three stages overlap: batch i+2 is read and checked on the reading thread (Python, holding the
GIL), batch i+1 sketched on a worker (numba kernels and hashing, which release it), batch i
written by the caller (the database works on a core of its own).
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterable, Iterator
from concurrent.futures import Executor, Future

from neardup.core.sketch import SKETCH_THREADS, Sketch, Sketcher
from neardup.ingest.plan import Batch
from neardup.records import Record, documents
from neardup.stages import stage, submit, timed

# Batch sizes from which an ingest starts with smaller batches (``batch_sizes``): below it the
# ramp would buy little, and a batch is exactly the size asked for.
RAMP_FROM = 8_192

Prepared = tuple[tuple[Batch, Sketch] | None, Future[Batch] | None]
"""A batch and its sketch (None after the last), and the reading of the batch after it."""


def batch_sizes(batch_size: int, *, ramp: bool = True) -> Iterator[int]:
    """The sizes of an ingest's batches: ``batch_size`` each, except that from ``RAMP_FROM`` on (and
    with ``ramp``) the first ones are an eighth, a quarter and a half of it, so that writing starts
    early (the first batch is read and sketched before anything else can happen) and a small ingest
    overlaps too."""
    if ramp and batch_size >= RAMP_FROM:
        yield from (batch_size // 8, batch_size // 4, batch_size // 2)
    yield from itertools.repeat(batch_size)


class Upcoming:
    """The batches of ``records``, each read on ``reader`` and sketched on ``pool`` while the
    one before is written. ``next`` is the batch ``take`` returns next, being prepared."""

    def __init__(
        self,
        records: Iterable[Record],
        batch_size: int | None,
        sketcher: Sketcher,
        reader: Executor,
        pool: Executor,
        numbers: Iterator[int] | None = None,
    ) -> None:
        """``batch_size`` None: every record in one batch. ``numbers``: the document id of each
        record in turn (``Batch.numbers``), read as the records are."""
        self._checked = documents(records)
        self._numbers = numbers
        self._sizes = batch_sizes(sys.maxsize, ramp=False) if batch_size is None else batch_sizes(batch_size)
        self._read_so_far = 0
        self._sketcher, self._reader, self._pool = sketcher, reader, pool
        self.next: Future[Prepared] = submit(pool, self._prepare, submit(reader, self._read))

    def take(self) -> tuple[Batch, Sketch] | None:
        """The next batch and its sketch (None after the last), starting to sketch the one after;
        a bad record surfaces here."""
        with timed("wait for the next batch"):
            prepared, following = self.next.result()
        if prepared is None or following is None:
            return None
        self.next = submit(self._pool, self._prepare, following)
        return prepared

    @stage("worker: read and check records")
    def _read(self) -> Batch:
        """Read and check the next batch (on the reading thread)."""
        docs = list(itertools.islice(self._checked, next(self._sizes)))
        numbers = None if self._numbers is None else list(itertools.islice(self._numbers, len(docs)))
        batch = Batch.of(docs, self._read_so_far, numbers)
        self._read_so_far += len(batch)
        return batch

    def _prepare(self, reading: Future[Batch]) -> Prepared:
        """Sketch the batch being read (on a worker thread), and start reading the one after."""
        batch = reading.result()
        if not len(batch):
            return None, None
        following = submit(self._reader, self._read)
        with timed("worker: normalise, shingle, sign"):
            return (batch, self._sketcher.sketch(batch.texts, threads=SKETCH_THREADS)), following
