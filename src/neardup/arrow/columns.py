"""Which columns of an Arrow schema are a record's id, text and metadata, checked once a schema,
and a record batch's rows as records, each named by where it stands.

An id column holds strings or integers (an integer id becomes its decimal text, as in JSONL); the
text column holds strings; metadata columns hold anything JSON can say, times, dates and decimals
written as their text (binary columns are refused: JSON has no bytes). Dictionary-encoded columns
(pandas categoricals) count as their values' type. A null id or text is a bad row.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from neardup.errors import InputError
from neardup.readers import BadRecord, OnBad, SourceRecord


def _value_type(t: pa.DataType) -> pa.DataType:
    return t.value_type if pa.types.is_dictionary(t) else t


def _is_string(t: pa.DataType) -> bool:
    t = _value_type(t)
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t))


def _is_binary(t: pa.DataType) -> bool:
    t = _value_type(t)
    return bool(
        pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_fixed_size_binary(t)
        or pa.types.is_binary_view(t)
    )


def _written_as_text(t: pa.DataType) -> bool:
    """Whether a metadata column's values go to JSON as their text (JSON has no time or decimal)."""
    t = _value_type(t)
    return bool(pa.types.is_temporal(t) or pa.types.is_decimal(t))


@dataclass(frozen=True)
class Selection:
    """The columns a record is made of: its id, its text and its metadata, in that order."""

    id: str
    text: str
    meta: tuple[str, ...]

    @property
    def names(self) -> list[str]:
        """Every column read, the id and text first."""
        return [self.id, self.text, *self.meta]


def select(
    schema: pa.Schema, id_field: str, text_field: str, meta_fields: Sequence[str] | None, name: str
) -> Selection:
    """The columns of ``schema`` that make a record (``meta_fields`` None: every column but the id
    and the text), or InputError naming ``name`` and the column that is missing or of a type that
    cannot be one."""
    names = schema.names
    wanted = [id_field, text_field, *(meta_fields or ())]
    for key in wanted:
        if key not in names:
            shown = ", ".join(repr(n) for n in names) or "none"
            raise InputError(f"{name}: column {key!r} is missing (columns: {shown})")
        if names.count(key) > 1:
            raise InputError(f"{name}: column {key!r} appears {names.count(key)} times; name it once")
    id_type, text_type = schema.field(id_field).type, schema.field(text_field).type
    if not (_is_string(id_type) or pa.types.is_integer(_value_type(id_type))):
        raise InputError(f"{name}: column {id_field!r} (the id) is {id_type}, not a string or an integer")
    if not _is_string(text_type):
        hint = " (decode it to UTF-8 strings first)" if _is_binary(text_type) else ""
        raise InputError(f"{name}: column {text_field!r} (the text) is {text_type}, not a string{hint}")
    meta = (
        tuple(n for n in names if n not in (id_field, text_field))
        if meta_fields is None
        else tuple(dict.fromkeys(m for m in meta_fields if m not in (id_field, text_field)))
    )
    for key in meta:
        if _is_binary(schema.field(key).type):
            raise InputError(
                f"{name}: column {key!r} is {schema.field(key).type}, which metadata (JSON) cannot hold; "
                "leave it out with --meta-fields (meta= in Python)"
            )
    return Selection(id_field, text_field, meta)


def _plain(column: pa.Array, as_text: bool) -> list[object]:
    """A column's values as Python objects, as JSON will hold them."""
    if as_text:
        column = pc.cast(column, pa.string())
    return column.to_pylist()  # type: ignore[no-any-return]


def records_of(
    batch: pa.RecordBatch, selection: Selection, place: str, first: int, on_bad: OnBad | None
) -> Iterator[SourceRecord]:
    """The rows of ``batch`` as records, row ``first + i`` named ``f"{place}{first + i}"``; a null
    id or text raises InputError, or with ``on_bad`` is reported there and left out."""
    ids_column = batch.column(selection.id)
    if pa.types.is_integer(_value_type(ids_column.type)):
        ids_column = pc.cast(ids_column, pa.string())
    ids, texts = ids_column.to_pylist(), batch.column(selection.text).to_pylist()
    columns = [_plain(batch.column(m), _written_as_text(batch.column(m).type)) for m in selection.meta]
    metas: Iterator[tuple[object, ...] | None] = (
        zip(*columns, strict=True) if columns else itertools.repeat(None)
    )
    for n, doc_id, text, values in zip(itertools.count(first), ids, texts, metas):
        if doc_id is None or text is None:
            where = f"{place}{n}"
            column = selection.id if doc_id is None else selection.text
            problem = InputError(f"{where}: column {column!r} is null")
            if on_bad is None:
                raise problem
            on_bad(BadRecord(where, str(problem), ""))
            continue
        meta = None if values is None else dict(zip(selection.meta, values, strict=True))
        yield SourceRecord(doc_id, text, meta, f"{place}{n}", "")
