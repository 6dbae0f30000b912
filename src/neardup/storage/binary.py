"""PostgreSQL's binary wire format for neardup's rows, both ways, in numpy.

Out: binary COPY streams for fixed-width rows (buckets, signatures, pairs, ...), and integer
arrays as bound parameters (``Int2s``, ``Int8s``). In: integer arrays (``int2[]``, ``int8[]``) in
binary results load as numpy arrays. Signatures are stored as ``bytea``, their
values big-endian (``signature_bytes``, ``signature_matrix``; migration 0008).

A binary COPY stream is a header, then per row a 16-bit field count and, per field, a 32-bit
length and the value, all big-endian; then a 16-bit -1 trailer. When every field has a fixed
width the whole stream is one numpy structured array: no Python work per row.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import psycopg
from psycopg.adapt import Dumper, Loader
from psycopg.pq import Format

from neardup.errors import DatabaseError, InternalError

# PGCOPY signature, flags field (no OIDs) and header extension length (none).
_HEADER = b"PGCOPY\n\xff\r\n\x00" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x00"
_TRAILER = b"\xff\xff"
# A stored signature value: 4 bytes, big-endian (as PostgreSQL's int4send writes an integer, so
# the schema's signature_values() reads them in SQL).
_SIGNATURE_VALUE = np.dtype(">u4")
# An array value's first two header fields: dimensions and the has-NULL flag.
_HEAD = struct.Struct(">2i")

Kind = Literal["int2", "int4", "int8", "float4", "float8", "bytea"]
_SCALARS: dict[str, str] = {"int2": ">i2", "int4": ">i4", "int8": ">i8", "float4": ">f4", "float8": ">f8"}


def copy_stream(columns: Sequence[tuple[Kind, npt.ArrayLike]]) -> memoryview:
    """The binary COPY data for rows whose i-th value of column j is ``columns[j][1][i]``.

    A ``bytea`` column is a 2-D uint8 array, one row per table row, so every value of it has the
    same length.

    The rows are written in place between the header and the trailer of one buffer, handed out as
    a memoryview, which psycopg sends in chunks without copying: a batch's signatures are large,
    and ``tobytes()``, the concatenation and psycopg's slicing of bytes each copied them once more
    into freshly faulted pages, whose zeroing and copying were a noticeable share of an ingest.
    """
    arrays = [np.asarray(values) for _, values in columns]
    n = arrays[0].shape[0] if arrays else 0
    fields: list[tuple[str, str] | tuple[str, str, tuple[int, ...]]] = [("count", ">i2")]
    for j, ((kind, _), arr) in enumerate(zip(columns, arrays, strict=True)):
        if arr.shape[0] != n:
            raise InternalError(f"COPY column {j} has {arr.shape[0]} rows, column 0 has {n}")
        fields.append((f"len{j}", ">i4"))
        if kind in _SCALARS:
            fields.append((f"v{j}", _SCALARS[kind]))
        elif kind == "bytea":
            fields.append((f"v{j}", "u1", (arr.shape[1],)))
        else:
            raise InternalError(f"unsupported COPY column kind {kind!r}")
    row_type = np.dtype(fields)
    stream = np.empty(len(_HEADER) + n * row_type.itemsize + len(_TRAILER), dtype=np.uint8)
    stream[: len(_HEADER)] = np.frombuffer(_HEADER, dtype=np.uint8)
    stream[stream.size - len(_TRAILER) :] = np.frombuffer(_TRAILER, dtype=np.uint8)
    rows = np.ndarray(n, dtype=row_type, buffer=stream, offset=len(_HEADER))
    rows["count"] = len(columns)
    for j, ((kind, _), arr) in enumerate(zip(columns, arrays, strict=True)):
        rows[f"len{j}"] = np.dtype(_SCALARS[kind]).itemsize if kind in _SCALARS else arr.shape[1]
        rows[f"v{j}"] = arr
    return stream.data


def signature_bytes(signatures: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint8]:
    """Signatures as stored, one row of ``4 * num_perm`` bytes each (a ``bytea`` COPY column)."""
    values = np.ascontiguousarray(signatures, dtype=_SIGNATURE_VALUE)
    return values.view(np.uint8).reshape(values.shape[0], 4 * values.shape[1])


def signature_matrix(stored: Sequence[bytes], num_perm: int) -> npt.NDArray[np.uint32]:
    """Stored signatures (``bytea`` values, or one value holding several) as one row each."""
    raw = b"".join(stored)  # one value is returned as it is, not copied
    if len(raw) % (4 * num_perm):
        raise DatabaseError(f"stored signatures of {len(raw)} bytes are not {num_perm} values each")
    return np.frombuffer(raw, dtype=_SIGNATURE_VALUE).astype(np.uint32).reshape(-1, num_perm)


@functools.cache
def _elements(wire: str) -> np.dtype[np.void]:
    """An integer array's elements on the wire: each its 4-byte length, then its big-endian value."""
    return np.dtype([("len", ">i4"), ("v", wire)])


