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
from typing import NamedTuple, cast

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
        kind = _value_type(schema.field(key).type)
        if _is_binary(kind) or pa.types.is_interval(kind):
            raise InputError(
                f"{name}: column {key!r} is {schema.field(key).type}, which metadata (JSON) cannot hold; "
                "leave it out with --meta-fields (meta= in Python)"
            )
    return Selection(id_field, text_field, meta)


class _Unreadable(NamedTuple):
    """A value pyarrow could not give as a Python object (a string that is not UTF-8), and why."""

    reason: str


def _plain(column: pa.Array, as_text: bool, where: str, name: str) -> list[object]:
    """A column's values as Python objects, as JSON will hold them; a value that cannot be one
    (invalid UTF-8 in a string column) is an ``_Unreadable`` in its place. A column that cannot be
    converted at all raises InputError naming ``where`` (file and row group) and the column."""
    try:
        if as_text:
            column = pc.cast(column, pa.string())
        return column.to_pylist()  # type: ignore[no-any-return]
    except UnicodeDecodeError:
        return [_value(column, i) for i in range(len(column))]
    except pa.ArrowException as exc:
        raise InputError(
            f"{where}: column {name!r} ({column.type}) cannot be read as a value ({exc})"
        ) from exc


def _value(column: pa.Array, i: int) -> object:
    try:
        return column[i].as_py()
    except UnicodeDecodeError as exc:
        return _Unreadable(f"not valid UTF-8 ({exc.reason} at byte {exc.start})")


def _problem(row: tuple[object, ...], names: Sequence[str]) -> str | None:
    """Why a row is bad (a null id or text, a value that is not UTF-8), naming its column, or None."""
    for value, name in zip(row, names, strict=True):
        if isinstance(value, _Unreadable):
            return f"column {name!r} is {value.reason}"
    for value, name in zip(row[:2], names[:2], strict=True):
        if value is None:
            return f"column {name!r} is null"
    return None


def records_of(
    batch: pa.RecordBatch, selection: Selection, place: str, first: int, on_bad: OnBad | None
) -> Iterator[SourceRecord]:
    """The rows of ``batch`` as records, row ``first + i`` named ``f"{place}{first + i}"``; a null
    id or text, or a string that is not UTF-8, raises InputError naming the row and the column,
    or with ``on_bad`` is reported there and left out."""
    ids_column = batch.column(selection.id)
    if pa.types.is_integer(_value_type(ids_column.type)):
        ids_column = pc.cast(ids_column, pa.string())
    rows_from = f"{place}{first} to {first + batch.num_rows - 1}"
    ids = _plain(ids_column, False, rows_from, selection.id)
    texts = _plain(batch.column(selection.text), False, rows_from, selection.text)
    columns = [
        _plain(batch.column(m), _written_as_text(batch.column(m).type), rows_from, m) for m in selection.meta
    ]
    metas: Iterator[tuple[object, ...] | None] = (
        zip(*columns, strict=True) if columns else itertools.repeat(None)
    )
    for n, doc_id, text, values in zip(itertools.count(first), ids, texts, metas):
        why = _problem((doc_id, text, *(values or ())), selection.names)
        if why is not None:
            where = f"{place}{n}"
            problem = InputError(f"{where}: {why}")
            if on_bad is None:
                raise problem
            on_bad(BadRecord(where, str(problem), ""))
            continue
        meta = None if values is None else dict(zip(selection.meta, values, strict=True))
        yield SourceRecord(cast(str, doc_id), cast(str, text), meta, f"{place}{n}", "")
