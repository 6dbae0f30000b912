"""Connections: URLs in, psycopg connections out, database errors translated once, here."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, quote, quote_plus, unquote

import psycopg
from psycopg import errors as pg_errors
from psycopg.pq import TransactionStatus

from neardup.errors import DatabaseConnectionError, DatabaseError, Hint, NeardupError, SchemaError
from neardup.storage.binary import register_array_loaders

# SQLAlchemy's name for PostgreSQL through psycopg 3; plain postgresql:// URLs are accepted too.
_DRIVER = "postgresql+psycopg"
Connection = psycopg.Connection[Any]

# Server messages beyond this are cut in error text: a COPY error can quote a whole row.
_MAX_MESSAGE = 500

# URLs are read as SQLAlchemy's make_url reads them (this is its pattern, and the rendering below is
# its render_as_string), without importing SQLAlchemy: a command that only queries never needs it.
# tests/storage/test_connect.py checks both against SQLAlchemy on arbitrary URLs.
_URL = re.compile(
    r"""
        (?P<name>[\w\+]+)://
        (?:
            (?P<username>[^:/]*)
            (?::(?P<password>[^@]*))?
        @)?
        (?:
            (?:
                \[(?P<ipv6host>[^/\?]+)\] |
                (?P<ipv4host>[^/:\?]+)
            )?
            (?::(?P<port>[^/\?]*))?
        )?
        (?:/(?P<database>[^\?]*))?
        (?:\?(?P<query>.*))?
    """,
    re.X,
)


@dataclass(frozen=True)
class _Url:
    """A database URL's parts, as SQLAlchemy's URL holds them."""

    drivername: str
    username: str | None
    password: str | None
    host: str | None
    port: int | None
    database: str | None
    query: dict[str, list[str]]

    @property
    def backend(self) -> str:
        return self.drivername.split("+")[0]

    def render(self, drivername: str, hide_password: bool) -> str:
        s = drivername + "://"
        if self.username is not None:
            s += quote(self.username, safe=" +")
            if self.password is not None:
                s += ":" + ("***" if hide_password else quote(self.password, safe=" +"))
            s += "@"
        if self.host is not None:
            s += f"[{self.host}]" if ":" in self.host else self.host
        if self.port is not None:
            s += f":{self.port}"
        if self.database is not None:
            s += "/" + quote(self.database, safe=" +/")
        if self.query:
            s += "?" + "&".join(
                f"{quote_plus(key)}={quote_plus(value)}"
                for key in sorted(self.query)
                for value in self.query[key]
            )
        return s


def _parse(url: str) -> _Url:
    m = _URL.match(url) if isinstance(url, str) else None
    try:
        if m is None:
            raise ValueError("no URL")
        port = m["port"]
        query: dict[str, list[str]] = {}
        for key, value in parse_qsl(m["query"] or ""):
            query.setdefault(key, []).append(value)
        username, password, database = (
            None if m[part] is None else unquote(m[part]) for part in ("username", "password", "database")
        )
        host = m["ipv4host"] or m["ipv6host"]
        parsed = _Url(
            m["name"], username, password, host, None if port is None else int(port), database, query
        )
    except ValueError as exc:  # no match, or a port that is no number
        raise DatabaseConnectionError(f"not a database URL: {url!r}") from exc
    if parsed.backend not in ("postgresql", "postgres"):
        raise DatabaseConnectionError(f"neardup needs PostgreSQL, got a {parsed.backend!r} URL")
    return parsed


def sqlalchemy_url(url: str) -> str:
    """The SQLAlchemy URL (postgresql+psycopg) for a postgresql:// or postgresql+psycopg:// URL."""
    return _parse(url).render(_DRIVER, hide_password=False)


def libpq_url(url: str) -> str:
    """The libpq connection URI for a SQLAlchemy-style URL (the password kept)."""
    return _parse(url).render("postgresql", hide_password=False)


def libpq_parts(url: str) -> tuple[str, str | None]:
    """The libpq connection URI without its password, and the password (for PGPASSWORD), so that
    a program given the URI on its command line shows no secret to other users."""
    parsed = _parse(url)
    bare = _Url(
        parsed.drivername, parsed.username, None, parsed.host, parsed.port, parsed.database, parsed.query
    )
    return bare.render("postgresql", hide_password=False), parsed.password


def redacted(url: str) -> str:
    """The URL with any password hidden, for messages."""
    try:
        parsed = _parse(url)
    except NeardupError:
        return "<invalid URL>"
    return parsed.render(parsed.drivername, hide_password=True)


def connect(url: str) -> Connection:
    """An autocommit psycopg connection (callers open transactions); integer arrays in binary
    results load as numpy."""
    with translated(f"connecting to {redacted(url)}"):
        conn = psycopg.connect(libpq_url(url), autocommit=True)
    register_array_loaders(conn)
    with translated(f"configuring the connection to {redacted(url)}"):
        # No JIT compilation: neardup's statements are index probes and joins whose planner
        # estimates run far too high (pair_list's identical-copies half is estimated at many times
        # its rows), which puts plain listings and counts above jit_above_cost, and compiling such
        # a plan costs many times what running it does.
        conn.execute("SET jit = off")
    if conn.info.server_version >= 140000:
        with translated(f"configuring the connection to {redacted(url)}"):
            # A killed client's backend otherwise runs its statement to the end before it notices,
            # holding the collection's lock; with this it aborts within seconds (PostgreSQL 14+).
            # On a Citus coordinator (PostgreSQL 16+), the views' joins of documents by a content
            # other than their own (pair_list's second document) need repartition joins, and the
            # planner settings a transaction sets with SET LOCAL (index_probes, no JIT) are sent
            # to the workers, which plan the shards' statements (docs/distributed.md); elsewhere
            # these settings are placeholders nothing reads. A coordinator's session keeps up to 8
            # connections to each worker open between statements (Citus's default keeps one): a
            # statement on every shard of a distributed collection runs its tasks over several
            # connections a worker, and opening them again for each statement (a new backend on the
            # worker each) cost more than the tasks themselves on a cluster of many shards.
            conn.execute(
                "SET client_connection_check_interval = '2s'; SET citus.enable_repartition_joins = on; "
                "SET citus.propagate_set_commands = 'local'; SET citus.max_cached_conns_per_worker = 8"
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
            f"{doing}: {_message(exc)}",
            hint=Hint("if the neardup schema is not migrated, migrate it with", remedy="upgrade"),
        ) from exc
    except psycopg.Error as exc:
        raise DatabaseError(f"{doing}: {_message(exc)}") from exc


def _message(exc: psycopg.Error) -> str:
    text = (exc.diag.message_primary or str(exc)).strip().splitlines()[0] if str(exc) else type(exc).__name__
    return text if len(text) <= _MAX_MESSAGE else text[:_MAX_MESSAGE] + "..."
