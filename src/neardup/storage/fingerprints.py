"""Text fingerprints (``core.fingerprints``) of a collection that keeps its neighbours: rows of the
buckets table in a band of their own, ``FINGERPRINT_BAND``, found by the bucket lookup index like
any bucket key. No other band is negative, so the bands' listings leave them out by ``band >= 0``.
A partial index on their content ids, made only for such a collection, serves their deletion.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from psycopg import sql

from neardup.storage import buckets
from neardup.storage.binary import Int8s, signature_matrix
from neardup.storage.scope import Scope

FINGERPRINT_BAND = -1


def _index(scope: Scope, qualified: bool) -> sql.Identifier:
    name = f"neardup_fingerprints_{scope.collection_id}"
    return sql.Identifier(scope.schema, name) if qualified else sql.Identifier(name)


def _sizes_index(scope: Scope, qualified: bool = False) -> sql.Identifier:
    name = f"neardup_sizes_{scope.collection_id}"
    return sql.Identifier(scope.schema, name) if qualified else sql.Identifier(name)


def prepare(scope: Scope) -> None:
    """Make the indexes that serve the deletion of fingerprints and a containment query's long
    candidates (``sharing``), if they are not there (when the collection is made or rebuilt to
    keep its neighbours, under its lock: never by a writer, whose index build would wait for every
    other writer's open transaction)."""
    scope.conn.execute(
        sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} (content_id) WHERE band = {}").format(
            _index(scope, False), scope.sql("{buckets_p}"), sql.Literal(FINGERPRINT_BAND)
        )
    )
    scope.conn.execute(
        sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} (shingle_count)").format(
            _sizes_index(scope), scope.sql("{contents_p}")
        )
    )


def insert(scope: Scope, content: npt.NDArray[np.int64], fingerprint: npt.NDArray[np.int64]) -> None:
    """Store (content, fingerprint) rows."""
    if content.size:
        band = np.full(content.size, FINGERPRINT_BAND, dtype=np.int16)
        buckets.insert(scope, band, fingerprint.astype(np.int64), content.astype(np.int64))


def delete(scope: Scope, content_ids: list[int]) -> None:
    """Delete the fingerprints of the given contents."""
    if content_ids:
        scope.conn.execute(
            scope.sql("DELETE FROM {buckets_p} WHERE band = %s AND content_id = ANY(%s::int8[])"),
            (FINGERPRINT_BAND, content_ids),
        )


