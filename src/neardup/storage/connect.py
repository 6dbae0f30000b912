"""Connections: URLs in, psycopg connections out, database errors translated once, here."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg.pq import TransactionStatus
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from neardup.errors import DatabaseConnectionError, DatabaseError, NeardupError, SchemaError
from neardup.storage.binary import register_array_loaders

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


def connect(url: str) -> Connection:
    """An autocommit psycopg connection (callers open transactions); integer arrays in binary
    results load as numpy."""
    with translated(f"connecting to {redacted(url)}"):
        conn = psycopg.connect(libpq_url(url), autocommit=True)
    register_array_loaders(conn)
    if conn.info.server_version >= 140000:
        with translated(f"configuring the connection to {redacted(url)}"):
            # A killed client's backend otherwise runs its statement to the end before it notices,
            # holding the collection's lock; with this it aborts within seconds (PostgreSQL 14+).
            # On a Citus coordinator (PostgreSQL 16+), the views' joins of documents by a content
            # other than their own (pair_list's second document) need repartition joins
            # (docs/distributed.md); elsewhere the second setting is a placeholder nothing reads.
            conn.execute(
                "SET client_connection_check_interval = '2s'; SET citus.enable_repartition_joins = on"
            )
    return conn


@contextmanager
def transaction(conn: Connection) -> Iterator[None]:
    """A transaction of its own on ``conn``, never a savepoint inside someone else's: a write
    acknowledged by neardup is committed when the block ends."""
    if conn.info.transaction_status != TransactionStatus.IDLE:
        raise DatabaseError(
            "the index's connection is inside another transaction (is the Index used from two threads "
            "at once?); the write was not started"
        )
    with conn.transaction():
        yield


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
