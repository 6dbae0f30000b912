"""Writing rows as Arrow: a listing's rows as a Parquet file or an Arrow table, and the rows of
Arrow inputs that ``dedup`` keeps, with all their columns, in their own format.

Rows are converted ``WRITE_ROWS`` at a time, each group a record batch (a Parquet row group), so
writing a listing holds one group in memory, never the listing.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence, Set
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from neardup.arrow.columns import select
from neardup.arrow.reading import ArrowFormat, Batches, files_of
from neardup.errors import InputError

# Rows a record batch (and a Parquet row group) of a listing holds.
WRITE_ROWS = 65_536


def schema_of(columns: Sequence[str], types: Sequence[str]) -> pa.Schema:
    """The schema of columns named ``columns`` of types named as pyarrow names them (``"string"``,
    ``"double"``, ``"int64"``, ``"bool"``); every column may hold nulls."""
    return pa.schema([(c, pa.type_for_alias(t)) for c, t in zip(columns, types, strict=True)])


def record_batches(schema: pa.Schema, rows: Iterable[Sequence[Any]]) -> Iterator[pa.RecordBatch]:
    """``rows`` (tuples in the schema's column order) as record batches of ``WRITE_ROWS`` rows."""
    iterator = iter(rows)
    while chunk := list(itertools.islice(iterator, WRITE_ROWS)):
        columns = zip(*chunk, strict=True)
        yield pa.record_batch(
            [pa.array(values, type=field.type) for values, field in zip(columns, schema, strict=True)],
            schema=schema,
        )


def table_of(columns: Sequence[str], types: Sequence[str], rows: Iterable[Sequence[Any]]) -> pa.Table:
    """``rows`` as one Arrow table (in memory: for a listing the caller wants whole)."""
    schema = schema_of(columns, types)
    return pa.Table.from_batches(list(record_batches(schema, rows)), schema=schema)


def write_parquet(
    path: str, columns: Sequence[str], types: Sequence[str], rows: Iterable[Sequence[Any]]
) -> None:
    """Write ``rows`` to a Parquet file at ``path``, a row group of ``WRITE_ROWS`` rows at a time."""
    schema = schema_of(columns, types)
    with pq.ParquetWriter(path, schema) as out:
        for batch in record_batches(schema, rows):
            out.write_batch(batch)


def _writer(path: str, fmt: ArrowFormat, schema: pa.Schema) -> Any:
    """A writer of record batches to a new file at ``path`` in ``fmt``; ``close`` ends it."""
    if fmt == "parquet":
        return pq.ParquetWriter(path, schema)
    return pa.ipc.new_file(path, schema)


def write_kept(
    paths: Sequence[str], fmt: ArrowFormat, id_field: str, text_field: str, drop: Set[str], out: str
) -> tuple[int, int]:
    """Write the rows of the Arrow inputs ``paths`` whose id (as text) is not in ``drop`` to ``out``
    in ``fmt``, with every column, under the first file's schema; an input of another schema raises
    InputError naming it. Returns how many rows were kept and how many dropped."""
    kept = dropped = 0
    writer: Any = None
    schema: pa.Schema | None = None
    try:
        for file in (f for path in paths for f in files_of(path, fmt)):
            source = Batches(file, fmt)
            select(source.schema, id_field, text_field, [], source.name)
            if schema is None:
                schema = source.schema
                writer = _writer(out, fmt, schema)
            elif not source.schema.equals(schema):
                raise InputError(
                    f"{source.name}: its columns ({', '.join(source.schema.names)}) differ from the "
                    f"first input's ({', '.join(schema.names)}); dedup writes one file of one schema"
                )
            for _place, _first, batch in source:
                ids = batch.column(id_field)
                keep = [doc_id not in drop for doc_id in ids.cast(pa.string()).to_pylist()]
                chosen = batch.filter(pa.array(keep, pa.bool_()))
                kept, dropped = kept + chosen.num_rows, dropped + batch.num_rows - chosen.num_rows
                writer.write_batch(chosen)
    finally:
        if writer is not None:
            writer.close()
    return kept, dropped