def sharing(
    scope: Scope,
    fingerprint: npt.NDArray[np.int64],
    cap: int,
    own: npt.NDArray[np.int64] | None = None,
    share: float = 0.0,
    slack: float = 0.0,
    large: int | None = None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(content, fingerprints shared, shingle count) of each stored content with a fingerprint among
    ``fingerprint``, counting only the fingerprints held by at most ``cap`` contents, and those
    held by more (common): one statement, which returns a row a content, not a row a holding.
    With ``share``, only the contents whose count, ``slack`` standard deviations and one up (as
    Poisson), reaches ``share`` of the fingerprints of ``own`` that are counted come back, and
    those of at least ``large`` shingles."""
    # The holders are read from the lookup index alone (its entries carry the content in a
    # collection with neighbours), by the bucket key alone: a band's key equals a fingerprint with
    # probability ~2**-64, and such a row would only add a candidate, which is verified exactly.
    # The contents that share too few are dropped before their sizes are read, a lookup each;
    # the long ones among them come from the sizes index. No JIT: the plan's estimated cost passes
    # jit_above_cost, but compiling it takes longer than running it.
    scope.conn.execute("SET LOCAL jit = off")
    with scope.conn.cursor(binary=True) as cur:
        row = cur.execute(
            scope.sql(
                "WITH r AS MATERIALIZED (SELECT k.f, b.content_id FROM unnest(%(f)s::int8[]) AS k(f) "
                "CROSS JOIN LATERAL (SELECT content_id FROM {buckets_p} b WHERE b.bucket = k.f "
                "LIMIT %(over)s) b), "
                "common AS MATERIALIZED (SELECT f FROM r GROUP BY f HAVING count(*) > %(cap)s), "
                "g AS MATERIALIZED (SELECT content_id, count(*) AS n, "
                "count(*) + %(slack)s * sqrt(count(*)) + 1 >= %(share)s * (cardinality(%(own)s::int8[]) - "
                "(SELECT count(*) FROM common WHERE f = ANY(%(own)s::int8[]))) AS enough "
                "FROM r WHERE f NOT IN (SELECT f FROM common) GROUP BY content_id), "
                "found AS (SELECT g.content_id, g.n, t.shingle_count FROM g "
                "JOIN {contents_p} t ON t.collection_id = %(c)s AND t.content_id = g.content_id "
                "WHERE g.enough "
                "UNION ALL SELECT g.content_id, g.n, t.shingle_count FROM g "
                "JOIN {contents_p} t ON t.content_id = g.content_id "
                "WHERE t.shingle_count >= %(large)s AND NOT g.enough) "
                "SELECT array_agg(content_id), array_agg(n), array_agg(shingle_count::int8), "
                "(SELECT array_agg(f) FROM common) FROM found"
            ),
            {
                "f": Int8s(fingerprint),
                "c": scope.collection_id,
                "over": cap + 1,
                "cap": cap,
                "own": Int8s(fingerprint[:0] if own is None else own),
                "share": share,
                "slack": slack,
                "large": large,
            },
        ).fetchone()
    empty = np.empty(0, np.int64)
    if row is None:
        return empty, empty, empty, empty
    common = empty if row[3] is None else np.asarray(row[3], dtype=np.int64)
    if row[0] is None:
        return empty, empty, empty, common
    found = (np.asarray(v, dtype=np.int64) for v in row[:3])
    return (*found, common)  # type: ignore[return-value]


def signatures(
    scope: Scope, content_ids: npt.NDArray[np.int64], num_perm: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint32]]:
    """(content ids, their signatures, one row each) of the given stored contents, in no set
    order: one value each, since a query ranks at most a few thousand candidates."""
    with scope.conn.cursor(binary=True) as cur:
        row = cur.execute(
            scope.sql(
                "SELECT array_agg(content_id), string_agg(signature, ''::bytea) FROM {signatures_p} "
                "WHERE collection_id = %s AND content_id = ANY(%s::int8[])"
            ),
            (scope.collection_id, Int8s(content_ids)),
        ).fetchone()
    if row is None or row[0] is None:
        return np.empty(0, np.int64), np.empty((0, num_perm), np.uint32)
    return np.asarray(row[0], dtype=np.int64), signature_matrix([row[1]], num_perm)


def size(scope: Scope) -> tuple[int, int]:
    """(rows, bytes on disk) of the fingerprints: their share of the bucket partition and its lookup
    index, and their own deletion and sizes indexes (the bands' entries in the lookup index, which
    carry the content here, are counted to the bands)."""
    row = scope.conn.execute(
        scope.sql(
            "SELECT (SELECT count(*) FROM {buckets_p} WHERE band = %s), (SELECT count(*) FROM {buckets_p}), "
            "pg_total_relation_size(%s::regclass), coalesce(pg_relation_size(to_regclass(%s)), 0), "
            "coalesce(pg_relation_size(to_regclass(%s)), 0)"
        ),
        (
            FINGERPRINT_BAND,
            scope.sql("{buckets_p}").as_string(scope.conn),
            _index(scope, True).as_string(scope.conn),
            _sizes_index(scope, True).as_string(scope.conn),
        ),
    ).fetchone()
    if row is None or not row[0]:
        return 0, int(row[3]) + int(row[4]) if row else 0
    rows, total, partition, deletion, sizes = (int(v) for v in row)
    # The deletion index is the partition's too: counted once, whole.
    return rows, round((partition - deletion) * rows / total) + deletion + sizes


__all__ = ["FINGERPRINT_BAND", "delete", "insert", "prepare", "sharing", "signatures", "size"]