class _ArrayLoader(Loader):
    """Loads a binary integer array without NULLs (of any number of dimensions) as a numpy array."""

    format = Format.BINARY
    wire = ">i8"
    dtype: type[np.integer] = np.int64

    def load(self, data: bytes | bytearray | memoryview) -> np.ndarray:
        # Header: ndim, has-null flag, element oid, then (length, lower bound) per dimension; then
        # each element as a 4-byte length and its big-endian value. The header is read with struct,
        # not numpy: a query loads one such value a candidate, and numpy's calls cost more per call.
        ndim, has_null = _HEAD.unpack_from(data)
        if ndim == 0:
            return np.empty(0, dtype=self.dtype)
        if has_null != 0:
            raise DatabaseError("expected an integer array without NULLs")
        shape = struct.unpack_from(f">{2 * ndim}i", data, 12)[::2]
        rows = np.frombuffer(data, dtype=_elements(self.wire), offset=12 + 8 * ndim)
        return rows["v"].astype(self.dtype).reshape(shape)


class _Int2ArrayLoader(_ArrayLoader):
    wire, dtype = ">i2", np.int16


# PostgreSQL's fixed OIDs of int2[] and int8[].
_ARRAY_LOADERS: dict[int, type[_ArrayLoader]] = {
    1005: _Int2ArrayLoader,
    1016: _ArrayLoader,
}


@dataclass(frozen=True)
class Int8s:
    """A 1-D integer array to bind as one ``int8[]`` parameter, dumped by numpy in one step (a
    Python list is dumped by psycopg element by element, in Python)."""

    values: npt.ArrayLike


@dataclass(frozen=True)
class Int2s:
    """A 1-D integer array to bind as one ``int2[]`` parameter (as ``Int8s``)."""

    values: npt.ArrayLike


class _ArrayDumper(Dumper):
    format = Format.BINARY
    oid = 1016  # int8[]
    element_oid, wire = 20, ">i8"

    def dump(self, obj: Int8s | Int2s) -> bytes:
        values = np.asarray(obj.values)
        if values.ndim != 1:
            raise InternalError(f"an array parameter must be 1-D, got shape {values.shape}")
        if values.size == 0:
            return struct.pack(">3i", 0, 0, self.element_oid)
        # ndim 1, no NULLs, the element type, then the one dimension: length, lower bound 1; then
        # each element as its 4-byte length and big-endian value.
        items = np.empty(values.size, dtype=_elements(self.wire))
        items["len"] = np.dtype(self.wire).itemsize
        items["v"] = values
        # Values of a type that fits the wire's as it is need no check (a query's keys are int64).
        if not np.can_cast(values.dtype, self.wire) and not np.array_equal(items["v"], values):
            raise InternalError(f"array parameter values out of range for {self.wire}")
        return struct.pack(">5i", 1, 0, self.element_oid, values.size, 1) + items.tobytes()


class _Int2ArrayDumper(_ArrayDumper):
    oid, element_oid, wire = 1005, 21, ">i2"


def register_array_loaders(conn: psycopg.Connection[Any]) -> None:
    """Load binary int2[] and int8[] results on ``conn`` as numpy arrays, and dump
    ``Int8s`` and ``Int2s`` parameters as binary arrays."""
    for oid, loader in _ARRAY_LOADERS.items():
        conn.adapters.register_loader(oid, loader)
    conn.adapters.register_dumper(Int8s, _ArrayDumper)
    conn.adapters.register_dumper(Int2s, _Int2ArrayDumper)
