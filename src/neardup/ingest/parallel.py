"""Adding with several writer processes: the input split by id over N processes, each a Writer.

This process reads and checks the records (so a bad record or a repeated id is reported where it
stands in the whole input, as with one writer) and hands each to writer ``hash(id) mod N`` in
chunks; every writer opens the collection on its own connection and adds what it is given in
batches, as ``Index.add`` does. All of one id's records go to one writer, so no two writers ever
hold the same id, and the state at the end is that of one writer given the whole input. That
includes which document is earliest: each record's document id is taken here, in input order, a
block at a time (``catalog.reserve_documents``), and handed to its writer with it, so that the
representative kept as "first" (and every tie that goes to the earliest) is the earliest in the
input, whichever writer commits first.

Each writer reads, sketches, probes the stored buckets, verifies its candidates and COPYs its new
contents and signatures on its own, before its batch's turn at the collection's lock
(``Writer.add(concurrent=True)``, ``ingest.prework``); in its turn, which is what keeps the
pairs table complete between batches committed by different processes, it writes documents and
bucket rows (COPY, which a distributed collection fans out) and verifies only the pairs with what
the other writers committed meanwhile. Where a batch fails,
the batches committed before it stay, as with one writer: the same command run again finishes.
"""

from __future__ import annotations

import contextlib
import itertools
import multiprocessing
import queue
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from multiprocessing.context import SpawnProcess
from multiprocessing.queues import Queue
from typing import Any

from neardup import errors, validate
from neardup.collection import open_collection
from neardup.errors import InternalError, NeardupError
from neardup.ingest.collection import opened_writer
from neardup.records import Checked, Document, Record, documents
from neardup.result import AddResult
from neardup.storage import catalog
from neardup.storage.connect import Connection, translated
from neardup.storage.scope import Scope

# Documents handed to a writer at once: enough that the queue's pickling is a small cost beside
# the work, few enough that a writer starts early and the queues hold little.
CHUNK = 1_000
# Chunks a writer's queue holds before this process waits: keeps memory bounded when the
# database is slower than reading.
QUEUE_CHUNKS = 8
# How often (seconds) a wait on a full queue looks whether a writer failed.
POLL_SECONDS = 0.5
# Seconds a writer is given to stop after being told to, before it is terminated.
STOP_SECONDS = 30.0
_END, _ABORT = "end", "abort"


class _AbortedError(Exception):
    """The reading side failed: this writer drops the batch it is reading."""


def writer_of(doc_id: str, jobs: int) -> int:
    """The writer (0..jobs-1) an id goes to: a stable hash, the same in every process and run."""
    return zlib.crc32(doc_id.encode("utf-8", "surrogatepass")) % jobs


def add(
    url: str,
    schema: str,
    name: str,
    records: Iterable[Record],
    jobs: int,
    batch_size: int,
    progress: Callable[[AddResult], None] | None = None,
) -> AddResult:
    """Add ``records`` to collection ``name`` with ``jobs`` writer processes; returns the summed
    result. Errors are raised as the writer raised them (the class and message)."""
    jobs = validate.jobs(jobs)
    spawn = multiprocessing.get_context("spawn")  # never fork a process holding connections and threads
    results: Queue[tuple[Any, ...]] = spawn.Queue()
    inboxes: list[Queue[Any]] = [spawn.Queue(maxsize=QUEUE_CHUNKS) for _ in range(jobs)]
    writers = [
        spawn.Process(
            target=_write,
            args=(url, schema, name, batch_size, inbox, results, k),
            name=f"neardup-writer-{k}",
            daemon=True,
        )
        for k, inbox in enumerate(inboxes)
    ]
    for w in writers:
        w.start()
    state = _State(jobs, progress)
    try:
        with _Numbering(url, schema, name) as numbering:
            chunks: list[list[tuple[Any, ...]]] = [[] for _ in range(jobs)]
            for block in _blocks(documents(records), CHUNK * QUEUE_CHUNKS * jobs):
                first = numbering.take(len(block))
                for n, doc in enumerate(block, first):
                    k = writer_of(doc.id, jobs)
                    chunks[k].append((doc.id, doc.text, doc.meta, n))
                    if len(chunks[k]) >= CHUNK:
                        _hand(inboxes[k], chunks[k], state, results, writers)
                        chunks[k] = []
        for k in range(jobs):
            if chunks[k]:
                _hand(inboxes[k], chunks[k], state, results, writers)
            _hand(inboxes[k], _END, state, results, writers)
        while len(state.done) < jobs:
            state.take(results, writers, block=True)
        return state.total()
    except BaseException:
        for inbox in inboxes:
            # A full inbox is not told: its writer is terminated below if it does not stop.
            with contextlib.suppress(queue.Full):
                inbox.put_nowait(_ABORT)
        _stop(writers)
        raise
    finally:
        for w in writers:
            w.join(STOP_SECONDS)
        for q in (*inboxes, results):
            q.close()
            q.cancel_join_thread()


