"""Scope: SQL composed with quoted identifiers, and planner settings scoped to one lookup."""

from __future__ import annotations

import os

import pytest

from neardup.errors import ParamsError
from neardup.storage.connect import connect
from neardup.storage.scope import Scope, export_snapshot, index_probes, read_snapshot

pytestmark = pytest.mark.distributed_variant


def test_index_probes_turn_scans_off_only_inside(database_url: str) -> None:
    conn = connect(database_url)
    try:
        with conn.transaction():
            with index_probes(conn):
                inside = conn.execute(
                    "SELECT current_setting('enable_hashjoin'), current_setting('enable_seqscan')"
                ).fetchone()
            after = conn.execute(
                "SELECT current_setting('enable_hashjoin'), current_setting('enable_seqscan')"
            ).fetchone()
        assert inside == ("off", "off")
        assert after == ("on", "on")
    finally:
        conn.close()


def test_scope_quotes_schema_and_names_partitions(database_url: str) -> None:
    conn = connect(database_url)
    try:
        text = Scope(conn, "nd_x", 7).sql("SELECT * FROM {documents_p} JOIN {s}.pairs").as_string(conn)
        assert text == 'SELECT * FROM "nd_x"."documents_c7" JOIN "nd_x".pairs'
        with pytest.raises(ParamsError, match="schema name"):
            Scope(conn, 'bad"; DROP TABLE x; --')
    finally:
        conn.close()


@pytest.mark.parametrize("schema", ["nd_x", "a", "public", "s_0123456789"])
def test_rendered_sql_is_what_the_connection_renders(database_url: str, schema: str) -> None:
    """``sql_bytes`` (rendered once, without a connection) gives the bytes psycopg renders for the
    same statement on a connection, per schema and collection."""
    conn = connect(database_url)
    try:
        template = "SELECT * FROM {documents_p} d JOIN {s}.pairs ON d.x = %(c)s"
        for collection_id in (3, 12):
            scope = Scope(conn, schema, collection_id)
            assert scope.sql_bytes(template) == scope.sql(template).as_bytes(conn)
        assert Scope(conn, schema, 3).sql_bytes(template) != Scope(conn, schema, 12).sql_bytes(template)
    finally:
        conn.close()


def test_binary_cursor_is_kept_per_scope_and_replaced_once_closed(database_url: str) -> None:
    conn = connect(database_url)
    try:
        scope = Scope(conn, "public")
        first = scope.binary_cursor()
        assert scope.binary_cursor() is first
        assert first.execute("SELECT %s::int8[]", ([1, 2],)).fetchone()[0].tolist() == [1, 2]  # type: ignore[index]
        assert scope.with_collection(7).binary_cursor() is not first
        first.close()
        again = scope.binary_cursor()
        assert again is not first
        assert not again.closed
        assert again.execute("SELECT 1").fetchone() == (1,)
    finally:
        conn.close()


def test_an_exported_snapshot_is_read_on_another_connection(database_url: str) -> None:
    # A row committed after the export is invisible to the importing transaction, which sees the
    # exporter's snapshot, and visible to a transaction of its own.
    owner, other, writer = connect(database_url), connect(database_url), connect(database_url)
    table = f"snap_{os.getpid()}"
    try:
        writer.execute(f"CREATE TABLE {table} (x int)")
        writer.execute(f"INSERT INTO {table} VALUES (1)")
        with owner.transaction():
            read_snapshot(owner)
            snapshot = export_snapshot(owner)
            writer.execute(f"INSERT INTO {table} VALUES (2)")
            with other.transaction():
                read_snapshot(other, snapshot=snapshot)
                seen = other.execute(f"SELECT array_agg(x ORDER BY x) FROM {table}").fetchone()
            with other.transaction():
                read_snapshot(other)
                fresh = other.execute(f"SELECT array_agg(x ORDER BY x) FROM {table}").fetchone()
        assert seen == ([1],)
        assert fresh == ([1, 2],)
    finally:
        writer.execute(f"DROP TABLE IF EXISTS {table}")
        for conn in (owner, other, writer):
            conn.close()
