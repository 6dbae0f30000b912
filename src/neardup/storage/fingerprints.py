"""Text fingerprints (``core.fingerprints``) of a collection that keeps its neighbours: rows of the
buckets table in a band of their own, ``FINGERPRINT_BAND``, found by the bucket lookup index like
any bucket key. No other band is negative, so the bands' listings leave them out by ``band >= 0``.
A partial index on their content ids, made only for such a collection, serves their deletion.
"""

from __future__ import annotations

from typing import NamedTuple

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


class Sharing(NamedTuple):
    """What ``sharing`` found: each content's id, fingerprints shared and shingle count; the
    fingerprints too common to count; and the cap on holders it counted under."""

    ids: npt.NDArray[np.int64]
    shared: npt.NDArray[np.int64]
    sizes: npt.NDArray[np.int64]
    common: npt.NDArray[np.int64]
    cap: int


# The statement of ``sharing``, in parts. Each probe's holders are counted first, up to one past the
# cap, in an index-only scan that keeps nothing (k), and read only where they count (g): a common
# fingerprint's are not kept. The holders come from the lookup index alone (its entries carry the
# content in a collection with neighbours), by the bucket key alone: a band's key equals a
# fingerprint with probability ~2**-64, and such a row would only add a candidate, which is
# verified exactly. The tier is the lower cap where the text's own common fingerprints allow it.
_COUNTED = (
    "WITH k AS MATERIALIZED (SELECT u.f, (SELECT count(*) FROM (SELECT 1 FROM {buckets_p} b "
    "WHERE b.bucket = u.f LIMIT %(over)s) x) AS holders FROM unnest(%(f)s::int8[]) AS u(f)), "
    "tier AS MATERIALIZED (SELECT CASE WHEN %(first)s::int IS NOT NULL AND n + %(tslack)s * sqrt(n) + 1 "
    "< %(bound)s * cardinality(%(own)s::int8[]) THEN %(first)s::int ELSE %(cap)s::int END AS cap "
    "FROM (SELECT count(*) AS n FROM k WHERE holders > coalesce(%(first)s::int, %(cap)s::int) "
    "AND f = ANY(%(own)s::int8[])) h), "
    "common AS MATERIALIZED (SELECT f FROM k WHERE holders > (SELECT cap FROM tier)), "
    "held AS MATERIALIZED (SELECT count(*) AS n FROM common WHERE f = ANY(%(own)s::int8[])), "
    "g AS MATERIALIZED (SELECT b.content_id, count(*) AS n FROM k CROSS JOIN LATERAL "
    "(SELECT content_id FROM {buckets_p} b WHERE b.bucket = k.f) b "
    "WHERE k.holders <= (SELECT cap FROM tier) GROUP BY b.content_id), "
)
# A candidate's size, read by a lookup a row once it passes the filter (the planner, which cannot
# tell how few pass, would else hash the whole partition's sizes).
_SIZE = (
    "(SELECT t.shingle_count FROM {contents_p} t "
    "WHERE t.collection_id = %(c)s AND t.content_id = g.content_id)"
)
# Top-k and contains: the filter, and the long candidates kept whatever they share, from the sizes
# index.
_CONTAINED = (
    f"found AS (SELECT g.content_id, g.n, {_SIZE} AS shingle_count FROM g "
    "WHERE g.n + %(slack)s * sqrt(g.n) + 1 "
    ">= %(share)s * (cardinality(%(own)s::int8[]) - (SELECT n FROM held)) "
    "UNION SELECT g.content_id, g.n, t.shingle_count FROM g "
    "JOIN {contents_p} t ON t.collection_id = %(c)s AND t.content_id = g.content_id "
    "WHERE t.shingle_count >= %(large)s) "
)
# Within: a stored text's count reaches share of its expected fingerprints, so it has at most
# (count + slack) / (share * density) shingles. Those sharing fewer than _MANY come from the sizes
# index up to the bound at _MANY - 1, a short range; the rest, few, by a lookup each.
_FITS = "n + %(slack)s * sqrt(n) + 1 + (SELECT n FROM held) >= %(share)s * %(density)s * shingle_count"
# The bound is cast to the column's type: compared as a float, the column would be read whole
# instead of by the sizes index.
_WITHIN = (
    "small AS MATERIALIZED (SELECT content_id, shingle_count FROM {contents_p} WHERE shingle_count <= "
    "(SELECT least(floor((%(many)s - 1 + %(slack)s * sqrt(%(many)s - 1) + 1 + n) "
    "/ nullif(%(share)s * %(density)s, 0)), 2147483647)::int FROM held) OR %(share)s * %(density)s = 0), "
    f"found AS (SELECT * FROM (SELECT g.content_id, g.n, {_SIZE} AS shingle_count FROM g "
    f"WHERE g.n >= %(many)s) m WHERE {_FITS} "
    "UNION ALL SELECT * FROM (SELECT g.content_id, g.n, t.shingle_count FROM g "
    f"JOIN small t ON t.content_id = g.content_id WHERE g.n < %(many)s) s WHERE {_FITS}) "
)
_RESULT = (
    "SELECT array_agg(content_id), array_agg(n), array_agg(shingle_count::int8), "
    "(SELECT array_agg(f) FROM common), (SELECT cap FROM tier) FROM found"
)
# A within query reads the sizes of the candidates sharing at least this many fingerprints by a
# lookup each; those sharing fewer can only be short, and come from the sizes index. Most share
# one or two: the short ones' bound rises with this, and with it how many the index gives.
_MANY = 3
# On one server, a top-k or containment count under a cap above this groups its holders here, not
# in the statement: under a high cap a query reads hundreds of thousands of holder rows, nearly a
# content each, which the server's hash aggregate groups for longer than a sort of them here takes.
_GROUPED_MOST = 1_000


