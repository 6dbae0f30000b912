"""PostgreSQL binary COPY streams built by numpy, for fixed-width rows (buckets, signatures, ...).

A binary COPY stream is a header, then per row a 16-bit field count and, per field, a 32-bit
length and the value, all big-endian; then a 16-bit -1 trailer. When every field has a fixed
width the whole stream is one numpy structured array: no Python work per row.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import numpy.typing as npt

# PGCOPY signature, flags field (no OIDs) and header extension length (none).
_HEADER = b"PGCOPY\n\xff\r\n\x00" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x00"
_TRAILER = b"\xff\xff"
# Element type OID of int4, written inside every int4[] value.
_INT4_OID = 23

Kind = Literal["int2", "int4", "int8", "float4", "float8", "bytea", "int4[]"]
_SCALARS: dict[str, str] = {"int2": ">i2", "int4": ">i4", "int8": ">i8", "float4": ">f4", "float8": ">f8"}


def copy_stream(columns: Sequence[tuple[Kind, npt.ArrayLike]]) -> bytes:
    """The binary COPY data for rows whose i-th value of column j is ``columns[j][1][i]``.

    ``bytea`` and ``int4[]`` columns are 2-D arrays (uint8 and uint32 respectively), one row per
    table row, so every value of such a column has the same length.
    """
    arrays = [np.asarray(values) for _, values in columns]
    n = arrays[0].shape[0] if arrays else 0
    fields: list[tuple[str, str] | tuple[str, str, tuple[int, ...]]] = [("count", ">i2")]
    for j, ((kind, _), arr) in enumerate(zip(columns, arrays, strict=True)):
        if arr.shape[0] != n:
            raise ValueError(f"column {j} has {arr.shape[0]} rows, column 0 has {n}")
        fields.append((f"len{j}", ">i4"))
        if kind in _SCALARS:
            fields.append((f"v{j}", _SCALARS[kind]))
        elif kind == "bytea":
            fields.append((f"v{j}", "u1", (arr.shape[1],)))
        elif kind == "int4[]":
            width = arr.shape[1]
            fields.append((f"h{j}", ">i4", (5,)))
            fields.append((f"v{j}", ">i4", (width, 2)))
        else:
            raise ValueError(f"unsupported column kind {kind!r}")
    rows = np.empty(n, dtype=np.dtype(fields))
    rows["count"] = len(columns)
    for j, ((kind, _), arr) in enumerate(zip(columns, arrays, strict=True)):
        if kind in _SCALARS:
            rows[f"len{j}"] = np.dtype(_SCALARS[kind]).itemsize
            rows[f"v{j}"] = arr
        elif kind == "bytea":
            rows[f"len{j}"] = arr.shape[1]
            rows[f"v{j}"] = arr
        else:
            width = arr.shape[1]
            rows[f"len{j}"] = 20 + 8 * width
            # ndim 1, no NULLs, element type int4, then the one dimension: length, lower bound 1.
            rows[f"h{j}"] = (1, 0, _INT4_OID, width, 1)
            rows[f"v{j}"][..., 0] = 4
            # The stored int4 carries the uint32 bits of the signature value.
            rows[f"v{j}"][..., 1] = np.ascontiguousarray(arr, dtype=np.uint32).view(np.int32)
    return _HEADER + rows.tobytes() + _TRAILER
