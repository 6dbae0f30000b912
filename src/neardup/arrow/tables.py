"""Tables given to ``Index.add``: a ``pyarrow.Table``, ``RecordBatch`` or ``RecordBatchReader``, or a
pandas ``DataFrame``, read ``BATCH_ROWS`` rows at a time into checked documents.

A row is named by its position in the table, counted from 0 (``row 12``), across the batches of a
reader; a DataFrame's rows by position, whatever its index. A DataFrame is converted to Arrow a
slice at a time, so the conversion never holds a copy of the whole frame.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa

from neardup.arrow.columns import records_of, select
from neardup.arrow.reading import BATCH_ROWS, slices
from neardup.errors import InputError
from neardup.readers import SourceRecord, checked
from neardup.records import Document


def _batches(table: Any, names: Sequence[str] | None) -> Iterator[pa.RecordBatch]:
    """The table's record batches, of at most ``BATCH_ROWS`` rows each."""
    if isinstance(table, pa.Table | pa.RecordBatch | pa.RecordBatchReader):
        if isinstance(table, pa.Table):
            table = table.to_batches()
        for batch in [table] if isinstance(table, pa.RecordBatch) else table:
            yield from (part for _, part in slices(batch))
    else:  # a pandas DataFrame: its columns must be there before a slice can be taken of them
        missing = [n for n in names or () if n not in table.columns]
        if missing:
            shown = ", ".join(repr(str(c)) for c in table.columns) or "none"
            raise InputError(f"table: column {missing[0]!r} is missing (columns: {shown})")
        for first in range(0, len(table), BATCH_ROWS):
            part = table.iloc[first : first + BATCH_ROWS]  # a slice, then its columns: no whole copy
            part = part if names is None else part[list(names)]
            try:
                yield pa.RecordBatch.from_pandas(part, preserve_index=False)
            except (pa.ArrowException, ValueError, TypeError) as exc:
                raise InputError(
                    f"rows {first} to {first + len(part) - 1}: cannot be converted to Arrow ({exc})"
                ) from exc


def table_records(
    table: Any, id_field: str = "id", text_field: str = "text", meta_fields: Sequence[str] | None = None
) -> Iterator[SourceRecord]:
    """The rows of ``table`` as records (``meta_fields`` None: every other column), named ``row N``;
    a missing column, or one of the wrong type, raises InputError, and so does a null id or text."""
    names = None if meta_fields is None else [id_field, text_field, *meta_fields]
    first = 0
    for batch in _batches(table, names):
        selection = select(batch.schema, id_field, text_field, meta_fields, "table")
        yield from records_of(batch.select(selection.names), selection, "row ", first, None)
        first += batch.num_rows


def table_documents(
    table: Any, id_field: str = "id", text_field: str = "text", meta_fields: Sequence[str] | None = None
) -> Iterator[Document]:
    """``table_records`` checked as documents: a bad row, or an id repeated in the table, raises
    InputError naming the rows (``row 7: id 'a' repeats row 2``)."""
    return checked(table_records(table, id_field, text_field, meta_fields))
