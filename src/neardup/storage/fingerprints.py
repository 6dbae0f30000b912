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
from neardup.storage.binary import Int8s
from neardup.storage.scope import Scope

FINGERPRINT_BAND = -1


def _index(scope: Scope, qualified: bool) -> sql.Identifier:
    name = f"neardup_fingerprints_{scope.collection_id}"
    return sql.Identifier(scope.schema, name) if qualified else sql.Identifier(name)


def prepare(scope: Scope) -> None:
    """Make the index that serves the deletion of fingerprints, if it is not there (when the
    collection is made or rebuilt to keep its neighbours, under its lock: never by a writer, whose
    index build would wait for every other writer's open transaction)."""
    scope.conn.execute(
        sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} (content_id) WHERE band = {}").format(
            _index(scope, False), scope.sql("{buckets_p}"), sql.Literal(FINGERPRINT_BAND)
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


def lookup(
    scope: Scope, fingerprint: npt.NDArray[np.int64], cap: int | None
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(fingerprint, content) of the stored rows of each fingerprint; with ``cap``, at most that
    many a fingerprint (one more than the caller keeps says that it is common)."""
    if cap is None:
        rows = (
            "SELECT b.bucket AS f, b.content_id FROM {buckets_p} b WHERE b.collection_id = %(c)s "
            "AND b.band = %(band)s AND b.bucket = ANY(%(f)s::int8[])"
        )
    else:
        rows = (
            "SELECT k.f, b.content_id FROM unnest(%(f)s::int8[]) AS k(f) CROSS JOIN LATERAL (SELECT "
            "content_id FROM {buckets_p} b WHERE b.collection_id = %(c)s AND b.band = %(band)s "
            "AND b.bucket = k.f LIMIT %(cap)s) b"
        )
    with scope.conn.cursor(binary=True) as cur:
        row = cur.execute(
            scope.sql(f"SELECT array_agg(f), array_agg(content_id) FROM ({rows}) q"),
            {"f": Int8s(fingerprint), "c": scope.collection_id, "band": FINGERPRINT_BAND, "cap": cap},
        ).fetchone()
    if row is None or row[0] is None:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    return np.asarray(row[0], dtype=np.int64), np.asarray(row[1], dtype=np.int64)


def size(scope: Scope) -> tuple[int, int]:
    """(rows, bytes on disk) of the fingerprints: their share of the bucket partition and its lookup
    index, and their own deletion index."""
    row = scope.conn.execute(
        scope.sql(
            "SELECT (SELECT count(*) FROM {buckets_p} WHERE band = %s), (SELECT count(*) FROM {buckets_p}), "
            "pg_total_relation_size(%s::regclass), coalesce(pg_relation_size(to_regclass(%s)), 0)"
        ),
        (
            FINGERPRINT_BAND,
            scope.sql("{buckets_p}").as_string(scope.conn),
            _index(scope, True).as_string(scope.conn),
        ),
    ).fetchone()
    if row is None or not row[0]:
        return 0, int(row[3]) if row else 0
    rows, total, partition, own = (int(v) for v in row)
    return rows, round((partition - own) * rows / total) + own


__all__ = ["FINGERPRINT_BAND", "delete", "insert", "lookup", "prepare", "size"]
