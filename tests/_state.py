"""What a collection holds, read with plain SQL, to compare two collections or two moments."""

from __future__ import annotations

from dataclasses import dataclass
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
        pairs = conn.execute(
            f"SELECT id_a, id_b, round(similarity::numeric, 9), method FROM {s}.pair_list "
            "WHERE collection_id = %s ORDER BY 1, 2",
            [cid],
        ).fetchall()
        clusters = conn.execute(
            f"SELECT min(id) OVER (PARTITION BY cluster), id FROM {s}.cluster_list WHERE collection_id = %s "
            "ORDER BY 1, 2",
            [cid],
        ).fetchall()
        counts = conn.execute(
            f"""SELECT (SELECT count(*) FROM {s}.contents WHERE collection_id = %(c)s),
                       (SELECT count(*) FROM {s}.buckets WHERE collection_id = %(c)s),
                       (SELECT count(*) FROM {s}.contents t WHERE collection_id = %(c)s AND NOT EXISTS
                            (SELECT 1 FROM {s}.documents d WHERE d.collection_id = t.collection_id
                             AND d.content_id = t.content_id))
                     + (SELECT count(*) FROM {s}.buckets b WHERE collection_id = %(c)s AND NOT EXISTS
                            (SELECT 1 FROM {s}.contents t WHERE t.collection_id = b.collection_id
                             AND t.content_id = b.content_id))
                     + (SELECT count(*) FROM {s}.signatures g WHERE collection_id = %(c)s AND NOT EXISTS
                            (SELECT 1 FROM {s}.contents t WHERE t.collection_id = g.collection_id
                             AND t.content_id = g.content_id))
                     + (SELECT count(*) FROM {s}.documents d WHERE collection_id = %(c)s AND NOT EXISTS
                            (SELECT 1 FROM {s}.contents t WHERE t.collection_id = d.collection_id
                             AND t.content_id = d.content_id))
                     + (SELECT count(*) FROM {s}.pairs p WHERE collection_id = %(c)s AND NOT EXISTS
                            (SELECT 1 FROM {s}.contents t WHERE t.collection_id = p.collection_id
                             AND t.content_id IN (p.content_a, p.content_b)
                             HAVING count(*) = 2))""",
            {"c": cid},
        ).fetchone()
    assert counts is not None
    return State(docs, pairs, clusters, counts[0], counts[1], counts[2])
