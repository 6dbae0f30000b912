"""The changes feed: every write to a collection that keeps one, numbered in commit order.

A writing transaction calls ``touch`` once it holds the collection's writer lock, with the ids of
the documents it is about to write or remove: it notes which of them exist and the pairs they are
in. ``record``, before it commits, compares: documents added, replaced or removed, pairs that
appeared, changed similarity or went, and the cluster merges and splits the writer reports; each
becomes one row of ``changes``, numbered from the collection's ``last_change`` counter.

Why the numbers follow commit order: only a transaction holding the collection's writer lock
(``catalog.get(lock=True)``, a transaction-level advisory lock) numbers changes, and PostgreSQL
releases such a lock only after the transaction's commit is visible to new snapshots. So the next
writer takes its numbers after every lower number is visible, never before: whatever snapshot a
reader takes, the numbers it sees of a collection are all those up to some point, and a reader
that resumes after the highest it saw skips none. A sequence or an identity column would number
rows as they are inserted, and two transactions could commit in the other order, so that a reader
sees 11 before 10 commits and then resumes past 10 (with a sequence's per-session CACHE, even
under the lock). The counter is a column of the collection's row, updated under the lock: it
rolls back with a failed write, so there are no gaps but those ``set_feed`` leaves on purpose.

Each commit that recorded a change sends a NOTIFY on ``CHANNEL`` (delivered when the transaction
commits) with ``schema.collection_id``, for readers waiting in ``wait``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import closing
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from neardup.errors import ChangesFeedError, ChangesGoneError, CollectionNotFoundError, Hint, ParamsError
from neardup.storage import pair_list
from neardup.storage.binary import Int8s
from neardup.storage.connect import connect, translated
from neardup.storage.scope import Scope

CHANNEL = "neardup_changes"


@dataclass(frozen=True)
class Change:
    """One change: its sequence number, when its transaction began, its kind (``document.added``,
    ``.replaced`` or ``.removed``, ``pair.added`` or ``.removed``, ``cluster.merged`` or ``.split``,
    ``collection.rebuilt``), and what it names:
    ``id`` (a document's), ``id_a < id_b`` and ``jaccard`` (a pair; ``jaccard`` only when added),
    ``cluster`` and ``clusters`` (the cluster that others merged into, and those; the cluster
    that split, and the clusters its remaining contents are in now)."""

    seq: int
    at: datetime
    kind: str
    id: str | None = None
    id_a: str | None = None
    id_b: str | None = None
    jaccard: float | None = None
    cluster: int | None = None
    clusters: list[int] | None = None
    dense: bool | None = None
    """For a cluster's change: whether it concerns a dense cluster (merged: the one kept has the
    collection's ``dense_cluster_size`` contents or more after the write; split: its parts have
    them together), whose stored pairs are a connecting subset of its pairs."""

    def to_dict(self) -> dict[str, Any]:
        """The change as JSON takes it (fields that do not apply left out)."""
        out: dict[str, Any] = {"seq": self.seq, "at": self.at.isoformat(), "kind": self.kind}
        for name in ("id", "id_a", "id_b", "jaccard", "cluster", "clusters", "dense"):
            if (value := getattr(self, name)) is not None:
                out[name] = value
        return out


@dataclass(frozen=True)
class ChangesPage:
    """Changes after a ``since``, in order, and the ``since`` to ask with next (the last one's
    number, or when there was none the collection's last number: nothing before it is unseen)."""

    changes: list[Change]
    last_seq: int


# The pairs (id_a < id_b, similarity) of the touched documents, as pair_list lists them: their
# contents' stored pairs expanded to documents, and documents sharing a content (similarity 1).
_PAIRS_OF_TOUCHED = """
SELECT DISTINCT least(d.external_id, o.external_id) AS a, greatest(d.external_id, o.external_id) AS b, e.sim
FROM neardup_touched t
JOIN {documents_p} d ON d.collection_id = %(c)s AND d.external_id = t.id
CROSS JOIN LATERAL (
    SELECT p.content_b AS other, p.similarity AS sim FROM {pairs_p} p
    WHERE p.collection_id = %(c)s AND p.content_a = d.content_id
    UNION ALL
    SELECT p.content_a, p.similarity FROM {pairs_p} p
    WHERE p.collection_id = %(c)s AND p.content_b = d.content_id
    UNION ALL
    SELECT x.content_id, 1.0::float8 FROM {contents_p} x
    WHERE x.collection_id = %(c)s AND x.content_id = d.content_id AND x.shingle_count > 0
) e
JOIN {documents_p} o ON o.collection_id = %(c)s AND o.content_id = e.other AND o.external_id <> d.external_id
"""
# The same on a distributed collection, where Citus cannot join the touched documents to the rows
# of each one's contents (the lateral subquery above): their contents, the other ends of those
# contents' pairs, then the documents of those, each a step Citus runs where the rows live.
_PAIRS_OF_TOUCHED_DISTRIBUTED = """
WITH tc AS MATERIALIZED (
    SELECT d.external_id AS id, d.content_id FROM {documents_p} d
    WHERE d.collection_id = %(c)s AND d.external_id IN (SELECT id FROM neardup_touched)
), e AS MATERIALIZED (
    SELECT tc.id, p.content_b AS other, p.similarity AS sim FROM tc
    JOIN {pairs_p} p ON p.content_a = tc.content_id
    UNION ALL
    SELECT tc.id, p.content_a, p.similarity FROM tc JOIN {pairs_p} p ON p.content_b = tc.content_id
    UNION ALL
    SELECT tc.id, x.content_id, 1.0::float8 FROM tc
    JOIN {contents_p} x ON x.content_id = tc.content_id AND x.shingle_count > 0
), o AS MATERIALIZED (
    SELECT content_id, external_id FROM {documents_p} WHERE content_id IN (SELECT other FROM e)
)
SELECT DISTINCT least(e.id, o.external_id) AS a, greatest(e.id, o.external_id) AS b, e.sim
FROM e JOIN o ON o.content_id = e.other AND o.external_id <> e.id
"""


def _pairs(scope: Scope, every: bool) -> str:
    """The statement that lists the pairs (a, b, sim) of the touched documents, or with ``every``
    of the whole collection (a rebuild changes any of them)."""
    if every:
        return f"WITH {pair_list.cte(scope)} SELECT id_a AS a, id_b AS b, similarity AS sim FROM dp"
    return _PAIRS_OF_TOUCHED_DISTRIBUTED if scope.distributed else _PAIRS_OF_TOUCHED


def retention(hours: int | None) -> timedelta | None:
    """A feed's retention from its checked hours (``validate.retention_hours``; None: every change)."""
    return None if hours is None else timedelta(hours=hours)


def touch(scope: Scope, external_ids: Sequence[str] | None) -> None:
    """Note, in this transaction, which of ``external_ids`` are stored and the pairs they are in
    (None: every document and pair, before a rebuild). Called under the writer lock, before the
    transaction writes them."""
    scope.conn.execute("DROP TABLE IF EXISTS neardup_touched, neardup_pairs_before")
    scope.conn.execute(
        'CREATE TEMP TABLE neardup_touched (id text COLLATE "C" PRIMARY KEY, existed boolean NOT NULL) '
        "ON COMMIT DROP"
    )
    params = {"c": scope.collection_id, "ids": list(external_ids or ())}
    if external_ids:
        # On Citus the stored ones are looked up in one step: it runs no subquery that refers to
        # an element of an array.
        stored = (
            "u.id IN (SELECT d.external_id FROM {documents_p} d WHERE d.collection_id = %(c)s "
            "AND d.external_id = ANY(%(ids)s::text[]))"
            if scope.distributed
            else "EXISTS (SELECT 1 FROM {documents_p} d "
            "WHERE d.collection_id = %(c)s AND d.external_id = u.id)"
        )
        scope.conn.execute(
            scope.sql(
                f"INSERT INTO neardup_touched SELECT u.id, {stored} "
                'FROM (SELECT DISTINCT u COLLATE "C" AS id FROM unnest(%(ids)s::text[]) AS u) u'
            ),
            params,
        )
    pairs = _pairs(scope, external_ids is None)
    scope.conn.execute(scope.sql(f"CREATE TEMP TABLE neardup_pairs_before ON COMMIT DROP AS {pairs}"), params)


# The changes of a transaction: the rebuild, documents, pairs gone, pairs new or re-measured,
# cluster splits, cluster merges (in that order, as they happened), numbered after the counter.
_RECORD = """
WITH now_pairs AS ({pairs}),
bound AS (
    SELECT coalesce((params ->> 'dense_cluster_size')::bigint, 128) AS n
    FROM {s}.collections WHERE collection_id = %(c)s
),
ev AS (
    SELECT 0 AS ord, 'collection.rebuilt' AS kind, NULL::text AS id_a, NULL::text AS id_b,
           NULL::float8 AS sim, NULL::int8 AS cluster, NULL::int8[] AS clusters, NULL::boolean AS dense
    WHERE %(rebuilt)s
    UNION ALL
    SELECT 1, CASE WHEN NOT t.existed THEN 'document.added' WHEN d.doc_id IS NULL THEN 'document.removed'
                   ELSE 'document.replaced' END, t.id, NULL, NULL, NULL, NULL, NULL
    FROM neardup_touched t LEFT JOIN {documents_now}
    WHERE t.existed OR d.doc_id IS NOT NULL
    UNION ALL
    SELECT 2, 'pair.removed', b.a, b.b, NULL, NULL, NULL, NULL FROM neardup_pairs_before b
    WHERE NOT EXISTS (SELECT 1 FROM now_pairs n WHERE n.a = b.a AND n.b = b.b)
    UNION ALL
    SELECT 3, 'pair.added', n.a, n.b, n.sim, NULL, NULL, NULL FROM now_pairs n
    WHERE NOT EXISTS (SELECT 1 FROM neardup_pairs_before b WHERE b.a = n.a AND b.b = n.b AND b.sim = n.sim)
    UNION ALL
    SELECT 4, 'cluster.split', NULL, NULL, NULL, s.old, array_agg(DISTINCT s.new ORDER BY s.new),
           {split_size} >= (SELECT n FROM bound)
    FROM unnest(%(split_old)s::int8[], %(split_new)s::int8[]) AS s(old, new) GROUP BY s.old
    UNION ALL
    SELECT 5, 'cluster.merged', NULL, NULL, NULL, m.new, array_agg(DISTINCT m.old ORDER BY m.old),
           {merged_size} >= (SELECT n FROM bound)
    FROM unnest(%(merged_old)s::int8[], %(merged_new)s::int8[]) AS m(old, new) GROUP BY m.new
),
numbered AS (
    SELECT ev.*, row_number() OVER (ORDER BY ord, id_a, id_b, cluster) AS n FROM ev
),
bump AS (
    UPDATE {s}.collections SET last_change = last_change + (SELECT count(*) FROM numbered)
    WHERE collection_id = %(c)s RETURNING last_change - (SELECT count(*) FROM numbered) AS base, last_change
),
written AS (
    INSERT INTO {s}.changes (collection_id, seq, kind, id_a, id_b, similarity, cluster, clusters, dense)
    SELECT %(c)s, bump.base + numbered.n, kind, id_a, id_b, sim, cluster, clusters, dense FROM numbered, bump
)
SELECT last_change - base FROM bump
"""


def record(
    scope: Scope,
    *,
    rebuilt: bool,
    merged: tuple[Sequence[int], Sequence[int]],
    split: tuple[Sequence[int], Sequence[int]],
) -> int:
    """Number and store this transaction's changes (after ``touch``): its documents' and pairs'
    as they stand now against what ``touch`` noted, ``merged`` (old labels, the label each merged
    into) and ``split`` (a cluster that split, and a label its contents have now, one row each);
    with ``rebuilt``, every pair and one 'collection.rebuilt'. Returns how many were stored."""
    pairs, documents_now = (
        _pairs(scope, rebuilt),
        "{documents_p} d ON d.collection_id = %(c)s AND d.external_id = t.id",
    )
    # The contents of a cluster that split or merged now, to say whether it is dense.
    split_size = "(SELECT count(*) FROM {contents_p} t WHERE t.cluster_id = ANY(array_agg(s.new)))"
    merged_size = "(SELECT count(*) FROM {contents_p} t WHERE t.cluster_id = m.new)"
    if scope.distributed:
        # Citus plans no statement that joins a coordinator's table to a distributed one and
        # writes, nor a subquery that refers to a row of unnest: what is stored now (documents,
        # pairs and the sizes of the clusters named) is read into temporary tables first.
        params: dict[str, Any] = {"c": scope.collection_id, "ks": Int8s([*merged[1], *split[1]])}
        split_size = (
            "(SELECT coalesce(sum(z.n), 0) FROM neardup_sizes_after z WHERE z.k = ANY(array_agg(s.new)))"
        )
        merged_size = "(SELECT coalesce(sum(z.n), 0) FROM neardup_sizes_after z WHERE z.k = m.new)"
        for table, query in (
            (
                "neardup_sizes_after",
                "SELECT cluster_id AS k, count(*) AS n FROM {contents_p} WHERE collection_id = %(c)s "
                "AND cluster_id = ANY(%(ks)s::int8[]) GROUP BY cluster_id",
            ),
            ("neardup_pairs_after", pairs),
            (
                "neardup_documents_after",
                "SELECT external_id, doc_id FROM {documents_p} WHERE collection_id = %(c)s "
                "AND external_id IN (SELECT id FROM neardup_touched)",
            ),
        ):
            scope.conn.execute(f"DROP TABLE IF EXISTS {table}")
            scope.conn.execute(scope.sql(f"CREATE TEMP TABLE {table} ON COMMIT DROP AS {query}"), params)
        pairs = "SELECT a, b, sim FROM neardup_pairs_after"
        documents_now = "neardup_documents_after d ON d.external_id = t.id"
    row = scope.conn.execute(
        scope.sql(
            _RECORD.replace("{pairs}", pairs)
            .replace("{documents_now}", documents_now)
            .replace("{split_size}", split_size)
            .replace("{merged_size}", merged_size)
        ),
        {
            "c": scope.collection_id,
            "rebuilt": rebuilt,
            "merged_old": Int8s(merged[0]),
            "merged_new": Int8s(merged[1]),
            "split_old": Int8s(split[0]),
            "split_new": Int8s(split[1]),
        },
        prepare=False,
    ).fetchone()
    count = int(row[0]) if row else 0
    if count:
        scope.conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, f"{scope.schema}.{scope.collection_id}"))
    return count


