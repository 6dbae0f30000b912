"""Distributed collections: the clear error without Citus, and on a real Citus cluster (when
NEARDUP_TEST_CITUS_URL names its coordinator) the layout and the same results as one server."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from neardup.errors import DistributedError, NeardupError, ParamsError
from neardup.index import Index
from neardup.storage.connect import connect
from tests._corpus import planted_corpus
from tests._state import collection_state
from tests.conftest import Run, distributed_schema, psycopg_url

EXHAUSTIVE: dict[str, Any] = {"threshold": 0.5, "bands": 64, "rows": 2}


@pytest.fixture
def citus_schema(citus_url: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """A schema name on the coordinator no one has created yet, dropped afterwards."""
    name = f"nd_dist_{os.getpid()}_{abs(hash(request.node.name)) % 10**6}"
    yield name
    with psycopg.connect(psycopg_url(citus_url), autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def test_distributed_without_citus_is_a_clear_error(
    database_url: str, fresh_schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with connect(database_url) as conn:
        if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'citus'").fetchone():
            pytest.skip("this database has Citus installed")
    with pytest.raises(DistributedError, match=r"citus extension is not (installed|available)"):
        Index.create(database_url, "spread", schema=fresh_schema, distributed=True)
    with pytest.raises(ParamsError, match="shards"):
        Index.create(database_url, "spread", schema=fresh_schema, shards=4)
    status, _, err = Run(database_url, fresh_schema, "spread", capsys)("init", "--distributed")
    assert status == 1
    assert "citus extension" in err
    assert err.count("\n") == 1
    # Nothing was made distributed, and a plain collection still works there.
    with Index.create(database_url, "plain", schema=fresh_schema) as index:
        assert not index.distributed


def _dist(conn: psycopg.Connection[tuple[object, ...]], schema: str) -> dict[str, tuple[str, object, int]]:
    rows = conn.execute(
        "SELECT c.relname, p.partmethod, column_to_column_name(p.logicalrelid, p.partkey), p.colocationid "
        "FROM pg_dist_partition p JOIN pg_class c ON c.oid = p.logicalrelid "
        "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s",
        (schema,),
    ).fetchall()
    return {str(r[0]): (str(r[1]), r[2], int(str(r[3]))) for r in rows}


def test_the_layout_of_a_distributed_schema(citus_url: str, citus_schema: str) -> None:
    with Index.create(citus_url, "laid-out", schema=citus_schema, distributed=True, shards=3) as index:
        assert index.distributed
        index.add([("a", "some words to spread around"), ("b", "some words to spread around!")])
        assert [p[:2] for p in index.pairs()] == [("a", "b")]
    with psycopg.connect(psycopg_url(citus_url)) as conn:
        dist = _dist(conn, citus_schema)
        (cid,) = conn.execute(
            f'SELECT collection_id FROM "{citus_schema}".collections WHERE distributed'
        ).fetchone() or (None,)
        shards = conn.execute(
            "SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = %s::regclass",
            (f"{citus_schema}.buckets_c{cid}",),
        ).fetchone()
    assert dist["collections"][0] == "n"  # a reference table
    by_content = {t: dist[t] for t in ("contents", "signatures", "documents", "pairs")}
    assert {t: d[1] for t, d in by_content.items()} == {
        "contents": "content_id",
        "signatures": "content_id",
        "documents": "content_id",
        "pairs": "content_a",
    }
    assert len({d[2] for d in by_content.values()}) == 1  # one co-location group
    assert dist["buckets"][1] == "bucket"
    assert dist["buckets"][2] != dist["contents"][2]
    assert dist["document_keys"][1] == "external_id"
    for table in ("contents", "documents", "signatures", "buckets", "pairs", "document_keys"):
        assert dist[f"{table}_c{cid}"][1:] == dist[table][1:]  # the partitions follow their parents
    assert shards == (3,)
    # The service's tables stay plain tables on the coordinator.
    assert not {"tokens", "sessions", "labels"} & set(dist)


def test_external_ids_stay_unique_in_the_database(citus_url: str, citus_schema: str) -> None:
    docs = planted_corpus(n_sources=5, copies=2, seed=2)
    with Index.create(citus_url, "keys", schema=citus_schema, distributed=True, shards=2) as index:
        index.add(docs)
        index.remove([docs[0][0]])
        index.add([(docs[1][0], "a new text for an old id"), ("fresh", "a new id")])
        index.rebuild(k=4)
    s = f'"{citus_schema}"'
    with psycopg.connect(psycopg_url(citus_url)) as conn:
        (cid,) = conn.execute(
            f"SELECT collection_id FROM {s}.collections WHERE name = 'keys'"
        ).fetchone() or (0,)
        keys = conn.execute(
            f"SELECT external_id, content_id FROM {s}.document_keys_c{cid} ORDER BY 1"
        ).fetchall()
        documents = conn.execute(
            f"SELECT external_id, content_id FROM {s}.documents_c{cid} ORDER BY 1"
        ).fetchall()
        assert keys == documents
        assert len(keys) == len(docs)  # one removed, one new
        # A document written behind neardup's back with a stored id is refused by the key.
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute(
                f"INSERT INTO {s}.document_keys (collection_id, external_id, content_id) VALUES (%s, %s, 1)",
                (cid, docs[2][0]),
            )


def test_a_schema_is_plain_or_distributed(citus_url: str, citus_schema: str, fresh_schema: str) -> None:
    Index.create(citus_url, "first", schema=citus_schema, distributed=True, shards=2).close()
    with Index.create(citus_url, "second", schema=citus_schema) as second:  # follows the schema
        assert second.distributed
    with pytest.raises(DistributedError, match="is distributed"):
        Index.create(citus_url, "third", schema=citus_schema, distributed=False)
    with pytest.raises(DistributedError, match="2 shards"):
        Index.create(citus_url, "third", schema=citus_schema, distributed=True, shards=5)
    plain = f"{citus_schema}_plain"
    try:
        Index.create(citus_url, "plain", schema=plain).close()
        with pytest.raises(DistributedError, match="plain collection"):
            Index.create(citus_url, "spread", schema=plain, distributed=True)
    finally:
        with psycopg.connect(psycopg_url(citus_url), autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{plain}" CASCADE')


def test_distributed_gives_the_pairs_and_clusters_of_one_server(
    database_url: str, schema: str, citus_url: str, citus_schema: str
) -> None:
    docs = [*planted_corpus(n_sources=30, copies=3, seed=13), ("x1", "one text"), ("x2", "one text")]
    for _ in distributed_schema(citus_url, citus_schema):
        with (
            Index.create(database_url, f"same-{os.getpid()}", schema=schema, **EXHAUSTIVE) as single,
            Index.create(citus_url, "same", schema=citus_schema, **EXHAUSTIVE) as spread,
        ):
            assert spread.distributed
            assert not single.distributed
            for index in (single, spread):
                index.add(docs[:40], batch_size=15)  # the bulk path, then batches against stored rows
                index.add(docs[40:], batch_size=7)
                index.remove([docs[3][0], docs[50][0]])
                index.add([(docs[5][0], docs[6][1])])  # a replacement
            assert list(spread.pairs()) == list(single.pairs())
            assert sorted(spread.clusters()) == sorted(single.clusters())
            assert len(list(single.pairs())) > 30
            for _, text in docs[::9]:
                assert spread.query(text) == single.query(text)
            assert list(spread.check(docs[::4])) == list(single.check(docs[::4]))
            a, b = single.stats(), spread.stats()
            assert (a.documents, a.contents, a.pairs, a.identical_pairs, a.clusters, a.bucket_rows) == (
                b.documents,
                b.contents,
                b.pairs,
                b.identical_pairs,
                b.clusters,
                b.bucket_rows,
            )
            for index in (single, spread):
                index.rebuild(threshold=0.6)
            assert list(spread.pairs()) == list(single.pairs())
            assert sorted(spread.clusters()) == sorted(single.clusters())
            assert spread.evaluate(sample=20, seed=1).recall == single.evaluate(sample=20, seed=1).recall


def test_writers_of_two_distributed_collections_do_not_take_turns(citus_url: str, citus_schema: str) -> None:
    from neardup.storage import catalog
    from neardup.storage.scope import Scope

    for name in ("one", "two"):
        Index.create(citus_url, name, schema=citus_schema, distributed=True, shards=2).close()
    with connect(citus_url) as first, connect(citus_url) as second, first.transaction():
        one = catalog.get(Scope(first, citus_schema), "one")
        assert one is not None
        catalog.get(Scope(first, citus_schema, one.collection_id, True), "one", lock=True)
        with second.transaction():
            second.execute("SET LOCAL lock_timeout = '2s'")
            two = catalog.get(Scope(second, citus_schema), "two")
            assert two is not None
            assert catalog.get(Scope(second, citus_schema, two.collection_id, True), "two", lock=True)
        second.execute("SET lock_timeout = '200ms'")
        with pytest.raises(psycopg.errors.LockNotAvailable):  # a writer of the same one waits
            catalog.get(Scope(second, citus_schema, one.collection_id, True), "one", lock=True)


# A command that stops or starts one worker of the test cluster, with {action} standing for
# "stop" or "start" (run by the shell, on this machine), e.g. for a worker on port 9702:
#   setpriv --reuid=nobody --regid=nogroup --clear-groups pg_ctl -D /path/n9702 -m immediate -w {action}
WORKER_CTL = os.environ.get("NEARDUP_TEST_CITUS_WORKER_CTL")
WORKER_PORT = os.environ.get("NEARDUP_TEST_CITUS_WORKER_PORT")


def _worker(action: str) -> None:
    assert WORKER_CTL is not None
    subprocess.run(WORKER_CTL.format(action=action), shell=True, check=True, timeout=60)


@pytest.mark.skipif(
    not (WORKER_CTL and WORKER_PORT),
    reason="set NEARDUP_TEST_CITUS_WORKER_CTL (a shell command that stops or starts one worker, "
    "'{action}' standing for stop or start) and NEARDUP_TEST_CITUS_WORKER_PORT (that worker's port) "
    "to stop a worker in the middle of an ingest",
)
def test_a_worker_stopped_mid_ingest_is_one_clear_error_and_a_rerun_ends_as_one_run(
    citus_url: str, citus_schema: str
) -> None:
    """A worker stopped after the first batches: the ingest fails with an error naming the node,
    what is visible afterwards is whole batches only, and running the same add again ends in
    exactly the state of an ingest that was never interrupted."""
    docs = planted_corpus(n_sources=60, copies=2, seed=13)
    kwargs: dict[str, Any] = {"schema": citus_schema, **EXHAUSTIVE}
    with Index.create(citus_url, "whole", distributed=True, shards=4, **kwargs) as whole:
        whole.add(docs, batch_size=20)
    batches_done = 0

    def stop_after_two(_: object) -> None:
        nonlocal batches_done
        batches_done += 1
        if batches_done == 2:
            _worker("stop")

    try:
        with Index.create(citus_url, "cut", **kwargs) as cut, pytest.raises(NeardupError) as failure:
            cut.add(docs, batch_size=20, progress=stop_after_two)
    finally:
        _worker("start")
    assert f"{WORKER_PORT}" in str(failure.value)  # names the node
    assert "\n" not in str(failure.value).strip()
    with psycopg.connect(psycopg_url(citus_url), autocommit=True) as conn:
        conn.execute("SELECT recover_prepared_transactions()")
    partial = collection_state(citus_url, citus_schema, "cut")
    assert len(partial.documents) % 20 == 0  # whole batches only
    assert 40 <= len(partial.documents) < len(docs)
    assert partial.dangling == 0
    with Index.open(citus_url, "cut", schema=citus_schema) as cut:
        cut.add(docs, batch_size=20)
    assert (
        collection_state(citus_url, citus_schema, "cut").comparable()
        == collection_state(citus_url, citus_schema, "whole").comparable()
    )


def test_a_batch_matches_its_ids_and_texts_without_moving_the_stored_documents(
    citus_url: str, citus_schema: str
) -> None:
    """A batch's lookup of its ids and content hashes runs on every shard with the batch as its
    filter: what comes back to the coordinator follows the batch, not the stored documents (which
    here hold many times Citus's bound on an intermediate result, set low for the test)."""
    bounded = (
        citus_url + ("&" if "?" in citus_url else "?") + "options=-ccitus.max_intermediate_result_size%3D64kB"
    )
    docs = [(f"d{i}", f"document {i} " + " ".join(f"w{i}x{j}" for j in range(120))) for i in range(400)]
    with Index.create(bounded, "bounded", schema=citus_schema, distributed=True, shards=4) as index:
        index.add(docs)
        assert index.stats().documents == 400
        # Replacements, unchanged records and copies of stored texts: every kind of match.
        again = [docs[0], (docs[1][0], docs[2][1]), ("copy", docs[3][1]), ("new", "a new text " * 30)]
        result = index.add(again)
        assert (result.added, result.replaced, result.unchanged) == (2, 1, 1)
