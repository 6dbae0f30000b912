"""Parquet and Arrow in and out: files read by record batch, tables given to ``Index.add``, and
listings as Arrow tables or Parquet files.

pyarrow is an optional extra (``pip install 'neardup[arrow]'``). This package's own module
imports none of it: ``is_table`` tells an Arrow table or a pandas DataFrame apart without importing
either library (a caller who has one has imported it), and the modules that do import pyarrow,
``reading``, ``tables``, ``writing`` and ``listings``, are imported only when such an input or
output is used. Without pyarrow, importing any of them raises a ``NeardupError`` saying how to
install it.

    >>> import pyarrow as pa
    >>> from neardup.arrow import is_table
    >>> is_table(pa.table({"id": ["a"], "text": ["one"]})), is_table([("a", "one")])
    (True, False)
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from neardup.errors import NeardupError, ParamsError

if TYPE_CHECKING:
    from neardup.arrow.listings import clusters_table, pairs_table

INSTALL_HINT = "pip install 'neardup[arrow]'"
Table = Any
"""A ``pyarrow.Table``, ``RecordBatch`` or ``RecordBatchReader``, or a pandas ``DataFrame``."""


def require() -> None:
    """Import pyarrow, or raise NeardupError saying how to install it."""
    try:
        import pyarrow  # noqa: F401
    except ImportError as exc:
        raise NeardupError(f"Parquet and Arrow need pyarrow: {INSTALL_HINT} ({exc})") from exc


def is_table(value: object) -> bool:
    """Whether ``value`` is a ``pyarrow.Table``, ``RecordBatch`` or ``RecordBatchReader``, or a
    pandas ``DataFrame``; imports neither library (each is checked only if already imported)."""
    pa = sys.modules.get("pyarrow")
    if pa is not None and isinstance(value, pa.Table | pa.RecordBatch | pa.RecordBatchReader):
        return True
    pd = sys.modules.get("pandas")
    return pd is not None and isinstance(value, pd.DataFrame)


def rows_of(
    records: Iterable[Any] | Table, id_field: str, text_field: str, meta: Sequence[str] | None
) -> Iterable[Any]:
    """``records`` as they are, or a table's rows as checked documents (``tables.table_documents``);
    ParamsError for column names given with records that are not a table."""
    if is_table(records):
        require()
        from neardup.arrow.tables import table_documents

        return table_documents(records, id_field, text_field, meta)
    if (id_field, text_field, meta) != ("id", "text", None):
        raise ParamsError("id, text and meta name a table's columns; tuples and dicts take none")
    return records


# The listings as Arrow tables, loaded on first use (PEP 562) so that this module imports no pyarrow.
_LISTINGS = ("clusters_table", "pairs_table")


def __getattr__(name: str) -> Any:
    if name not in _LISTINGS:
        raise AttributeError(f"module 'neardup.arrow' has no attribute {name!r}")
    value = getattr(importlib.import_module("neardup.arrow.listings"), name)
    globals()[name] = value
    return value


__all__ = ["INSTALL_HINT", "Table", "clusters_table", "is_table", "pairs_table", "require", "rows_of"]