def prune(scope: Scope, retention: timedelta) -> None:
    """Delete the collection's changes older than ``retention`` (from the oldest, up to the first
    kept), and answer no ``since`` before the first one kept. Under the writer lock."""
    # Three statements, not one with data-modifying subqueries: on a distributed schema Citus plans
    # no statement that writes both the coordinator's changes and the collections (a reference table).
    params: dict[str, Any] = {"c": scope.collection_id, "r": retention}
    row = scope.conn.execute(
        scope.sql(
            "SELECT coalesce((SELECT x.seq FROM {s}.changes x WHERE x.collection_id = %(c)s "
            "AND x.at >= now() - %(r)s ORDER BY x.seq LIMIT 1), %(last)s + 1)"
        ),
        {**params, "last": _last_change(scope)},
    ).fetchone()
    params["first"] = int(row[0]) if row else 0
    scope.conn.execute(
        scope.sql("DELETE FROM {s}.changes WHERE collection_id = %(c)s AND seq < %(first)s"), params
    )
    scope.conn.execute(
        scope.sql(
            "UPDATE {s}.collections SET changes_from = %(first)s - 1 "
            "WHERE collection_id = %(c)s AND changes_from < %(first)s - 1"
        ),
        params,
    )


def _last_change(scope: Scope) -> int:
    row = scope.conn.execute(
        scope.sql("SELECT last_change FROM {s}.collections WHERE collection_id = %s"), (scope.collection_id,)
    ).fetchone()
    return int(row[0]) if row else 0


