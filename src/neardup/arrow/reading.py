"""Reading records from Parquet files, Arrow IPC files (Feather version 2) and streams, and
directories of them, one record batch at a time.

Memory follows the batch, not the file: Parquet is read a few MiB of rows at a time (``batch_rows``)
through a read buffer (``BUFFER_BYTES``), never a whole column chunk at once, and only the columns a
record is made of; an Arrow IPC file is mapped into memory and read batch by batch. A bad row is
named by its file, its row group (Parquet) or record batch (Arrow), and its row in that group or
batch, both counted from 0 as pyarrow counts them (``ParquetFile.read_row_group(g).slice(r, 1)``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Literal

import pyarrow as pa
import pyarrow.parquet as pq

from neardup.arrow.columns import records_of, select
from neardup.errors import InputError
from neardup.readers import BadRecord, OnBad, SourceRecord

ArrowFormat = Literal["parquet", "arrow"]
ARROW_FORMATS: tuple[ArrowFormat, ...] = ("parquet", "arrow")
# A batch's rows: as many as fill BATCH_BYTES of the columns read (estimated from the file's
# metadata), at most BATCH_ROWS. The records of one batch, as Arrow and as Python objects, are what
# reading holds, so a batch is bounded by its bytes, not by its rows alone: rows can be any size.
BATCH_ROWS = 8_192
BATCH_BYTES = 4 << 20
# Parquet's read buffer: without one (pyarrow's default) a row group's whole column chunk is read
# into memory before its first row is decoded, and a row group can be as large as the file.
BUFFER_BYTES = 1 << 20
# Files of a directory that datasets leave beside their data (Spark's _SUCCESS, .crc files), as
# pyarrow.dataset's own default ignores them.
IGNORED_PREFIXES = (".", "_")


def files_of(path: str, fmt: ArrowFormat) -> list[str]:
    """The files ``path`` names: itself, or a directory's files (recursively, sorted), leaving out
    those whose name, or a folder's, starts with ``.`` or ``_``."""
    root = Path(path)
    if path == "-" or not root.is_dir():
        return [path]
    files = sorted(
        str(p)
        for p in root.rglob("*")
        if p.is_file() and not any(part.startswith(IGNORED_PREFIXES) for part in p.relative_to(root).parts)
    )
    if not files:
        raise InputError(f"{path}: a directory without {fmt} files")
    return files


def _damaged(name: str, where: str, exc: Exception) -> InputError:
    return InputError(f"{name}{where}: cannot be read ({exc})")


class Batches:
    """One file's schema and its record batches, each with the place of its rows (``file: row group
    g, row ``) and the number of its first row there."""

    def __init__(self, path: str, fmt: ArrowFormat) -> None:
        self.name = "<stdin>" if path == "-" else path
        self._path, self._fmt = path, fmt
        try:
            if fmt == "parquet":
                if path == "-":
                    raise InputError(
                        "<stdin>: Parquet cannot be read from standard input (it is read from its end)"
                    )
                self._parquet = pq.ParquetFile(path, buffer_size=BUFFER_BYTES, pre_buffer=False)
                self.schema = self._parquet.schema_arrow
            else:
                self._ipc = _open_ipc(path)
                self.schema = self._ipc.schema
        except (pa.ArrowException, OSError) as exc:
            kind = "a Parquet file" if fmt == "parquet" else "an Arrow IPC file or stream"
            raise InputError(f"{self.name}: not {kind} that can be read ({exc})") from exc

    def __iter__(self) -> Iterator[tuple[str, int, pa.RecordBatch]]:
        return self.read(None)

    def read(self, columns: Sequence[str] | None) -> Iterator[tuple[str, int, pa.RecordBatch]]:
        """(place, first row, batch) of the file's batches, of ``columns`` only (None: all)."""
        if self._fmt == "parquet":
            yield from self._parquet_batches(columns)
            return
        reader = self._ipc
        if isinstance(reader, pa.ipc.RecordBatchFileReader):
            for b in range(reader.num_record_batches):
                place = f"{self.name}: record batch {b}, row "
                try:
                    batch = reader.get_batch(b)
                except (pa.ArrowException, OSError) as exc:
                    raise _damaged(self.name, f": record batch {b}", exc) from exc
                yield from _slices(place, batch if columns is None else batch.select(columns))
            return
        b = 0
        while True:
            try:
                batch = reader.read_next_batch()
            except StopIteration:
                return
            except (pa.ArrowException, OSError) as exc:
                raise _damaged(self.name, f": record batch {b}", exc) from exc
            yield from _slices(
                f"{self.name}: record batch {b}, row ", batch if columns is None else batch.select(columns)
            )
            b += 1

    def _parquet_batches(self, columns: Sequence[str] | None) -> Iterator[tuple[str, int, pa.RecordBatch]]:
        chosen = None if columns is None else list(columns)
        metadata = self._parquet.metadata
        for g in range(self._parquet.num_row_groups):
            place, first = f"{self.name}: row group {g}, row ", 0
            group = metadata.row_group(g)
            size = sum(
                group.column(c).total_uncompressed_size
                for c in range(group.num_columns)
                if chosen is None or group.column(c).path_in_schema.split(".")[0] in chosen
            )
            batches = self._parquet.iter_batches(
                batch_size=batch_rows(size, group.num_rows), row_groups=[g], columns=chosen, use_threads=False
            )
            while True:
                try:
                    batch = next(batches)
                except StopIteration:
                    break
                except (pa.ArrowException, OSError) as exc:
                    raise _damaged(self.name, f": row group {g}, after row {first}", exc) from exc
                yield place, first, batch
                first += batch.num_rows


