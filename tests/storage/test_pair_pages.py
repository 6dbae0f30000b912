"""A page of pairs of documents ordered, filtered and counted in Python from the rows read in steps
(as on a distributed collection) is the page the statement over ``pair_list`` gives, for every
order, label filter, similarity range, direction and key. Against a real PostgreSQL (and Citus in
the distributed variant)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from neardup.storage import pair_list
from neardup.storage.connect import connect
from neardup.storage.keyset_pages import LABEL_FILTERS, PairQuery, _pair_rows, _PairsRead, _queue_counts
from neardup.storage.scope import Scope
from tests._corpus import planted_corpus

pytestmark = pytest.mark.distributed_variant

THRESHOLD = 0.6


def test_pages_made_here_from_the_rows_are_the_statements_pages(
    make_index: Any, database_url: str, schema: str
) -> None:
    index = make_index(threshold=0.5)
    docs = planted_corpus(n_sources=25, copies=3, seed=21)
    index.add([*docs, *[(f"{i}.again", t) for i, t in docs[::6]]])  # identical copies too
    with connect(database_url) as conn:
        (cid,) = conn.execute(
            f'SELECT collection_id FROM "{schema}".collections WHERE name = %s', (index.name,)
        ).fetchone() or (0,)
        scope = Scope(conn, schema, cid, False)
        params: dict[str, Any] = {"c": cid, "t": THRESHOLD}
        rows = pair_list.pairs_of_documents(scope, params)
        assert rows is not None
        # What this process may hold is bounded: one row fewer than it gives, and it gives none.
        assert pair_list.pairs_of_documents(scope, params, most=len(rows) - 1) is None
        view = conn.execute(
            scope.sql(
                f"WITH {pair_list.cte(scope)} "
                "SELECT id_a, id_b, similarity, method, content_a, content_b FROM dp"
            ),
            params,
        ).fetchall()
        assert sorted(rows) == sorted((a, b, float(s), m, int(x), int(y)) for a, b, s, m, x, y in view)
        assert any(m == "identical" for *_, m, _, _ in rows)
        assert len(rows) > 40
        labels = {(a, b): "duplicate" if n % 3 else "not_duplicate" for n, (a, b, *_) in enumerate(rows[::4])}
        for (a, b), label in labels.items():
            conn.execute(
                scope.sql(
                    "INSERT INTO {s}.labels (collection_id, id_a, id_b, label, note, labelled_by) "
                    "VALUES (%s, %s, %s, %s, '', 'test')"
                ),
                (cid, a, b, label),
            )
        here = _PairsRead("", params, rows, labels)
        # The statement over the same rows bound as arrays (as pair_list.bound gives them on a
        # distributed collection; its steps run on one server too): the orders, filters and keys
        # are the statement's, and no statement crosses shards (the view's join would on Citus).
        bound = dict(params)
        statement = _PairsRead(pair_list.bound(Scope(conn, schema, cid, True), bound), bound)
        rng = random.Random(5)
        for _ in range(80):
            order = rng.choice(["queue", "similarity"])
            low, high = sorted(rng.choice([0.0, 0.5, THRESHOLD, 0.75, 0.9, 1.0]) for _ in range(2))
            after = None
            if rng.random() < 0.7:
                a, b, s, *_ = rng.choice(rows)
                after = (abs(s - THRESHOLD) if order == "queue" else s, a, b)
            query = PairQuery(
                order, rng.choice(LABEL_FILTERS), low, high, after, rng.random() < 0.5, rng.random() < 0.5
            )
            limit = rng.choice([1, 4, 1000])
            assert _pair_rows(scope, here, query, limit) == _pair_rows(scope, statement, query, limit), query
            assert _queue_counts(scope, here, after) == _queue_counts(scope, statement, after), after