def set_feed(scope: Scope, on: bool, retention: timedelta | None) -> None:
    """Turn the collection's feed on (keeping each change ``retention``; None: every one) or off
    (its changes deleted). Turning it on skips a number, from which the feed answers: a reader
    that followed it before it was off is told it missed writes. Under the writer lock."""
    if on:
        scope.conn.execute(
            scope.sql(
                "UPDATE {s}.collections SET change_retention = %s, "
                "last_change = last_change + CASE WHEN change_feed THEN 0 ELSE 1 END, "
                "changes_from = CASE WHEN change_feed THEN changes_from ELSE last_change + 1 END, "
                "change_feed = true WHERE collection_id = %s"
            ),
            (retention, scope.collection_id),
        )
        return
    scope.conn.execute(scope.sql("DELETE FROM {s}.changes WHERE collection_id = %s"), (scope.collection_id,))
    scope.conn.execute(
        scope.sql(
            "UPDATE {s}.collections SET change_feed = false, change_retention = NULL, "
            "changes_from = last_change WHERE collection_id = %s"
        ),
        (scope.collection_id,),
    )


def delete(scope: Scope) -> None:
    """Delete the collection's changes (it is being dropped)."""
    scope.conn.execute(scope.sql("DELETE FROM {s}.changes WHERE collection_id = %s"), (scope.collection_id,))