def sharing(
    scope: Scope,
    fingerprint: npt.NDArray[np.int64],
    cap: int,
    own: npt.NDArray[np.int64] | None = None,
    share: float = 0.0,
    slack: float = 0.0,
    large: int | None = None,
    density: float | None = None,
    first: tuple[int, float, float] | None = None,
) -> Sharing:
    """(content, fingerprints shared, shingle count) of each stored content with a fingerprint among
    ``fingerprint``, counting only the fingerprints held by at most ``cap`` contents, and those
    held by more (common): one statement, which returns a row a content, not a row a holding.
    With ``first`` = (a lower cap, bound, slack), it counts under the lower cap instead where the
    fingerprints of ``own`` held by more than it, ``slack`` standard deviations and one up, make
    less than ``bound`` of ``own`` (the first of a query's tiers; ``neighbours._sharing``).

    With ``share`` (a filter, approximate as the Poisson model it rests on), only some come back:
    by default those whose count, ``slack`` standard deviations and one up, reaches ``share`` of
    the fingerprints of ``own`` that are counted, and those of at least ``large`` shingles; with
    ``density`` (fingerprints a shingle), those whose count so raised, plus the fingerprints of
    ``own`` that are common, reaches ``share`` of their own expected fingerprints (a stored text
    that much within the text)."""
    # No JIT: the plan's estimated cost passes jit_above_cost, but compiling it takes longer than
    # running it.
    scope.conn.execute("SET LOCAL jit = off")
    if scope.distributed or (cap > _GROUPED_MOST and density is None):
        return _sharing_in_steps(scope, fingerprint, cap, own, share, slack, large, density, first)
    if density is not None:
        # The bound on a short candidate's size is known only as the statement runs, where the
        # planner would guess a third of the contents, and scan them all (the setting lasts to the
        # end of the query's transaction, whose other reads go by content id).
        scope.conn.execute("SET LOCAL enable_seqscan = off")
    found = _CONTAINED if density is None else _WITHIN
    with scope.conn.cursor(binary=True) as cur:
        # Never prepared: a generic plan would not see the sizes' bounds.
        row = cur.execute(
            scope.sql(_COUNTED + found + _RESULT),
            {
                "f": Int8s(fingerprint),
                "c": scope.collection_id,
                "over": cap + 1,
                "cap": cap,
                "own": Int8s(fingerprint[:0] if own is None else own),
                "share": share,
                "slack": slack,
                "large": large,
                "density": density,
                "many": _MANY,
                "first": None if first is None else first[0],
                "bound": 0.0 if first is None else first[1],
                "tslack": 0.0 if first is None else first[2],
            },
            prepare=False,
        ).fetchone()
    empty = np.empty(0, np.int64)
    if row is None:
        return Sharing(empty, empty, empty, empty, cap)
    common = empty if row[3] is None else np.asarray(row[3], dtype=np.int64)
    used = cap if row[4] is None else int(row[4])
    if row[0] is None:
        return Sharing(empty, empty, empty, common, used)
    ids, shared, sizes = (np.asarray(v, dtype=np.int64) for v in row[:3])
    return Sharing(ids, shared, sizes, common, used)


