"""The bucket partition's insert lock for rows written before a writer's turn
(``buckets.hold_indexed``): taken only while the index stands and nobody builds or drops it, and
once taken, it keeps index builds out. Against a real PostgreSQL, with a second session."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import psycopg
import pytest
from psycopg import sql

from neardup.storage import buckets
from neardup.storage.connect import connect
from neardup.storage.scope import Scope, index_probes
from tests._corpus import planted_corpus
from tests.conftest import psycopg_url

pytestmark = pytest.mark.distributed_variant


@contextmanager
def _scopes(index: Any, database_url: str) -> Iterator[tuple[Scope, psycopg.Connection[Any]]]:
    """This collection's scope on a connection of its own, and a second plain session."""
    first = connect(database_url)
    other = psycopg.connect(psycopg_url(database_url), autocommit=True)
    try:
        s = index._scope
        yield Scope(first, s.schema, s.collection_id, s.distributed), other
    finally:
        first.close()
        other.close()


def _index_sql(scope: Scope, template: str) -> str:
    return scope.sql(template).as_string(scope.conn)


def test_held_while_the_index_stands_and_it_keeps_an_index_build_out(
    make_index: Callable[..., Any], database_url: str
) -> None:
    index = make_index()
    index.add([("a", "some words to store here"), ("b", "other words entirely here")])
    with _scopes(index, database_url) as (scope, other):
        assert buckets.has_index(scope)
        with scope.conn.transaction():
            assert buckets.hold_indexed(scope)
            # Another session cannot drop the index now: it would wait for this transaction.
            with other.transaction():
                other.execute("SET LOCAL lock_timeout = '200ms'")
                with pytest.raises(psycopg.errors.LockNotAvailable):
                    other.execute(_index_sql(scope, "DROP INDEX {bucket_index_q}"))
        assert buckets.has_index(scope)


def test_refused_at_once_while_another_session_drops_the_index(
    make_index: Callable[..., Any], database_url: str
) -> None:
    index = make_index()
    index.add([("a", "some words to store here"), ("b", "other words entirely here")])
    with _scopes(index, database_url) as (scope, other), other.transaction():
        other.execute(_index_sql(scope, "DROP INDEX {bucket_index_q}"))  # not committed: holds the table
        with scope.conn.transaction():
            assert not buckets.hold_indexed(scope)
            # The refusal left the transaction usable, holding nothing on the partition.
            assert scope.conn.execute("SELECT 1").fetchone() == (1,)
            held = scope.conn.execute(
                "SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid() AND relation = to_regclass(%s)",
                (_index_sql(scope, "{buckets_p}"),),
            ).fetchone()
            assert held == (0,)


def test_refused_without_the_index_holding_nothing(make_index: Callable[..., Any], database_url: str) -> None:
    index = make_index()
    index.add([("a", "some words to store here"), ("b", "other words entirely here")])
    with _scopes(index, database_url) as (scope, other):
        other.execute(_index_sql(scope, "DROP INDEX {bucket_index_q}"))
        with scope.conn.transaction():
            assert not buckets.hold_indexed(scope)
            # An index build by another session goes ahead at once: nothing of this one is held.
            with other.transaction():
                other.execute("SET LOCAL lock_timeout = '200ms'")
                buckets.create_index(Scope(other, scope.schema, scope.collection_id, scope.distributed))
        assert buckets.has_index(scope)


def test_a_query_reads_an_older_partitions_band_bucket_content_index_alike(
    make_index: Callable[..., Any], database_url: str
) -> None:
    # Collections made before the index on the key alone keep a unique (band, bucket, content_id)
    # index under the same name; a query's lookup must find the same documents through it.
    docs = planted_corpus(n_sources=8, copies=2, seed=4)
    index = make_index(threshold=0.5, bands=32, rows=4)
    index.add(docs)
    texts = [text for _, text in docs[::3]]
    expected = [index.query(text) for text in texts]
    assert any(expected)
    with _scopes(index, database_url) as (scope, other):
        other.execute(_index_sql(scope, "DROP INDEX {bucket_index_q}"))
        other.execute(
            _index_sql(scope, "CREATE UNIQUE INDEX {bucket_index} ON {buckets_p} (band, bucket, content_id)")
        )
        other.execute(_index_sql(scope, "ANALYZE {buckets_p}"))
    assert [index.query(text) for text in texts] == expected
    if not index.distributed:
        # And through the index, not a scan of the partition: the prepared lookup, planned with
        # sequential scans off, still names no sequential scan of the buckets.
        conn = index._scope.conn
        (name,) = conn.execute(
            "SELECT name FROM pg_prepared_statements WHERE statement LIKE '%%array_positions%%'"
        ).fetchone()
        keys = index._collection.sketcher.band_keys(index._collection.sketcher.signatures([texts[0]]))[0]
        with conn.transaction():
            conn.execute("SET LOCAL enable_seqscan = off")
            # EXPLAIN EXECUTE takes no bound parameters: the values go in as quoted literals.
            arguments = [index._scope.collection_id, list(range(keys.size)), keys.tolist()]
            statement = sql.SQL("EXPLAIN (COSTS OFF) EXECUTE {}({}, {}::int2[], {}::int8[])").format(
                sql.Identifier(name), *map(sql.Literal, arguments)
            )
            plan = conn.execute(statement).fetchall()
        text = "\n".join(row[0] for row in plan)
        assert "Seq Scan on buckets" not in text, text
        assert "_lookup" in text, text