def kept(scope: Scope) -> tuple[int, int]:
    """How many changes of the collection are kept, and their bytes (the rows' own sizes; the
    table is shared by the schema's collections)."""
    row = scope.conn.execute(
        scope.sql(
            "SELECT count(*), coalesce(sum(pg_column_size(x.*)), 0) FROM {s}.changes x "
            "WHERE x.collection_id = %s"
        ),
        (scope.collection_id,),
    ).fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


_PAGE = """
SELECT c.change_feed, c.changes_from, c.last_change,
       x.seq, x.at, x.kind, x.id_a, x.id_b, x.similarity, x.cluster, x.clusters, x.dense
FROM {s}.collections c
LEFT JOIN LATERAL (
    SELECT * FROM {s}.changes y WHERE y.collection_id = c.collection_id AND y.seq > %(since)s
    ORDER BY y.seq LIMIT %(n)s
) x ON true
WHERE c.collection_id = %(c)s
ORDER BY x.seq
"""


def page(scope: Scope, name: str, since: int, limit: int) -> ChangesPage:
    """Up to ``limit`` changes numbered after ``since``, read in one statement (one snapshot);
    ``since`` 0 asks for every change kept, from the oldest (a consumer that has seen none).
    ChangesGoneError when changes after ``since`` are no longer kept; ChangesFeedError when the
    collection keeps no feed."""
    rows = scope.conn.execute(
        scope.sql(_PAGE), {"c": scope.collection_id, "since": since, "n": limit}
    ).fetchall()
    if not rows:
        raise CollectionNotFoundError(f"collection {name!r} was dropped")
    on, first, last = rows[0][0], int(rows[0][1]), int(rows[0][2])
    if not on:
        raise ChangesFeedError(
            f"collection {name!r} keeps no changes feed",
            hint=Hint("turn one on with", remedy="changes_feed", fields=(("name", name),)),
        )
    if since == 0:  # no change is numbered 0: a new consumer, which gets every change kept
        since = first
    elif since < first:
        raise ChangesGoneError(
            f"the changes of {name!r} after {since} are no longer all kept (the feed answers from "
            f"since={first}): list the collection again and follow from since={last}"
        )
    if since > last:
        raise ParamsError(f"since={since} is ahead of the changes of {name!r} (the last is {last})")
    found = [_change(r[3:]) for r in rows if r[3] is not None]
    return ChangesPage(found, found[-1].seq if found else last)


