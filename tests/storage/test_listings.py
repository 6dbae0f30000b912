"""Listings stream one statement's rows on a connection of their own: in chunks where libpq can
(version 17 on), one row at a time before that, the same rows either way. Against a real PostgreSQL."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from neardup.storage import listings
from tests._corpus import planted_corpus
from tests.conftest import psycopg_url

pytestmark = pytest.mark.distributed_variant

EXHAUSTIVE = {"threshold": 0.5, "bands": 64, "rows": 2}


def test_a_listing_gives_the_same_rows_in_chunks_of_any_size_and_one_at_a_time(
    make_index: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = make_index(**EXHAUSTIVE)
    index.add(planted_corpus(n_sources=12, copies=3, seed=31))
    whole = (list(index.pairs()), list(index.clusters()))
    # several chunks of 7 below
    assert len(whole[0]) > 3 * 7
    assert len(whole[1]) > 7
    monkeypatch.setattr(listings, "_STREAM_ROWS", 7)
    assert (list(index.pairs()), list(index.clusters())) == whole
    monkeypatch.setattr(listings, "_CHUNKS_FROM_LIBPQ", 10**9)  # as with a libpq before 17
    assert (list(index.pairs()), list(index.clusters())) == whole


def test_a_listing_closed_early_leaves_the_index_usable(make_index: Any) -> None:
    index = make_index(**EXHAUSTIVE)
    docs = planted_corpus(n_sources=12, copies=3, seed=32)
    index.add(docs[:-3])
    listing = index.pairs()
    first = next(listing)
    listing.close()  # the statement still running is cancelled, its connection closed
    assert index.add(docs[-3:]).added == 3
    assert first in set(index.pairs())


@pytest.mark.parametrize("keep", ["first", "longest", "id", "meta:rank:desc"])
def test_clusters_read_by_ranges_of_their_ids_are_those_the_view_lists(
    make_index: Any, database_url: str, schema: str, keep: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = make_index(threshold=0.5, keep=keep, dense_cluster_size=3)
    docs = planted_corpus(n_sources=40, copies=2, seed=11)
    index.add(
        {"id": i, "text": t, "meta": {"rank": n % 5}} if n % 4 else {"id": i, "text": t}
        for n, (i, t) in enumerate(docs)
    )
    with psycopg.connect(psycopg_url(database_url)) as conn:
        conn.execute("SET citus.enable_repartition_joins = on")
        view = conn.execute(
            f'SELECT x.cluster, x.id, x.representative, k.cluster IS NOT NULL FROM "{schema}".cluster_list x '
            f'LEFT JOIN "{schema}".dense_clusters k '
            "ON k.collection_id = x.collection_id AND k.cluster = x.cluster "
            "WHERE x.collection = %s ORDER BY x.cluster, x.id",
            (index.name,),
        ).fetchall()
    listed = [(c.id, i, i == c.representative, c.dense) for c in index.clusters() for i in c]
    assert listed == [tuple(r) for r in view]
    assert any(dense for *_, dense in listed)
    monkeypatch.setattr(listings, "_FIRST_RANGE", 1)  # a range of one cluster id, then doubling
    assert [(c.id, i, i == c.representative, c.dense) for c in index.clusters() for i in c] == listed
