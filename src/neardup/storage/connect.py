"""Connections: URLs in, psycopg connections out, database errors translated once, here."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import psycopg
from psycopg import errors as pg_errors
from psycopg.adapt import Loader
from psycopg.pq import Format
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from neardup.errors import DatabaseConnectionError, DatabaseError, NeardupError, SchemaError

# SQLAlchemy's name for PostgreSQL through psycopg 3; plain postgresql:// URLs are accepted too.
_DRIVER = "postgresql+psycopg"
Connection = psycopg.Connection[Any]

# Server messages beyond this are cut in error text: a COPY error can quote a whole row.
_MAX_MESSAGE = 500


def _parse(url: str) -> URL:
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise DatabaseConnectionError(f"not a database URL: {url!r}") from exc
    if parsed.get_backend_name() not in ("postgresql", "postgres"):
        raise DatabaseConnectionError(f"neardup needs PostgreSQL, got a {parsed.get_backend_name()!r} URL")
    return parsed


def sqlalchemy_url(url: str) -> URL:
    """The SQLAlchemy URL (postgresql+psycopg) for a postgresql:// or postgresql+psycopg:// URL."""
    return _parse(url).set(drivername=_DRIVER)


def libpq_url(url: str) -> str:
    """The libpq connection URI for a SQLAlchemy-style URL (the password kept)."""
    return _parse(url).set(drivername="postgresql").render_as_string(hide_password=False)


def redacted(url: str) -> str:
    """The URL with any password hidden, for messages."""
    try:
        return _parse(url).render_as_string(hide_password=True)
    except NeardupError:
        return "<invalid URL>"


class _ArrayLoader(Loader):
    """Loads a binary one-dimensional integer array without NULLs as a numpy array."""

    format = Format.BINARY
    wire = ">i8"
    dtype: type[np.integer] = np.int64

    def load(self, data: bytes | bytearray | memoryview) -> np.ndarray:
        header = np.frombuffer(data, dtype=">i4", count=3)
        if header[0] == 0:
            return np.empty(0, dtype=self.dtype)
        if header[0] != 1 or header[1] != 0:
            raise DatabaseError("expected a one-dimensional integer array without NULLs")
        # Header: ndim, has-null flag, element oid, then (length, lower bound); then each element
        # as a 4-byte length and its big-endian value.
        item = np.dtype(self.wire).itemsize
        rows = np.frombuffer(data, dtype=[("len", ">i4"), ("v", self.wire)], offset=20)
        assert rows.dtype.itemsize == 4 + item
        return rows["v"].astype(self.dtype)


class _Int2ArrayLoader(_ArrayLoader):
    wire, dtype = ">i2", np.int16


class _Int4ArrayLoader(_ArrayLoader):
    # int4[] holds signatures: the stored int4 carries the bits of a uint32 value.
    wire, dtype = ">u4", np.uint32


# PostgreSQL's fixed OIDs of int2[], int4[] and int8[].
_ARRAY_LOADERS: dict[int, type[_ArrayLoader]] = {
    1005: _Int2ArrayLoader,
    1007: _Int4ArrayLoader,
    1016: _ArrayLoader,
}


def connect(url: str) -> Connection:
    """An autocommit psycopg connection (callers open transactions); integer arrays in binary
    results load as numpy."""
    with translated(f"connecting to {redacted(url)}"):
        conn = psycopg.connect(libpq_url(url), autocommit=True)
    for oid, loader in _ARRAY_LOADERS.items():
        conn.adapters.register_loader(oid, loader)
    if conn.info.server_version >= 140000:
        with translated(f"configuring the connection to {redacted(url)}"):
            # A killed client's backend otherwise runs its statement to the end before it notices,
            # holding the collection's lock; with this it aborts within seconds (PostgreSQL 14+).
            conn.execute("SET client_connection_check_interval = '2s'")
    return conn


@contextmanager
def translated(doing: str) -> Iterator[None]:
    """Turn psycopg errors raised inside the block into NeardupError subclasses naming ``doing``."""
    try:
        yield
    except psycopg.OperationalError as exc:
        raise DatabaseConnectionError(f"{doing}: {_message(exc)}") from exc
    except pg_errors.UndefinedTable as exc:
        raise SchemaError(
            f"{doing}: {_message(exc)} (is the neardup schema migrated? run `neardup db upgrade`)"
        ) from exc
    except psycopg.Error as exc:
        raise DatabaseError(f"{doing}: {_message(exc)}") from exc


def _message(exc: psycopg.Error) -> str:
    text = (exc.diag.message_primary or str(exc)).strip().splitlines()[0] if str(exc) else type(exc).__name__
    return text if len(text) <= _MAX_MESSAGE else text[:_MAX_MESSAGE] + "..."