def _change(r: tuple[Any, ...]) -> Change:
    seq, at, kind, id_a, id_b, sim, cluster, clusters, dense = r
    if kind.startswith("document."):
        return Change(int(seq), at, kind, id=id_a)
    if kind.startswith("pair."):
        return Change(int(seq), at, kind, id_a=id_a, id_b=id_b, jaccard=None if sim is None else float(sim))
    if kind.startswith("cluster."):
        return Change(
            int(seq), at, kind, cluster=int(cluster), clusters=[int(c) for c in clusters], dense=bool(dense)
        )
    return Change(int(seq), at, kind)


def read(url: str, scope: Scope, name: str, since: int, limit: int, timeout: float) -> ChangesPage:
    """``page`` of a checked request (``validate.feed_request``), on ``scope``'s connection; when
    it finds nothing and ``timeout`` > 0, ``wait``."""
    with translated(f"reading the changes of {name!r}"):
        found = page(scope, name, since, limit)
    if found.changes or timeout == 0:
        return found
    return wait(url, scope, name, since, limit, timeout)


def wait(url: str, scope: Scope, name: str, since: int, limit: int, timeout: float) -> ChangesPage:
    """``page``, waiting up to ``timeout`` seconds for a first change after ``since`` (LISTEN on a
    connection of its own, opened before the first read so that no commit falls between)."""
    deadline = time.monotonic() + timeout
    mine = f"{scope.schema}.{scope.collection_id}"
    with translated(f"waiting for changes of {name!r}"), closing(connect(url)) as conn:
        conn.execute(f"LISTEN {CHANNEL}")
        here = Scope(conn, scope.schema, scope.collection_id, scope.distributed)
        while True:
            found = page(here, name, since, limit)
            left = deadline - time.monotonic()
            if found.changes or left <= 0:
                return found
            for note in conn.notifies(timeout=left):
                if note.payload == mine:
                    break