def short_holders(
    scope: Scope, common: npt.NDArray[np.int64], longest: float, most: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]] | None:
    """(content, fingerprints of ``common`` held, shingle count) of the stored contents of at most
    ``longest`` shingles that hold one of ``common``; None when more than ``most`` contents are that
    short. The short ones come from the sizes index, their fingerprints by their content ids (the
    deletion index): a common fingerprint's holders, many, are never read."""
    empty = np.empty(0, np.int64)
    rows = scope.conn.execute(
        scope.sql("SELECT content_id, shingle_count FROM {contents_p} WHERE shingle_count <= %s LIMIT %s"),
        (int(longest), most + 1),
    ).fetchall()
    if len(rows) > most:
        return None
    if not rows or common.size == 0:
        return empty, empty, empty
    size_of = {int(r[0]): int(r[1]) for r in rows}
    with scope.conn.cursor(binary=True) as cur:
        row = cur.execute(
            scope.sql(
                # The band written out, so that the planner, generic plan or not, can use the
                # partial index of the fingerprints' contents.
                f"SELECT array_agg(content_id), array_agg(n) FROM (SELECT content_id, count(*) AS n "
                f"FROM {{buckets_p}} WHERE band = {FINGERPRINT_BAND} AND content_id = ANY(%s::int8[]) "
                "AND bucket = ANY(%s::int8[]) GROUP BY content_id) g"
            ),
            (Int8s(np.fromiter(size_of, np.int64, len(size_of))), Int8s(common)),
        ).fetchone()
    if row is None or row[0] is None:
        return empty, empty, empty
    ids = np.asarray(row[0], dtype=np.int64)
    sizes = np.asarray([size_of[i] for i in ids.tolist()], dtype=np.int64)
    return ids, np.asarray(row[1], dtype=np.int64), sizes


def _sharing_in_steps(
    scope: Scope,
    fingerprint: npt.NDArray[np.int64],
    cap: int,
    own: npt.NDArray[np.int64] | None,
    share: float,
    slack: float,
    large: int | None,
    density: float | None,
    first: tuple[int, float, float] | None,
) -> Sharing:
    """``sharing`` in steps, the same answer: the filters between the steps run here. On a
    distributed collection Citus runs no subquery that refers to a row of an array's elements
    (``k`` above) or of an earlier step's result, so each step is a statement of its own, Citus
    spreading it over the shards; the holders of a probe are counted in full (a shard's
    index-only count of its own), where one server stops one past the cap. On one server the
    holders of each probe counted come back, and are grouped here."""
    empty = np.empty(0, np.int64)
    own = empty if own is None else own
    if scope.distributed:
        held_keys, holders = _rows_by(scope, "bucket", fingerprint)
    else:
        held_keys, holders = _holder_counts(scope, fingerprint, cap)
    # In the probes' order, as one server's statement returns the common ones.
    order = np.argsort(held_keys, kind="stable")
    held_keys, holders = held_keys[order], holders[order]
    used = cap
    if first is not None:
        over_first = int(np.count_nonzero((holders > first[0]) & np.isin(held_keys, own)))
        if over_first + first[2] * np.sqrt(over_first) + 1 < first[1] * own.size:
            used = first[0]
    common = held_keys[holders > used]
    held = int(np.count_nonzero(np.isin(common, own)))
    counted = held_keys[holders <= used]
    if counted.size == 0:
        return Sharing(empty, empty, empty, common, used)
    if scope.distributed:
        ids, shared = _rows_by(scope, "content_id", counted)
    else:
        ids, shared = np.unique(_holders(scope, counted), return_counts=True)
    if ids.size == 0:
        return Sharing(empty, empty, empty, common, used)
    raised = shared + slack * np.sqrt(shared) + 1
    if density is None:
        # Those whose count could make the share, and those long enough whatever they share.
        passing = raised >= share * (own.size - held)
        sized = _sizes(scope, ids[passing], None)
        if large is not None:
            sized.update(_long(scope, ids[~passing], large))
        keep = np.isin(ids, np.fromiter(sized, np.int64, len(sized)))
    else:
        # Those that could lie within: a stored text's count reaches share of its own expected
        # fingerprints.
        sized = _sizes(scope, ids, None)
        size_of = np.asarray([sized.get(i, -1) for i in ids.tolist()], dtype=np.float64)
        keep = (size_of >= 0) & (raised + held >= share * density * size_of)
    kept = ids[keep]
    sizes = np.asarray([sized[i] for i in kept.tolist()], dtype=np.int64)
    return Sharing(kept, shared[keep], sizes, common, used)


