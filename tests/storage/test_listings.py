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


@pytest.mark.parametrize("keep", ["first", "longest", "id", "meta:rank:desc"])
def test_the_largest_clusters_read_by_their_sizes_are_the_pages_the_view_groups(
    make_index: Any, database_url: str, schema: str, keep: str
) -> None:
    from neardup.storage import keyset_pages
    from neardup.storage.connect import connect
    from neardup.storage.scope import Scope

    index = make_index(threshold=0.5, keep=keep, dense_cluster_size=3)
    docs = planted_corpus(n_sources=40, copies=2, seed=12)
    copies = [(f"{i}.again", t) for i, t in docs[::5]]  # clusters of one text, and larger ones
    index.add(
        {"id": i, "text": t, "meta": {"rank": n % 5}} if n % 4 else {"id": i, "text": t}
        for n, (i, t) in enumerate([*docs, *copies])
    )
    with connect(database_url) as conn:
        (cid,) = conn.execute(
            f'SELECT collection_id FROM "{schema}".collections WHERE name = %s', (index.name,)
        ).fetchone() or (0,)
        viewed = Scope(conn, schema, cid, False)  # grouped from the view, as on one server
        for limit in (1, 3, 7, 1000):
            after, pages = None, 0
            while True:
                # Read by the clusters' sizes, as on a distributed collection (on both layouts).
                page = keyset_pages._largest_distributed(viewed, after, limit, 5)
                assert page == keyset_pages.largest_clusters(viewed, after, limit, 5), (limit, after)
                if len(page) < limit:
                    break
                after, pages = (page[-1].size, page[-1].representative), pages + 1
            assert pages >= (1 if limit < 10 else 0)


def test_the_clusters_sizes_are_the_views_after_their_first_texts_are_removed(
    make_index: Any, database_url: str, schema: str
) -> None:
    from neardup.storage.connect import connect
    from neardup.storage.scope import Scope

    index = make_index(threshold=0.5, dense_cluster_size=3)
    docs = planted_corpus(n_sources=30, copies=3, seed=13)
    added = [*docs, *[(f"{i}.again", t) for i, t in docs[::4]]]
    index.add(added)
    # The first document added of each cluster: its text is the cluster's first content, whose id
    # the cluster kept; removing it leaves the cluster without a content of its id.
    order = {doc_id: n for n, (doc_id, _) in enumerate(added)}
    index.remove([min(c, key=order.__getitem__) for c in index.clusters()][::2])
    with connect(database_url) as conn:
        (cid,) = conn.execute(
            f'SELECT collection_id FROM "{schema}".collections WHERE name = %s', (index.name,)
        ).fetchone() or (0,)
        view = conn.execute(
            f'SELECT cluster, count(*) FROM "{schema}".cluster_list WHERE collection_id = %s '
            "GROUP BY cluster",
            (cid,),
        ).fetchall()
        (firstless,) = conn.execute(
            f'SELECT count(DISTINCT cluster_id) FROM "{schema}".contents WHERE collection_id = %s '
            f'AND cluster_id NOT IN (SELECT content_id FROM "{schema}".contents WHERE collection_id = %s)',
            (cid, cid),
        ).fetchone() or (0,)
        scope = Scope(conn, schema, cid, False)
        sizes = listings.cluster_sizes(scope)
        # Past what this process may hold, none come back: the caller lets the view group them.
        assert listings.cluster_sizes(scope, most=3) is None
    assert sizes == {int(k): int(n) for k, n in view}
    assert len(sizes) > 10
    assert firstless > 0  # clusters whose first content is gone: looked up, and found missing


def test_past_what_a_reader_may_hold_the_largest_clusters_come_from_the_view(
    make_index: Any, database_url: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from neardup.storage import keyset_pages
    from neardup.storage.connect import connect
    from neardup.storage.scope import Scope

    index = make_index(threshold=0.5)
    index.add(planted_corpus(n_sources=20, copies=3, seed=17))
    with connect(database_url) as conn:
        (cid,) = conn.execute(
            f'SELECT collection_id FROM "{schema}".collections WHERE name = %s', (index.name,)
        ).fetchone() or (0,)
        here = Scope(conn, schema, cid, False)
        expected = keyset_pages.largest_clusters(here, None, 7)
        # Read as on a distributed collection, the sizes too many to hold: the view's page.
        monkeypatch.setattr(listings, "cluster_sizes", lambda scope, most=0: None)
        assert keyset_pages.largest_clusters(Scope(conn, schema, cid, True), None, 7) == expected
    assert len(expected) == 7
