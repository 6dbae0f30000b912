"""Planner statistics after a batch that more than doubles a collection: sampled before the batch
commits, its own rows included, so the next statement is planned on them at once (autovacuum's
ANALYZE comes a minute or more later). Against a real PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from neardup.ingest.store import ANALYZE_AFTER
from neardup.storage.names import partition_name
from tests._corpus import planted_corpus
from tests.conftest import differs_on_citus, psycopg_url

pytestmark = pytest.mark.distributed_variant

TABLES = ("documents", "contents", "signatures", "pairs")


def _planner_view(database_url: str, schema: str, collection: str) -> dict[str, tuple[float, dict[str, int]]]:
    """Each partition's row count as the planner has it (pg_class.reltuples) and its analyzed columns,
    each with the number of its histogram bounds (0 without a histogram)."""
    with psycopg.connect(psycopg_url(database_url)) as conn:
        row = conn.execute(f'SELECT collection_id FROM "{schema}".collections WHERE name = %s', [collection])
        (cid,) = row.fetchone() or (None,)
        seen: dict[str, tuple[float, dict[str, int]]] = {}
        for table in TABLES:
            partition = partition_name(table, cid)
            (tuples,) = conn.execute(
                "SELECT reltuples FROM pg_class WHERE oid = %s::regclass", [f'"{schema}"."{partition}"']
            ).fetchone() or (None,)
            columns = conn.execute(
                "SELECT attname, coalesce(array_length(histogram_bounds::text::text[], 1), 0) FROM pg_stats"
                " WHERE schemaname = %s AND tablename = %s",
                [schema, partition],
            ).fetchall()
            seen[table] = (float(tuples), {name: int(bounds) for name, bounds in columns})
    return seen


def test_a_batch_that_more_than_doubles_a_collection_leaves_statistics_of_its_own_rows(
    make_index: Callable[..., Any],
    database_url: str,
    schema: str,
    deployment: str,
    request: pytest.FixtureRequest,
) -> None:
    differs_on_citus(
        request,
        deployment,
        "a distributed collection's planner statistics are its shards', kept by each worker's "
        "autovacuum; the coordinator's partitions have none (docs/distributed.md)",
    )
    docs = planted_corpus(n_sources=500, copies=2, seed=4)  # 1,500 documents, most of them distinct
    assert len(docs) > ANALYZE_AFTER
    index = make_index(threshold=0.8, bands=64, rows=2)
    index.add(docs, batch_size=len(docs))
    seen = _planner_view(database_url, schema, index.name)
    stored = index.stats()
    # Every row was sampled (fewer than the 3,000 of its target of 10), so the planner's counts are
    # exact.
    assert seen["documents"][0] == stored.documents == len(docs)
    assert seen["contents"][0] == seen["signatures"][0] == stored.contents
    assert seen["pairs"][0] == stored.pairs > 0
    # The columns neardup's statements filter and join on; not the texts or the signature arrays.
    assert {"collection_id", "doc_id", "external_id", "content_id"} <= seen["documents"][1].keys()
    assert "text" not in seen["documents"][1]
    assert {"content_id", "content_hash", "cluster_id"} <= seen["contents"][1].keys()
    assert seen["signatures"][1].keys() == {"collection_id", "content_id"}
    # The target of 10 for that ANALYZE only: 11 histogram bounds for a unique key (101 at the
    # default of 100).
    assert seen["documents"][1]["doc_id"] == 11


def test_a_small_batch_leaves_statistics_to_autovacuum(
    make_index: Callable[..., Any], database_url: str, schema: str
) -> None:
    index = make_index(threshold=0.8, bands=64, rows=2)
    index.add(planted_corpus(n_sources=20, copies=2, seed=4))  # 60 documents
    # Never analyzed (autovacuum's threshold is 50 changed rows plus a tenth of the table, and it
    # wakes once a minute at most): reltuples -1, no column statistics.
    assert all(
        tuples == -1 and not columns
        for tuples, columns in _planner_view(database_url, schema, index.name).values()
    )


def _estimated_and_true_rows(database_url: str, schema: str, query: str) -> tuple[float, int]:
    with psycopg.connect(psycopg_url(database_url)) as conn:
        plan = conn.execute(f"EXPLAIN (FORMAT JSON) {query}").fetchone()
        (rows,) = conn.execute(f"SELECT count(*) FROM ({query}) q").fetchone() or (0,)
    assert plan is not None
    return float(plan[0][0]["Plan"]["Plan Rows"]), int(rows)


def test_the_views_are_planned_on_statistics_of_the_partitioned_tables(
    database_url: str, fresh_schema: str
) -> None:
    # Autovacuum never analyzes a partitioned table: until the first add did, the planner took the
    # views' joins of them to match 1 row in 200, and put a collection's pairs at 100 times their
    # number (tens of billions for 1M pairs, with a cartesian product of its documents planned).
    from neardup.index import Index

    with Index.create(database_url, "news", 0.5, schema=fresh_schema) as index:
        index.add(planted_corpus(n_sources=500, copies=5, seed=6))  # 3,000 documents
    with psycopg.connect(psycopg_url(database_url)) as conn:
        (collection_id,) = conn.execute(
            f'SELECT collection_id FROM "{fresh_schema}".collections'
        ).fetchone() or (0,)
        analyzed = conn.execute(
            "SELECT DISTINCT tablename FROM pg_stats WHERE schemaname = %s AND inherited", [fresh_schema]
        ).fetchall()
    assert {r[0] for r in analyzed} == set(TABLES)
    for view in ("pair_list", "cluster_list"):
        query = f'SELECT * FROM "{fresh_schema}".{view} WHERE collection_id = {int(collection_id)}'
        estimated, true = _estimated_and_true_rows(database_url, fresh_schema, query)
        assert true > 1_000
        assert true / 10 <= estimated <= true * 10, (view, estimated, true)