def _open_ipc(path: str) -> pa.ipc.RecordBatchFileReader | pa.ipc.RecordBatchStreamReader:
    """An Arrow IPC file (mapped into memory) or, failing that, an IPC stream; ``-``: a stream on
    standard input."""
    if path == "-":
        return pa.ipc.open_stream(sys.stdin.buffer)
    try:
        return pa.ipc.open_file(pa.memory_map(path))
    except pa.ArrowInvalid:
        return pa.ipc.open_stream(pa.OSFile(path))


def batch_rows(size: int, rows: int) -> int:
    """Rows a batch of ``rows`` rows taking ``size`` bytes is read in: ``BATCH_BYTES`` of them."""
    return max(1, min(BATCH_ROWS, BATCH_BYTES * max(rows, 1) // max(size, 1)))


def slices(batch: pa.RecordBatch) -> Iterator[tuple[int, pa.RecordBatch]]:
    """An Arrow batch in slices of ``batch_rows`` (zero-copy), each with its first row."""
    step = batch_rows(batch.nbytes, batch.num_rows)
    for first in range(0, batch.num_rows, step):
        yield first, batch.slice(first, step)


def _slices(place: str, batch: pa.RecordBatch) -> Iterator[tuple[str, int, pa.RecordBatch]]:
    for first, part in slices(batch):
        yield place, first, part


def read_arrow(
    path: str,
    fmt: ArrowFormat,
    id_field: str = "id",
    text_field: str = "text",
    meta_fields: Sequence[str] | None = None,
    on_bad: OnBad | None = None,
) -> Iterator[SourceRecord]:
    """Records from a Parquet or Arrow file, or a directory of them: the id, text and metadata
    columns read a batch at a time (``meta_fields`` None: every other column). A missing column,
    or one of a type that cannot hold its part, raises InputError naming the file, and so does a
    file without rows; a bad row (a null id or text, a string that is not UTF-8) raises naming
    file, group or batch, row and column, or goes to ``on_bad``."""
    for file in files_of(path, fmt):
        source = Batches(file, fmt)
        selection = select(source.schema, id_field, text_field, meta_fields, source.name)
        rows = 0
        for place, first, batch in source.read(selection.names):
            rows += batch.num_rows
            yield from records_of(batch, selection, place, first, on_bad)
        if rows == 0:  # as an empty JSONL file is: most likely not what was meant to be read
            problem = InputError(f"{source.name}: the file is empty (no rows)")
            if on_bad is None:
                raise problem
            on_bad(BadRecord(source.name, str(problem), ""))
