"""Where a command's database is: --db, $NEARDUP_DATABASE_URL, else the embedded server."""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from neardup.database import Database
    from neardup.index import Index

URL_ENV = "NEARDUP_DATABASE_URL"


def url_given(args: argparse.Namespace) -> bool:
    """Whether a database URL was given (so the embedded server is not used)."""
    return bool(args.db or os.environ.get(URL_ENV))


@contextmanager
def database_url(args: argparse.Namespace) -> Iterator[str]:
    """The URL of the command's database, the embedded server started for the block if needed."""
    url = args.db or os.environ.get(URL_ENV)
    if url:
        yield url
        return
    from neardup.embedded.default_server import default_data_dir, embedded_database

    args.data_directory = str(default_data_dir())
    with embedded_database() as embedded:
        yield embedded


def open_database(args: argparse.Namespace, stack: ExitStack) -> Database:
    """The command's Database, closed with ``stack``."""
    from neardup.database import Database

    url = stack.enter_context(database_url(args))
    return stack.enter_context(Database(url, args.schema, pool_size=1))


def open_index(args: argparse.Namespace, stack: ExitStack) -> Index:
    """The command's collection (--collection), open until ``stack`` closes; ``args.url`` says
    where it is. Opened by Index alone: a query loads nothing it does not use."""
    from neardup.index import Index

    args.url = stack.enter_context(database_url(args))
    return stack.enter_context(Index.open(args.url, args.collection, schema=args.schema))
