"""Names of neardup's database objects, and the checks that keep user-chosen names safe in SQL."""

from __future__ import annotations

import re

from neardup.errors import ParamsError

# Everything lives in one schema of its own, beside the user's tables.
DEFAULT_SCHEMA = "neardup"
# Alembic's bookkeeping table, kept inside that schema so two schemas migrate independently.
VERSION_TABLE = "alembic_version"
# Tables split per collection (LIST partitions named <table>_c<collection id>).
PARTITIONED_TABLES = ("contents", "documents", "signatures", "buckets", "pairs")
# Partitioned too, with partitions for distributed collections only (storage/citus.py).
KEY_TABLE = "document_keys"

# Lower-case identifiers only: they need no quoting rules and fit PostgreSQL's 63-byte names.
_SCHEMA_RE = re.compile(r"[a-z_][a-z0-9_]{0,62}")
# Collection names are data (always bound parameters), but they also appear in file names,
# URLs and shell scripts: keep them to a portable set of characters.
_COLLECTION_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}")


def check_schema_name(schema: str) -> str:
    """Return ``schema`` if it is a plain lower-case SQL identifier and not one of PostgreSQL's own
    schemas, else raise ParamsError."""
    if not isinstance(schema, str) or not _SCHEMA_RE.fullmatch(schema):
        raise ParamsError(
            f"schema name {schema!r} is not allowed: use 1-63 of a-z, 0-9 and _, not starting with a digit"
        )
    # The system's catalogs and views live there; PostgreSQL refuses to create a pg_ schema.
    if schema == "information_schema" or schema.startswith("pg_"):
        raise ParamsError(
            f"schema name {schema!r} is not allowed: it is PostgreSQL's own (information_schema and "
            "pg_* hold the system's catalogs); choose another, e.g. neardup"
        )
    return schema


def check_collection_name(name: str) -> str:
    """Return ``name`` if it is a valid collection name, else raise ParamsError."""
    if not isinstance(name, str) or not _COLLECTION_RE.fullmatch(name):
        raise ParamsError(
            f"collection name {name!r} is not allowed: use 1-100 of A-Z, a-z, 0-9, _, . and -, "
            "starting with a letter, digit or _"
        )
    return name


def partition_name(table: str, collection_id: int) -> str:
    """The partition of ``table`` that holds one collection's rows."""
    return f"{table}_c{int(collection_id)}"


def bucket_index_name(collection_id: int) -> str:
    """The lookup index of one collection's bucket partition (built after bulk loads)."""
    return f"buckets_c{int(collection_id)}_lookup"
