"""What a collection holds, read with plain SQL, to compare two collections or two moments."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import psycopg

from tests.conftest import psycopg_url


@dataclass(frozen=True)
class State:
    """Documents (id, md5 of text, meta), pairs (id_a, id_b, similarity, method), clusters
    (representative, id), and row counts of contents and buckets, plus rows that should not exist."""

    documents: list[tuple[Any, ...]]
    pairs: list[tuple[Any, ...]]
    clusters: list[tuple[Any, ...]]
    contents: int
    bucket_rows: int
    dangling: int  # contents without documents; documents, pairs, buckets, signatures without contents

    def comparable(self) -> tuple[Any, ...]:
        """Everything but internal ids, which depend on the order documents arrived in."""
        return self.documents, self.pairs, self.clusters, self.contents, self.bucket_rows, self.dangling


def collection_state(database_url: str, schema: str, collection: str) -> State:
    """The collection's state, read in one snapshot."""
    s = f'"{schema}"'
    with psycopg.connect(psycopg_url(database_url)) as conn:
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        (cid,) = conn.execute(
            f"SELECT collection_id FROM {s}.collections WHERE name = %s", [collection]
        ).fetchone() or (None,)
        docs = conn.execute(
            f"SELECT id, md5(text), meta FROM {s}.document_list WHERE collection_id = %s ORDER BY id", [cid]
        ).fetchall()
        distributed = conn.execute(
            f"SELECT distributed FROM {s}.collections WHERE collection_id = %s", [cid]
        ).fetchone() or (False,)
        pairs = (
            _pairs_from_tables(conn, s, cid)
            if distributed[0]
            else conn.execute(
                f"SELECT id_a, id_b, round(similarity::numeric, 9), method FROM {s}.pair_list "
                "WHERE collection_id = %s ORDER BY 1, 2",
                [cid],
            ).fetchall()
        )
        clusters = conn.execute(
            f"SELECT min(id) OVER (PARTITION BY cluster), id FROM {s}.cluster_list WHERE collection_id = %s "
            "ORDER BY 1, 2",
            [cid],
        ).fetchall()
        counts = conn.execute(
            # Uncorrelated subqueries, so that Citus runs them too: the tables live on other shards.
            f"""WITH t AS (SELECT content_id FROM {s}.contents WHERE collection_id = %(c)s),
                     d AS (SELECT content_id FROM {s}.documents WHERE collection_id = %(c)s)
                SELECT (SELECT count(*) FROM {s}.contents WHERE collection_id = %(c)s),
                       (SELECT count(*) FROM {s}.buckets WHERE collection_id = %(c)s),
                       (SELECT count(*) FROM {s}.contents WHERE collection_id = %(c)s
                            AND content_id NOT IN (SELECT content_id FROM d))
                     + (SELECT count(*) FROM {s}.buckets WHERE collection_id = %(c)s
                            AND content_id NOT IN (SELECT content_id FROM t))
                     + (SELECT count(*) FROM {s}.signatures WHERE collection_id = %(c)s
                            AND content_id NOT IN (SELECT content_id FROM t))
                     + (SELECT count(*) FROM {s}.documents WHERE collection_id = %(c)s
                            AND content_id NOT IN (SELECT content_id FROM t))
                     + (SELECT count(*) FROM {s}.pairs WHERE collection_id = %(c)s
                            AND (content_a NOT IN (SELECT content_id FROM t)
                                 OR content_b NOT IN (SELECT content_id FROM t)))""",
            {"c": cid},
        ).fetchone()
    assert counts is not None
    return State(docs, pairs, clusters, counts[0], counts[1], counts[2])


def _pairs_from_tables(conn: psycopg.Connection[Any], s: str, cid: object) -> list[tuple[Any, ...]]:
    """pair_list's rows, joined here from the tables: on Citus the view joins a pair to the
    documents of its second content by a repartition join, seconds a read in a schema of many
    collections (each table read alone is a statement every shard answers at once)."""
    docs: dict[int, list[str]] = {}
    for external_id, content_id in conn.execute(
        f"SELECT external_id, content_id FROM {s}.documents WHERE collection_id = %s", [cid]
    ).fetchall():
        docs.setdefault(int(content_id), []).append(external_id)
    bearing = {
        int(r[0])
        for r in conn.execute(
            f"SELECT content_id FROM {s}.contents WHERE collection_id = %s AND shingle_count > 0", [cid]
        ).fetchall()
    }
    rows = []
    for content_a, content_b, similarity, method in conn.execute(
        f"SELECT content_a, content_b, round(similarity::numeric, 9), method FROM {s}.pairs "
        "WHERE collection_id = %s",
        [cid],
    ).fetchall():
        for a in docs.get(int(content_a), []):
            for b in docs.get(int(content_b), []):
                rows.append((min(a, b), max(a, b), similarity, method))
    for content_id, ids in docs.items():
        if content_id in bearing:
            ordered = sorted(ids)
            rows += [(a, b, Decimal(1), "identical") for i, a in enumerate(ordered) for b in ordered[i + 1 :]]
    return sorted(rows, key=lambda r: (r[0], r[1]))