def _rows_by(
    scope: Scope, column: str, keys: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Of the bucket rows under ``keys``: each value of ``column`` (bucket or content_id) and its
    rows, one statement that each shard answers for its own rows."""
    with scope.conn.cursor(binary=True) as cur:
        row = cur.execute(
            scope.sql(
                f"SELECT array_agg({column}), array_agg(n) FROM (SELECT {column}, count(*) AS n "
                f"FROM {{buckets_p}} WHERE bucket = ANY(%s::int8[]) GROUP BY {column}) g"
            ),
            (Int8s(keys),),
        ).fetchone()
    if row is None or row[0] is None:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    return np.asarray(row[0], dtype=np.int64), np.asarray(row[1], dtype=np.int64)


def _holder_counts(
    scope: Scope, keys: npt.NDArray[np.int64], cap: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(key, holders up to one past ``cap``) of each of ``keys``: an index-only count each."""
    with scope.conn.cursor(binary=True) as cur:
        row = cur.execute(
            scope.sql(
                "SELECT array_agg(u.f), array_agg((SELECT count(*) FROM (SELECT 1 FROM {buckets_p} b "
                "WHERE b.bucket = u.f LIMIT %s) x)) FROM unnest(%s::int8[]) AS u(f)"
            ),
            (cap + 1, Int8s(keys)),
        ).fetchone()
    if row is None or row[0] is None:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    return np.asarray(row[0], dtype=np.int64), np.asarray(row[1], dtype=np.int64)


def _holders(scope: Scope, keys: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The content of each holding of ``keys`` (the lookup index alone): an array a key, since a row
    a holding costs an object each here; only keys already counted, so that no array is built for
    a common one."""
    with scope.conn.cursor(binary=True) as cur:
        rows = cur.execute(
            scope.sql(
                "SELECT (SELECT array_agg(content_id) FROM {buckets_p} b WHERE b.bucket = u.f) "
                "FROM unnest(%s::int8[]) AS u(f)"
            ),
            (Int8s(keys),),
        ).fetchall()
    got = [np.asarray(r[0], dtype=np.int64) for r in rows if r[0] is not None]
    return np.concatenate(got) if got else np.empty(0, np.int64)


def _long(scope: Scope, ids: npt.NDArray[np.int64], large: int) -> dict[int, int]:
    """The shingle counts of those of the contents ``ids`` of at least ``large`` shingles: from the
    sizes index while the contents that long are no more than ``ids``, else by a lookup each (so
    it reads at most twice the fewer)."""
    if ids.size == 0:
        return {}
    rows = scope.conn.execute(
        scope.sql("SELECT content_id, shingle_count FROM {contents_p} WHERE shingle_count >= %s LIMIT %s"),
        (large, ids.size + 1),
    ).fetchall()
    if len(rows) > ids.size:
        return _sizes(scope, ids, large)
    wanted = set(ids.tolist())
    return {int(r[0]): int(r[1]) for r in rows if int(r[0]) in wanted}


def _sizes(scope: Scope, ids: npt.NDArray[np.int64], at_least: int | None) -> dict[int, int]:
    """The shingle counts of the contents ``ids`` (of at least ``at_least`` shingles, if given)."""
    if ids.size == 0:
        return {}
    rows = scope.conn.execute(
        scope.sql(
            "SELECT content_id, shingle_count FROM {contents_p} WHERE content_id = ANY(%s::int8[]) "
            "AND shingle_count >= %s"
        ),
        (Int8s(ids), 0 if at_least is None else at_least),
    ).fetchall()
    return {int(r[0]): int(r[1]) for r in rows}


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
    index, their own deletion and sizes indexes, and what carrying the content costs the bands'
    entries of the lookup index (``create_index``), which a collection without neighbours does not
    pay. Approximate: shares by rows, the bands' extra by the entries' widths."""
    # On a distributed collection Citus's functions sum the shards on every node (an index too).
    pg = "citus" if scope.distributed else "pg"
    row = scope.conn.execute(
        scope.sql(
            "SELECT (SELECT count(*) FROM {buckets_p} WHERE band = %s), (SELECT count(*) FROM {buckets_p}), "
            f"{pg}_total_relation_size(%s::regclass), coalesce({pg}_relation_size(to_regclass(%s)), 0), "
            f"coalesce({pg}_relation_size(to_regclass(%s)), 0), "
            f"coalesce({pg}_relation_size(to_regclass(%s)), 0)"
        ),
        (
            FINGERPRINT_BAND,
            scope.sql("{buckets_p}").as_string(scope.conn),
            _index(scope, True).as_string(scope.conn),
            _sizes_index(scope, True).as_string(scope.conn),
            scope.sql("{bucket_index_q}").as_string(scope.conn),
        ),
    ).fetchone()
    if row is None or not row[0]:
        return 0, int(row[3]) + int(row[4]) if row else 0
    rows, total, partition, deletion, sizes, lookup = (int(v) for v in row)
    # The deletion index is the partition's too: counted once, whole.
    shared = round((partition - deletion) * rows / total)
    return rows, shared + deletion + sizes + round(lookup * (total - rows) / total * _CARRIED_SHARE)


# Of a covering lookup entry's bytes on its page (line pointer 4, tuple header 8, key 8, content 8),
# the share the content takes: a band's entry without it is 20 bytes, with it 28.
_CARRIED_SHARE = 8 / 28


__all__ = [
    "FINGERPRINT_BAND",
    "Sharing",
    "delete",
    "insert",
    "prepare",
    "sharing",
    "short_holders",
    "signatures",
    "size",
]
