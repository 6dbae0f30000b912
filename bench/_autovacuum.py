"""Waiting for autovacuum's first pass after a load, so that queries can be timed as a long-lived
archive sees them between loads."""

from __future__ import annotations

import time

import psycopg

from neardup.storage.connect import libpq_url

# The tables of a schema that autovacuum is due to vacuum, by its thresholds (insert-driven since
# PostgreSQL 13, or dead rows), ignoring per-table settings, which neardup does not set.
_DUE = """
SELECT s.relid FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
WHERE s.schemaname = %s AND (
    s.n_ins_since_vacuum > current_setting('autovacuum_vacuum_insert_threshold')::float8
        + current_setting('autovacuum_vacuum_insert_scale_factor')::float8 * greatest(c.reltuples, 0)
    OR s.n_dead_tup > current_setting('autovacuum_vacuum_threshold')::float8
        + current_setting('autovacuum_vacuum_scale_factor')::float8 * greatest(c.reltuples, 0))
"""


def due_tables(url: str, schema: str) -> list[int]:
    """The tables of the schema that autovacuum is due to vacuum now (their oids)."""
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        return [row[0] for row in conn.execute(_DUE, (schema,))]


def autovacuumed(url: str, due: list[int], since: float, timeout: float) -> float | None:
    """Seconds from ``since`` (a ``time.time()``) until a vacuum has finished on every table in
    ``due`` and no autovacuum worker is at work in the database (its ANALYZE of a table comes after
    the table's vacuum is recorded), polled once a second; None when that has not happened
    ``timeout`` seconds after ``since`` (autovacuum off on a --db server, say)."""
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        while time.time() < since + timeout:
            row = conn.execute(
                "SELECT bool_and(coalesce(v >= to_timestamp(%s), false)) IS NOT FALSE AND NOT EXISTS ("
                "SELECT FROM pg_stat_activity WHERE backend_type = 'autovacuum worker' "
                "AND datname = current_database()) FROM ("
                "SELECT greatest(last_autovacuum, last_vacuum) AS v FROM pg_stat_user_tables "
                "WHERE relid = ANY(%s)) t",
                (since, due),
            ).fetchone()
            if row is not None and row[0]:  # all vacuumed since (or nothing was due), none at work
                return time.time() - since
            time.sleep(1.0)
    return None