def _blocks(docs: Iterator[Document], size: int) -> Iterator[list[Document]]:
    """``docs`` in lists of ``size`` (the last one shorter)."""
    while block := list(itertools.islice(docs, size)):
        yield block


class _Numbering:
    """Document ids for the input's records in input order, taken a block at a time on a
    connection of this process (``catalog.reserve_documents``, under the writer lock)."""

    def __init__(self, url: str, schema: str, name: str) -> None:
        self._args = (url, schema, name)
        self._conn: Connection | None = None
        self._scope: Scope | None = None

    def __enter__(self) -> _Numbering:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._conn is not None:
            self._conn.close()

    def take(self, count: int) -> int:
        """The first of ``count`` new consecutive document ids."""
        url, schema, name = self._args
        if self._scope is None:
            self._conn, scope, row = open_collection(url, schema, name)
            self._scope = scope.with_collection(row.collection_id, row.distributed)
        with translated(f"numbering the documents for {name!r}"):
            return catalog.reserve_documents(self._scope, name, count)


class _State:
    """What the writers reported: running totals, the finished ones, the first error."""

    def __init__(self, jobs: int, progress: Callable[[AddResult], None] | None) -> None:
        self.totals = [AddResult()] * jobs
        self.done: set[int] = set()
        self.progress = progress

    def total(self) -> AddResult:
        out = AddResult()
        for t in self.totals:
            out += t
        return out

    def take(self, results: Queue[tuple[Any, ...]], writers: list[SpawnProcess], *, block: bool) -> None:
        """Take the writers' reports (waiting for one when ``block``); raise a writer's error."""
        while True:
            try:
                report = results.get(timeout=POLL_SECONDS) if block else results.get_nowait()
            except queue.Empty:
                dead = [w.name for k, w in enumerate(writers) if k not in self.done and not w.is_alive()]
                if not dead:
                    if block:
                        continue
                    return
                try:  # a writer that failed and ended at once: its report may just have arrived
                    report = results.get(timeout=POLL_SECONDS)
                except queue.Empty:
                    raise InternalError(f"writer process {dead[0]} ended without a word (killed?)") from None
            kind, k = report[0], report[1]
            if kind == "error":
                cls = getattr(errors, report[2], None)
                if not (isinstance(cls, type) and issubclass(cls, NeardupError)):
                    cls = InternalError
                raise cls(report[3], hint=report[4])
            self.totals[k] = report[2]
            if kind == "done":
                self.done.add(k)
            if self.progress is not None:
                self.progress(self.total())
            if block:
                return


def _hand(
    inbox: Queue[Any], item: Any, state: _State, results: Queue[tuple[Any, ...]], writers: list[SpawnProcess]
) -> None:
    """Put ``item`` in a writer's queue, taking reports (and failing on an error) while it is full."""
    while True:
        state.take(results, writers, block=False)
        try:
            inbox.put(item, timeout=POLL_SECONDS)
            return
        except queue.Full:
            continue


def _stop(writers: list[SpawnProcess]) -> None:
    """Let the writers roll back what they are writing, then terminate those still running."""
    for w in writers:
        w.join(STOP_SECONDS)
        if w.is_alive():
            w.terminate()


def _write(
    url: str,
    schema: str,
    name: str,
    batch_size: int,
    inbox: Queue[Any],
    results: Queue[tuple[Any, ...]],
    k: int,
) -> None:
    """A writer process: add what arrives in ``inbox`` until the end mark, reporting each batch."""

    numbers: deque[int] = deque()

    def arriving() -> Iterator[Document]:
        while True:
            item = inbox.get()
            if item == _END:
                return
            if item == _ABORT:
                raise _AbortedError
            for doc_id, text, meta, number in item:
                numbers.append(number)  # read by the writer right after the record
                yield Document(doc_id, text, meta)

    def numbered() -> Iterator[int]:
        while True:
            if not numbers:  # the writer reads a record's number only after the record
                raise InternalError(f"writer {k} read a number before its record")
            yield numbers.popleft()

    try:
        with opened_writer(url, schema, name) as writer:
            total = writer.add(
                Checked(arriving()),  # checked, repeats across every writer's share too, as read
                batch_size=batch_size,
                progress=lambda r: results.put(("progress", k, r)),
                concurrent=True,
                numbers=numbered(),
            )
        results.put(("done", k, total))
    except _AbortedError:
        pass  # the reading process failed and reports its own error
    except BaseException as exc:  # reported to the reading process, which raises it
        # The message and its hint apart, so that the face that reports it words the hint.
        if isinstance(exc, NeardupError):
            results.put(("error", k, type(exc).__name__, exc.message, exc.hint))
        else:
            results.put(("error", k, type(exc).__name__, str(exc), None))
