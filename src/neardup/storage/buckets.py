"""The buckets table (band, bucket, content): candidate pairs by an indexed lookup or a grouping.

Each collection's partition has one lookup index on the bucket key alone: a band's key is a 64-bit
hash of its rows, so keys of different bands coincide with probability ~2**-64 and the band is a
filter on the few rows found. Its entries are half the size of (band, bucket, content_id) ones, with
no uniqueness check, so it builds and takes inserts faster (docs/benchmarks/profile.md). Partitions
made before keep their unique (band, bucket, content_id) index, which serves the same lookups.
Bulk loads drop the index and build it afterwards.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg
from psycopg import errors as pg_errors

from neardup.storage.binary import Int2s, Int8s, copy_stream, signature_matrix
from neardup.storage.scope import Scope, index_probes


def has_index(scope: Scope) -> bool:
    """Whether the collection's bucket partition has its lookup index."""
    row = scope.conn.execute(
        "SELECT to_regclass(%s) IS NOT NULL", (scope.sql("{bucket_index_q}").as_string(scope.conn),)
    ).fetchone()
    return bool(row and row[0])


def hold_indexed(scope: Scope) -> bool:
    """Take the partition's insert lock now, only if nobody is building or dropping its index and
    the index is there; False, with the transaction as it was, otherwise. Once held, no index can
    be built on or dropped from the partition until this transaction ends: a writer that inserts
    rows before its turn at the collection's lock checks this first, so that no index build, which
    waits for every writer holding rows in the table, ever waits for it while it waits for the turn."""
    try:
        with scope.conn.transaction() as savepoint:
            scope.conn.execute(scope.sql("LOCK TABLE {buckets_p} IN ROW EXCLUSIVE MODE NOWAIT"))
            if has_index(scope):
                return True
            raise psycopg.Rollback(savepoint)
    except pg_errors.LockNotAvailable:
        return False
    return False


def drop_index(scope: Scope) -> None:
    """Drop the lookup index before a bulk load (transactional: a rollback restores it)."""
    scope.conn.execute(scope.sql("DROP INDEX IF EXISTS {bucket_index_q}"))


def create_index(scope: Scope, fingerprints: bool = False) -> None:
    """Build the lookup index after a bulk load unless it stands (another writer built it since),
    and refresh the partition's statistics. Only the holder of the collection's writer lock builds
    or drops the index, so the check holds until the build. In a collection that keeps
    ``fingerprints`` (neighbours) the entries carry each row's content as well, so that a
    fingerprint's holders are read from the index alone: a heap fetch a holder was most of a
    top-k query's work."""
    # Not CREATE INDEX IF NOT EXISTS alone: it takes its share lock on the partition before it
    # looks for the name, so it would wait for a writer holding rows there before its turn
    # (hold_indexed), which waits for this writer's lock: a deadlock.
    if not has_index(scope):
        covering = " INCLUDE (content_id)" if fingerprints else ""
        scope.conn.execute(scope.sql("CREATE INDEX {bucket_index} ON {buckets_p} (bucket)" + covering))
    scope.conn.execute(scope.sql("ANALYZE {buckets_p}"))


def vacuum(scope: Scope) -> None:
    """VACUUM the partition (outside any transaction), skipping it if another VACUUM or an index
    build holds it: its pages become all-visible, so index-only reads need no heap."""
    scope.conn.execute(scope.sql("VACUUM (SKIP_LOCKED) {buckets_p}"))


def insert(
    scope: Scope, band: npt.NDArray[np.int16], bucket: npt.NDArray[np.int64], content: npt.NDArray[np.int64]
) -> None:
    """Insert (band, bucket, content) rows (as from ``flat_rows``) with binary COPY."""
    coll = np.full(band.shape[0], scope.collection_id, dtype=np.int32)
    data = copy_stream([("int4", coll), ("int2", band), ("int8", bucket), ("int8", content)])
    with (
        scope.conn.cursor() as cur,
        cur.copy(
            scope.sql("COPY {buckets_p} (collection_id, band, bucket, content_id) FROM STDIN (FORMAT BINARY)")
        ) as cp,
    ):
        cp.write(data)


