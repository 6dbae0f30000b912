"""Counts estimated from a sample of the contents: a distributed collection's counts past
``ESTIMATE_ABOVE`` content ids (an exact count there is a scan of every shard), each surface saying
which it gives; one server always counts exactly. Against a real PostgreSQL (and Citus in the
distributed variant)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from neardup.database import Database
from neardup.storage import statistics
from neardup.storage.connect import connect
from neardup.storage.scope import Scope
from tests._corpus import planted_corpus

pytestmark = pytest.mark.distributed_variant

COUNTED = ("documents", "contents", "pairs", "identical_pairs", "document_pairs", "clusters")
DENSE = ("dense_clusters", "dense_contents", "dense_documents")


def _corpus() -> list[tuple[str, str]]:
    """Clusters of near-copies, exact copies (identical pairs, some inside clusters), and texts
    without a pair."""
    docs = planted_corpus(n_sources=90, copies=2, seed=7)
    copies = [(f"{i}.same", t) for i, t in docs[::7]]
    alone = planted_corpus(n_sources=60, copies=0, seed=8)
    return [*docs, *copies, *[(f"alone.{i}", t) for i, t in alone]]


def _counts(found: Any) -> dict[str, int]:
    return {k: getattr(found, k) for k in COUNTED}


@pytest.fixture
def filled(make_index: Callable[..., Any]) -> Any:
    index = make_index(threshold=0.5, dense_cluster_size=3)  # the planted clusters are dense
    index.add(_corpus())
    return index


def test_a_sample_of_every_content_id_gives_the_exact_counts_everywhere_they_are_shown(
    filled: Any, database_url: str, schema: str, deployment: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    exact = filled.stats()
    assert exact.counted == "exact"
    assert min(exact.identical_pairs, exact.pairs, exact.clusters) > 0
    assert exact.document_pairs > exact.pairs  # copies of a text in a pair multiply its pairs
    monkeypatch.setattr(statistics, "ESTIMATE_ABOVE", 0)
    said = "estimated" if deployment == "citus" else "exact"
    s = filled.stats()
    assert s.counted == said
    assert _counts(s) == _counts(exact)  # the sample is every id: the estimate is the count
    assert exact.dense_clusters > 0
    assert [getattr(s, k) for k in DENSE] == [getattr(exact, k) for k in DENSE]
    assert (s.bucket_rows, s.largest_buckets) == (exact.bucket_rows, exact.largest_buckets)
    db = Database(database_url, schema)
    try:
        info = db.info(filled.name)
        (listed,) = (c for c in db.collections() if c.name == filled.name)
        review = db.review_counts([filled.name])[filled.name]
    finally:
        db.close()
    for found in (info, listed):
        assert found.counted == said
        assert (found.documents, found.pairs, found.clusters, found.document_pairs) == (
            exact.documents,
            exact.pairs,
            exact.clusters,
            exact.document_pairs,
        )
    assert review == {
        "documents": exact.documents,
        "clusters": exact.clusters,
        "document_pairs": exact.document_pairs,
        "labelled": 0,
        "left": exact.document_pairs,
        "estimated": int(deployment == "citus"),
    }


def test_a_sample_of_some_content_ids_estimates_the_counts_near_them(
    filled: Any, deployment: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    exact = filled.stats()
    monkeypatch.setattr(statistics, "ESTIMATE_ABOVE", 0)
    monkeypatch.setattr(statistics, "SAMPLE_WINDOWS", 8)
    monkeypatch.setattr(statistics, "SAMPLE_IDS", exact.contents // 2)
    s = filled.stats()
    if deployment != "citus":  # one server counts, whatever the size
        assert (s.counted, _counts(s)) == ("exact", _counts(exact))
        return
    assert s.counted == "estimated"
    assert _counts(s) != _counts(exact)  # half the ids: not every count comes out exact
    for key in COUNTED + DENSE:
        assert abs(getattr(s, key) - getattr(exact, key)) <= 0.35 * getattr(exact, key), key


def test_the_fullest_buckets_are_found_through_a_sample_and_counted_exactly(
    make_index: Callable[..., Any], deployment: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = " ".join(f"word{i}" for i in range(300))
    crowd = [(f"crowd.{i:02d}", f"{base} ending{i}") for i in range(60)]  # many bands shared by all
    alone = planted_corpus(n_sources=140, copies=0, seed=9)
    index = make_index(threshold=0.5)
    index.add([*crowd, *[(f"alone.{i}", t) for i, t in alone]])
    exact = index.stats()
    assert exact.largest_buckets[0][2] >= 40
    monkeypatch.setattr(statistics, "ESTIMATE_ABOVE", 0)
    monkeypatch.setattr(statistics, "SAMPLE_WINDOWS", 4)
    monkeypatch.setattr(statistics, "SAMPLE_IDS", exact.contents // 4)
    s = index.stats()
    assert s.counted == ("estimated" if deployment == "citus" else "exact")
    # Each sampled bucket is counted whole: the fullest, which the sample holds a quarter of, exactly.
    assert s.largest_buckets[:3] == exact.largest_buckets[:3]
    assert abs(s.bucket_rows - exact.bucket_rows) <= 0.35 * exact.bucket_rows


def test_the_sample_is_read_by_index_lookups_not_a_scan_of_each_shard(
    filled: Any, database_url: str, schema: str, deployment: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    span = 100_000  # windows of a collection this large: each a range of the sampled ids
    with connect(database_url) as conn, conn.transaction():
        (cid,) = conn.execute(
            f'SELECT collection_id FROM "{schema}".collections WHERE name = %s', (filled.name,)
        ).fetchone() or (0,)
        scope = Scope(conn, schema, cid, deployment == "citus")
        # Scans other than an index's are priced out, so one shows only where no index serves.
        conn.execute("SET LOCAL enable_seqscan = off")
        conn.execute("SET LOCAL citus.explain_all_tasks = on")
        statements = [
            *statistics.sample_statements(scope, span),
            (statistics.SECOND_DOCUMENTS, [cid, [1, 2, 3]]),
            (statistics.CLUSTER_SIZES, [cid, [1, 2, 3]]),
        ]
        assert len(statistics.windows(cid, span)) == statistics.SAMPLE_WINDOWS
        for query, params in statements:
            plan = "\n".join(r[0] for r in conn.execute(scope.sql("EXPLAIN " + query), params))
            assert "Seq Scan" not in plan, plan
            # and every index is read by a condition on it, not whole
            scans = [line for line in plan.splitlines() if " Scan using " in line or "Index Scan on" in line]
            assert scans, plan
            assert len(scans) == plan.count("Index Cond:"), plan
            if deployment == "citus":  # a task a shard, each reading its index
                assert "Task Count" in plan, plan
