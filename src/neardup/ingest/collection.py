"""A writer of a collection opened by name, for the writer processes of ``ingest.parallel``."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from neardup.collection import Collection, open_collection
from neardup.ingest.writer import Writer


@contextmanager
def opened_writer(url: str, schema: str, name: str) -> Iterator[Writer]:
    """A writer of collection ``name`` on a connection of its own, closed when the block ends."""
    conn, scope, row = open_collection(url, schema, name)
    collection = Collection.of(url, scope, row)
    try:
        yield Writer(collection)
    finally:
        collection.close()
        conn.close()