def _columns(
    scope: Scope, query: str, params: dict[str, Any] | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(band, bucket, content) columns of a query, fetched as three binary arrays in one row."""
    with scope.conn.cursor(binary=True) as cur:
        row = cur.execute(
            scope.sql(f"SELECT array_agg(band), array_agg(bucket), array_agg(content_id) FROM ({query}) q"),
            {"c": scope.collection_id, **(params or {})},
            prepare=False,  # never a generic plan: the batch's size matters to the plan
        ).fetchone()
    if row is None or row[0] is None:
        return np.empty(0, np.int16), np.empty(0, np.int64), np.empty(0, np.int64)
    return row[0], row[1], row[2]


def shared_buckets(scope: Scope) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(band, bucket, content) of every row whose bucket holds two or more contents (the bands',
    not a neighbours' fingerprints, ``storage.fingerprints``)."""
    return _columns(
        scope,
        "SELECT b.band, b.bucket, b.content_id FROM {buckets_p} b JOIN ("
        "SELECT band, bucket FROM {buckets_p} WHERE collection_id = %(c)s AND band >= 0 "
        "GROUP BY band, bucket HAVING count(*) > 1) h ON h.band = b.band AND h.bucket = b.bucket",
    )


# Up to this many keys a probe binds them as arrays; more go through a temporary table with
# statistics, which the planner needs to keep index probes for large batches. The temporary
# table costs a CREATE, a COPY and an ANALYZE (milliseconds): too much for one query's keys.
_UNNEST_KEYS = 5_000


def members_of(
    scope: Scope,
    band: npt.NDArray[np.int16],
    bucket: npt.NDArray[np.int64],
    *,
    lo: int | None = None,
    hi: int | None = None,
    most: int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(band, bucket, content) of every stored row in the given (band, bucket) pairs (distinct
    pairs), of contents from ``lo`` on and below ``hi`` where given; with ``most``, at most that
    many rows, those of the smallest content ids (a content's rows may be cut at the last one)."""
    where = (" AND b.content_id >= %(lo)s" if lo is not None else "") + (
        " AND b.content_id < %(hi)s" if hi is not None else ""
    )
    tail = " ORDER BY b.content_id LIMIT %(most)s" if most is not None else ""
    bounds: dict[str, Any] = {"lo": lo, "hi": hi, "most": most}
    # Probed in key order, each index descent lands next to the one before (the same pages are read
    # again while they are cached), where band-by-band order jumps across the whole index.
    order = np.argsort(bucket, kind="stable")
    band, bucket = band[order], bucket[order]
    if band.size <= _UNNEST_KEYS:
        keys = "unnest(%(bands)s::int2[], %(keys)s::int8[]) AS k(band, bucket)"
        bounds.update(bands=Int2s(band), keys=Int8s(bucket))
    else:
        _fill_keys(scope, band, bucket)
        keys = "neardup_keys k"
    with index_probes(scope.conn):
        return _columns(scope, members_statement(keys, where, tail, scope.distributed), bounds)


def members_statement(keys: str, where: str, tail: str, distributed: bool) -> str:
    """``members_of``'s statement: the stored rows under the keys (``keys``, a FROM item ``k``),
    filtered by ``where`` and ordered and cut by ``tail``. On one server each key drives an index
    probe, whatever the statistics say: the rows under a key come from a subquery the planner
    cannot flatten (``OFFSET 0``), so it cannot turn the join around. Turned around, a chunk's
    bound on content ids, past every row the statistics saw while the collection grows, made the
    planner scan the whole index in content order and test each row against every key."""
    if distributed:
        return (
            "SELECT b.band, b.bucket, b.content_id FROM " + keys + " JOIN {buckets_p} b "
            "ON b.collection_id = %(c)s AND b.band = k.band AND b.bucket = k.bucket" + where + tail
        )
    return (
        "SELECT b.band, b.bucket, b.content_id FROM " + keys + " CROSS JOIN LATERAL "
        "(SELECT b.band, b.bucket, b.content_id FROM {buckets_p} b WHERE b.collection_id = %(c)s "
        "AND b.band = k.band AND b.bucket = k.bucket" + where + " OFFSET 0) b" + tail
    )


def _fill_keys(scope: Scope, band: npt.NDArray[np.int16], bucket: npt.NDArray[np.int64]) -> None:
    """The keys in the transaction's temporary table, with statistics; emptied first (a batch
    may probe its stored members in chunks, each a probe of the same keys) by a DELETE, which a
    read-only transaction may run on a temporary table."""
    scope.conn.execute(
        "CREATE TEMP TABLE IF NOT EXISTS neardup_keys (band smallint, bucket bigint) ON COMMIT DELETE ROWS"
    )
    scope.conn.execute("DELETE FROM neardup_keys")
    with (
        scope.conn.cursor() as cur,
        cur.copy("COPY neardup_keys (band, bucket) FROM STDIN (FORMAT BINARY)") as cp,
    ):
        cp.write(copy_stream([("int2", band), ("int8", bucket)]))
    scope.conn.execute("ANALYZE neardup_keys")


def key_sizes(
    scope: Scope, band: npt.NDArray[np.int16], bucket: npt.NDArray[np.int64]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(band, bucket, rows) of the given (band, bucket) pairs (distinct pairs) that hold rows: how
    many each holds, as this transaction sees them, read without fetching one."""
    query = (
        "SELECT b.band, b.bucket, count(*)::int8 AS content_id FROM {keys} JOIN {buckets_p} b "
        "ON b.collection_id = %(c)s AND b.band = k.band AND b.bucket = k.bucket GROUP BY b.band, b.bucket"
    )
    if band.size <= _UNNEST_KEYS:
        keys = "unnest(%(bands)s::int2[], %(keys)s::int8[]) AS k(band, bucket)"
        with index_probes(scope.conn):
            return _columns(
                scope, query.replace("{keys}", keys), {"bands": Int2s(band), "keys": Int8s(bucket)}
            )
    _fill_keys(scope, band, bucket)
    with index_probes(scope.conn):
        return _columns(scope, query.replace("{keys}", "neardup_keys k"))


def delete(
    scope: Scope, band: npt.NDArray[np.int16], bucket: npt.NDArray[np.int64], content: npt.NDArray[np.int64]
) -> None:
    """Delete the given (band, bucket, content) rows, found through the index."""
    scope.conn.execute(
        scope.sql(
            "DELETE FROM {buckets_p} b "
            "USING unnest(%s::int2[], %s::int8[], %s::int8[]) AS k(band, bucket, content_id) "
            "WHERE b.collection_id = %s AND b.band = k.band AND b.bucket = k.bucket "
            "AND b.content_id = k.content_id"
        ),
        (Int2s(band), Int8s(bucket), Int8s(content), scope.collection_id),
    )


def truncate(scope: Scope) -> None:
    """Remove every bucket row of the collection (before a re-banding)."""
    scope.conn.execute(scope.sql("TRUNCATE {buckets_p}"))


def lookup(
    scope: Scope,
    keys: npt.NDArray[np.int64],
    with_text: bool,
    num_perm: int,
    most: int | None = None,
    dense: int | None = None,
) -> tuple[list[tuple[Any, ...]], npt.NDArray[np.uint32]]:
    """Contents sharing a bucket with the keys (one per band): (content, text, ids) each, the ids
    in no particular order, the text any one of the content's documents'; and their signatures,
    one row each. With ``most`` and ``dense`` (the collection's dense cluster size), every
    candidate of a cluster with fewer than ``dense`` of them, and at most ``most`` (any of them)
    of each cluster with more, which only a dense cluster can have: its buckets hold its
    near-copies by the thousand. With ``most`` alone, at most that many contents, any of them.

    On one server, one join of the candidates with their signatures (a prepared statement). On a
    distributed collection the candidates are found on the buckets' shards first (a CTE Citus runs
    on its own), then their signatures, texts and ids are read where they live, by content id."""
    params: dict[str, Any] = {
        "c": scope.collection_id,
        "bands": Int2s(np.arange(keys.shape[0], dtype=np.int16)),
        "keys": Int8s(keys),
        "most": most,
        "dense": dense,
    }
    limited = most is not None and dense is not None
    columns = _lookup_columns(scope, with_text)
    query = (_lookup_distributed if scope.distributed else _lookup_here)(columns, most is not None, limited)
    cursor = scope.binary_cursor()
    rows = cursor.execute(scope.sql_bytes(query), params, prepare=not scope.distributed).fetchall()
    return [(r[0], r[2], r[3]) for r in rows], signature_matrix([r[1] for r in rows], num_perm)


def _lookup_columns(scope: Scope, with_text: bool) -> str:
    """What ``lookup`` reads of a candidate ``s`` (its signature row): content, signature, any one
    document's text (or NULL) and its documents' ids."""
    # Any one document's text will do: a content's documents share their normalised text, so each
    # gives the same shingles, and the caller orders its answers. On one server neither subquery
    # sorts (each sort is set up anew for each candidate). A distributed collection keeps the
    # sorted subqueries that were checked on Citus.
    by_doc, by_id = ("ORDER BY d.doc_id ", " ORDER BY d.external_id") if scope.distributed else ("", "")
    text = (
        "(SELECT d.text FROM {documents_p} d WHERE d.collection_id = %(c)s AND d.content_id = s.content_id "
        f"{by_doc}LIMIT 1)"
        if with_text
        else "NULL::text"
    )
    return (
        f"SELECT s.content_id, s.signature, {text}, "
        "ARRAY(SELECT d.external_id FROM {documents_p} d "
        f"WHERE d.collection_id = %(c)s AND d.content_id = s.content_id{by_id}) "
    )


def _lookup_distributed(columns: str, capped: bool, limited: bool) -> str:
    """``lookup``'s statement on a distributed collection: the candidates in CTEs Citus runs on
    their own, then the rest by content id."""
    cap = " LIMIT %(most)s" if capped else ""
    found = (
        "SELECT DISTINCT b.content_id "
        "FROM unnest(%(bands)s::int2[], %(keys)s::int8[]) AS k(band, bucket) JOIN {buckets_p} b "
        "ON b.collection_id = %(c)s AND b.band = k.band AND b.bucket = k.bucket"
    )
    if limited:
        # As on one server, every candidate outside dense clusters; each step a CTE Citus
        # materialises, so the window runs on the coordinator over the few candidates.
        kept = (
            f"WITH f AS MATERIALIZED ({found}), "
            "t AS MATERIALIZED (SELECT f.content_id, x.cluster_id FROM f JOIN {contents_p} x "
            "ON x.collection_id = %(c)s AND x.content_id = f.content_id), "
            "c AS MATERIALIZED (SELECT z.content_id FROM (SELECT content_id, count(*) OVER w AS n, "
            "row_number() OVER w AS r FROM t WINDOW w AS (PARTITION BY cluster_id)) z "
            "WHERE z.n < %(dense)s OR z.r <= %(most)s) "
        )
    else:
        kept = f"WITH c AS MATERIALIZED ({found}{cap}) "
    return (
        f"{kept}{columns}FROM {{signatures_p}} s "
        "WHERE s.collection_id = %(c)s AND s.content_id IN (SELECT content_id FROM c)"
    )


def _lookup_here(columns: str, capped: bool, limited: bool) -> str:
    """``lookup``'s statement on one server: one join of the candidates with their signatures."""
    # One index scan for all the keys (band i's key at position i + 1), not a join with a
    # function scan that rescans the index once per key. The bands' condition lets a partition's
    # older (band, bucket, content_id) index serve too.
    candidates = (
        "SELECT DISTINCT b.content_id FROM {buckets_p} b "
        "WHERE b.collection_id = %(c)s AND b.band = ANY(%(bands)s::int2[]) "
        "AND b.bucket = ANY(%(keys)s::int8[]) "
        "AND b.band + 1 = ANY(array_positions(%(keys)s::int8[], b.bucket))"
    )
    if limited:
        # Each candidate's cluster, and how many candidates it has: a cluster under the dense
        # size has fewer than that, so every candidate outside dense clusters is read.
        candidates = (
            "SELECT k.content_id FROM (SELECT c.content_id, count(*) OVER w AS n, "
            f"row_number() OVER w AS r FROM ({candidates}) c JOIN {{contents_p}} t "
            "ON t.collection_id = %(c)s AND t.content_id = c.content_id "
            "WINDOW w AS (PARTITION BY t.cluster_id)) k "
            "WHERE k.n < %(dense)s OR k.r <= %(most)s"
        )
    elif capped:
        candidates += " LIMIT %(most)s"
    return (
        f"{columns}FROM ({candidates}) c "
        "JOIN {signatures_p} s ON s.collection_id = %(c)s AND s.content_id = c.content_id"
    )