def test_building_a_standing_index_never_waits_for_writers_holding_rows(
    make_index: Callable[..., Any], database_url: str
) -> None:
    # A writer whose deferred index another writer built meanwhile asks for it again in its turn,
    # while a third writer holds rows in the partition before its own turn and waits for that
    # turn. Waiting for the third writer's lock there was a deadlock (seen in
    # test_concurrency): asking for a standing index must take no lock that a writer's rows block.
    index = make_index(threshold=0.5)
    index.add(planted_corpus(n_sources=4, copies=2, seed=1))
    with _scopes(index, database_url) as (scope, other):
        assert buckets.has_index(scope)
        with other.transaction():
            other.execute(_index_sql(scope, "LOCK TABLE {buckets_p} IN ROW EXCLUSIVE MODE"))
            with scope.conn.transaction():
                scope.conn.execute("SET LOCAL lock_timeout = '3s'")
                buckets.create_index(scope)  # before: LockNotAvailable after 3 s
        assert buckets.has_index(scope)


def test_a_chunk_of_stored_members_is_probed_key_by_key_while_the_statistics_lag(
    make_index: Callable[..., Any], database_url: str
) -> None:
    # Statistics taken before the later adds see no content id past the earlier ones, so a chunk's
    # bound from there on looks empty to the planner: the probe must still be one index descent a
    # key, not a scan of the whole index tested against every key.
    index = make_index(threshold=0.5, bands=32, rows=4)
    if index.distributed:
        pytest.skip("the probe on a distributed collection is Citus's plan")
    index.add(planted_corpus(n_sources=150, copies=3, seed=5))
    with _scopes(index, database_url) as (scope, other):
        other.execute(_index_sql(scope, "ALTER TABLE {buckets_p} SET (autovacuum_enabled = off)"))
        other.execute(_index_sql(scope, "ANALYZE {buckets_p}"))
        found = other.execute(_index_sql(scope, "SELECT max(content_id) + 1 FROM {buckets_p}")).fetchone()
        assert found is not None
        (lo,) = found
    index.add([(f"late{i}", text + " and a late line") for i, text in planted_corpus(150, 3, seed=6)])
    scope = index._scope
    with scope.conn.transaction():
        band, bucket = (
            np.asarray(column)
            for column in zip(
                *scope.conn.execute(
                    scope.sql("SELECT DISTINCT band, bucket FROM {buckets_p} WHERE content_id >= %s"), (lo,)
                ).fetchall(),
                strict=True,
            )
        )
        assert band.size > buckets._UNNEST_KEYS  # through the keys' temporary table, with statistics
        buckets._fill_keys(scope, band.astype(np.int16), bucket.astype(np.int64))
        statement = buckets.members_statement(
            "neardup_keys k", " AND b.content_id >= %(lo)s", " ORDER BY b.content_id LIMIT %(most)s", False
        )
        with index_probes(scope.conn):
            plan = "\n".join(
                row[0]
                for row in scope.conn.execute(
                    scope.sql("EXPLAIN (COSTS OFF) " + statement),
                    {"c": scope.collection_id, "lo": int(lo), "most": 1 << 18},
                ).fetchall()
            )
        got = buckets.members_of(
            scope, band.astype(np.int16), bucket.astype(np.int64), lo=int(lo), most=1 << 18
        )
    assert "Index Cond: (bucket = k.bucket)" in plan, plan
    assert "Join Filter" not in plan, plan
    # And the answer is every row of the later contents under those keys.
    assert (
        got[2].size
        == scope.conn.execute(
            scope.sql("SELECT count(*) FROM {buckets_p} WHERE content_id >= %s"), (lo,)
        ).fetchone()[0]
    )
