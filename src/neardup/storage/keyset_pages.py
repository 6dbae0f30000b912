"""Pages of listings for the service (keyset paging: each page starts after the last key of the one
before, so a page costs the same wherever it is), single documents with their pairs, one pair,
and dropping a collection.

Each function reads on the caller's connection with the scope's collection; none commits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from neardup.storage import changes, listings, pair_list, statistics
from neardup.storage.connect import translated
from neardup.storage.names import KEY_TABLE, PARTITIONED_TABLES
from neardup.storage.scope import Scope


@dataclass(frozen=True)
class ClusterRow:
    """One cluster: its stored id (lasting across writes), size, representative (as the
    collection's ``keep`` policy chooses it) and its first ids."""

    cluster: int
    size: int
    representative: str
    ids: list[str]
    dense: bool = False
    """Whether it is one of ``dense_clusters``: its stored pairs a connecting subset."""


def pairs_page(
    scope: Scope, min_similarity: float, after: tuple[str, str] | None, limit: int
) -> list[tuple[str, str, float, str]]:
    """Up to ``limit`` pairs (id_a, id_b, similarity, method) at or above ``min_similarity``, by
    (id_a, id_b), starting after the key ``after``."""
    first = ("", "") if after is None else after
    params = {"c": scope.collection_id, "m": min_similarity, "a": first[0], "b": first[1], "n": limit}
    with translated("reading a page of pairs"):
        query = (
            f"WITH {pair_list.bound(scope, params)} SELECT id_a, id_b, similarity, method FROM dp "
            "WHERE similarity >= %(m)s AND (id_a, id_b) > (%(a)s, %(b)s) ORDER BY id_a, id_b LIMIT %(n)s"
        )
        rows = scope.conn.execute(scope.sql(query), params).fetchall()
    return [(a, b, float(s), m) for a, b, s, m in rows]


# Clusters grouped from the cluster_list view: id order is bytewise (the ids' "C" collation).
_CLUSTERS = (
    "SELECT cluster, size, representative, ids, dense FROM ("
    "SELECT g.*, k.cluster IS NOT NULL AS dense FROM ("
    "SELECT cluster, count(*) AS size, min(id) FILTER (WHERE representative) AS representative, "
    "(array_agg(id ORDER BY id))[1:%(ids)s] AS ids FROM {s}.cluster_list "
    "WHERE collection_id = %(c)s GROUP BY cluster) g "
    "LEFT JOIN (SELECT cluster FROM {s}.dense_clusters WHERE collection_id = %(c)s) k "
    "ON k.cluster = g.cluster) x "
)


def clusters_page(
    scope: Scope, after: str | None, limit: int, ids_per_cluster: int = 100_000
) -> list[ClusterRow]:
    """Up to ``limit`` clusters by representative, after the representative ``after``; each with
    at most ``ids_per_cluster`` of its ids, sorted."""
    params: dict[str, Any] = {
        "c": scope.collection_id,
        "after": after or "",
        "n": limit,
        "ids": ids_per_cluster,
    }
    query = _CLUSTERS + "WHERE representative > %(after)s ORDER BY representative LIMIT %(n)s"
    with translated("reading a page of clusters"):
        rows = scope.conn.execute(scope.sql(query), params).fetchall()
    return [ClusterRow(int(c), int(n), r, list(ids), bool(d)) for c, n, r, ids, d in rows]


def largest_clusters(
    scope: Scope, after: tuple[int, str] | None, limit: int, ids_per_cluster: int = 5
) -> list[ClusterRow]:
    """Up to ``limit`` clusters, largest first (then by representative), after the key
    (size, representative) ``after``."""
    if scope.distributed:
        with translated("reading the largest clusters"):
            found = _largest_distributed(scope, after, limit, ids_per_cluster)
        if found is not None:
            return found
    params: dict[str, Any] = {"c": scope.collection_id, "n": limit, "ids": ids_per_cluster}
    query = _CLUSTERS
    if after is not None:
        query += "WHERE size < %(size)s OR (size = %(size)s AND representative > %(rep)s) "
        params.update(size=after[0], rep=after[1])
    query += "ORDER BY size DESC, representative LIMIT %(n)s"
    with translated("reading the largest clusters"):
        rows = scope.conn.execute(scope.sql(query), params).fetchall()
    return [ClusterRow(int(c), int(n), r, list(ids), bool(d)) for c, n, r, ids, d in rows]


def _largest_distributed(
    scope: Scope, after: tuple[int, str] | None, limit: int, ids_per_cluster: int
) -> list[ClusterRow] | None:
    """``largest_clusters`` of a distributed collection, where the view's window over every
    document is computed on the coordinator after moving them all there: the clusters' sizes
    first (``listings.cluster_sizes``), then the documents of the largest clusters only, as many
    sizes down as the page needs (a size is read whole: its clusters are ordered by their
    representatives, which come with their documents), by the contents' cluster index."""
    sizes = listings.cluster_sizes(scope)
    if sizes is None:  # more clusters than a page may hold here: the view groups them
        return None
    by_size: dict[int, list[int]] = {}
    for k, n in sizes.items():
        if after is None or n <= after[0]:
            by_size.setdefault(n, []).append(k)
    order = sorted(by_size, reverse=True)
    rows: list[ClusterRow] = []
    at = 0
    while len(rows) < limit and at < len(order):
        wanted: list[int] = []
        while at < len(order) and (not wanted or len(rows) + len(wanted) < limit):
            wanted.extend(by_size[order[at]])
            at += 1
        rows.extend(_listed_rows(scope, wanted, after, ids_per_cluster))
    return rows[:limit]


def _listed_rows(
    scope: Scope, clusters: list[int], after: tuple[int, str] | None, ids_per_cluster: int
) -> list[ClusterRow]:
    """ClusterRows of the given clusters, largest first, then by representative, after ``after``."""
    members: dict[int, list[str]] = {}
    kept: dict[int, str] = {}
    dense: dict[int, bool] = {}
    # Ordered by cluster, then id: each cluster's ids come sorted as the view's "C" collation sorts.
    for cluster, doc_id, representative, is_dense in listings.clusters_listed(scope, clusters):
        members.setdefault(cluster, []).append(doc_id)
        dense[cluster] = is_dense
        if representative:
            kept[cluster] = doc_id
    rows = [
        ClusterRow(k, len(ids), kept[k], ids[:ids_per_cluster], dense[k])
        for k, ids in members.items()
        if k in kept
    ]
    if after is not None:
        rows = [r for r in rows if r.size < after[0] or (r.size == after[0] and r.representative > after[1])]
    # Python orders str by code point, the bytewise order of their UTF-8 ("C" collation).
    return sorted(rows, key=lambda r: (-r.size, r.representative))


def cluster_members(scope: Scope, cluster: int, limit: int) -> list[tuple[str, dict[str, Any] | None]]:
    """Up to ``limit`` documents (id, meta) of one cluster, by id."""
    with translated(f"reading cluster {cluster}"):
        rows = scope.conn.execute(
            scope.sql(
                "SELECT d.external_id, d.meta FROM {documents_p} d "
                "JOIN {contents_p} t ON t.content_id = d.content_id "
                "WHERE t.cluster_id = %s AND t.shingle_count > 0 ORDER BY d.external_id LIMIT %s"
            ),
            (cluster, limit),
        ).fetchall()
    return [(r[0], r[1]) for r in rows]


def dense_size(scope: Scope, cluster: int) -> int | None:
    """The contents of a dense cluster (``dense_clusters``), None for any other."""
    if scope.distributed:  # Citus groups the view's every content on the coordinator
        with translated(f"reading cluster {cluster}"):
            found = scope.conn.execute(
                scope.sql("SELECT count(*) FROM {contents_p} WHERE collection_id = %s AND cluster_id = %s"),
                (scope.collection_id, cluster),
            ).fetchone()
            bound = scope.conn.execute(
                scope.sql(
                    "SELECT coalesce((params ->> 'dense_cluster_size')::bigint, 128) FROM {s}.collections "
                    "WHERE collection_id = %s"
                ),
                (scope.collection_id,),
            ).fetchone()
        n = int(found[0]) if found else 0
        return n if bound is not None and n >= int(bound[0]) else None
    with translated(f"reading cluster {cluster}"):
        row = scope.conn.execute(
            scope.sql("SELECT contents FROM {s}.dense_clusters WHERE collection_id = %s AND cluster = %s"),
            (scope.collection_id, cluster),
        ).fetchone()
    return None if row is None else int(row[0])


def cluster_representative(scope: Scope, cluster: int) -> str | None:
    """The id of the document the collection's keep policy keeps of one cluster, or None."""
    if scope.distributed:  # the view's window would move every document of the schema
        with translated(f"reading the representative of cluster {cluster}"):
            kept = [r for r in listings.cluster_range(scope, cluster, cluster + 1) if r[2]]
        return kept[0][1] if kept else None
    with translated(f"reading the representative of cluster {cluster}"):
        row = scope.conn.execute(
            scope.sql(
                "SELECT id FROM {s}.cluster_list WHERE collection_id = %s AND cluster = %s AND representative"
            ),
            (scope.collection_id, cluster),
        ).fetchone()
    return str(row[0]) if row else None


def openings(scope: Scope, ids: list[str], chars: int) -> dict[str, str]:
    """The first ``chars`` characters of the text of each of ``ids`` that is a stored document
    with a stored text, by id."""
    if not ids:
        return {}
    with translated("reading documents' texts"):
        rows = scope.conn.execute(
            scope.sql(
                "SELECT external_id, left(text, %s) FROM {documents_p} "
                "WHERE external_id = ANY(%s) AND text IS NOT NULL"
            ),
            (chars, sorted(set(ids))),
        ).fetchall()
    return {str(r[0]): str(r[1]) for r in rows}


def cluster_pairs(scope: Scope, cluster: int, limit: int) -> list[tuple[str, str, float, str]]:
    """Up to ``limit`` pairs (id_a, id_b, similarity, method) within one cluster, most similar first."""
    with translated(f"reading the pairs of cluster {cluster}"):
        among = "SELECT content_id FROM {contents_p} WHERE cluster_id = %(k)s"
        params: dict[str, Any] = {"c": scope.collection_id, "k": cluster, "n": limit}
        rows = scope.conn.execute(
            scope.sql(
                f"WITH {pair_list.bound(scope, params, among)} SELECT id_a, id_b, similarity, method FROM dp "
                "ORDER BY similarity DESC, id_a, id_b LIMIT %(n)s"
            ),
            params,
        ).fetchall()
    return [(a, b, float(s), m) for a, b, s, m in rows]


@dataclass(frozen=True)
class DocumentRow:
    """A stored document: id, text (None when texts are not stored), metadata, cluster."""

    id: str
    text: str | None
    meta: dict[str, Any] | None
    cluster: int


def document(scope: Scope, doc_id: str) -> DocumentRow | None:
    """One document of the scope's collection, or None."""
    with translated("reading a document"):
        row = scope.conn.execute(
            scope.sql(
                "SELECT d.external_id, d.text, d.meta, t.cluster_id FROM {documents_p} d "
                "JOIN {contents_p} t ON t.content_id = d.content_id WHERE d.external_id = %s"
            ),
            (doc_id,),
        ).fetchone()
    return None if row is None else DocumentRow(row[0], row[1], row[2], int(row[3]))


def document_pairs(scope: Scope, doc_id: str) -> list[tuple[str, float, str]]:
    """The document's near-duplicates (other id, similarity, method), most similar first."""
    # The materialised steps are index lookups on one server; on a distributed collection Citus
    # runs each step where its rows live (the document and its pairs are on other shards than the
    # other documents) and joins their small results.
    with translated("reading a document's pairs"):
        rows = scope.conn.execute(
            scope.sql(
                "WITH me AS MATERIALIZED (SELECT d.content_id, t.shingle_count FROM {documents_p} d "
                "JOIN {contents_p} t ON t.content_id = d.content_id WHERE d.external_id = %(id)s), "
                "o AS MATERIALIZED (SELECT CASE WHEN p.content_a = me.content_id THEN p.content_b "
                "ELSE p.content_a END AS other, p.similarity, p.method "
                "FROM me JOIN {pairs_p} p ON me.content_id IN (p.content_a, p.content_b)) "
                "SELECT d.external_id, o.similarity, o.method FROM o JOIN {documents_p} d "
                "ON d.content_id = o.other "
                "UNION ALL "
                "SELECT d.external_id, 1.0, 'identical' FROM me JOIN {documents_p} d "
                "ON d.content_id = me.content_id AND d.external_id <> %(id)s "
                "WHERE me.shingle_count > 0 "
                "ORDER BY 2 DESC, 1"
            ),
            {"id": doc_id},
        ).fetchall()
    return [(other, float(s), m) for other, s, m in rows]


def pair(scope: Scope, id_a: str, id_b: str) -> tuple[float, str] | None:
    """The stored similarity and method of two documents, or None when they are no stored pair."""
    with translated("reading a pair"):
        ends = scope.conn.execute(
            scope.sql(
                "SELECT d.external_id, d.content_id, t.shingle_count FROM {documents_p} d "
                "JOIN {contents_p} t ON t.content_id = d.content_id WHERE d.external_id IN (%s, %s)"
            ),
            (id_a, id_b),
        ).fetchall()
        found = {str(r[0]): (int(r[1]), int(r[2])) for r in ends}
        if id_a == id_b or id_a not in found or id_b not in found or found[id_a][1] == 0:
            return None
        (a, _), (b, _) = found[id_a], found[id_b]
        if a == b:
            return 1.0, "identical"
        row = scope.conn.execute(
            scope.sql("SELECT similarity, method FROM {pairs_p} WHERE content_a = %s AND content_b = %s"),
            (min(a, b), max(a, b)),
        ).fetchone()
    return None if row is None else (float(row[0]), str(row[1]))


def delete_collection(here: Scope) -> None:
    """Delete the scope's collection: its labels, its partitions and its catalog row. Inside the
    caller's transaction, which holds the collection's name and writer locks."""
    # Its labels go first: in a distributed schema no foreign key deletes them with the row.
    here.conn.execute(here.sql("DELETE FROM {s}.labels WHERE collection_id = %s"), (here.collection_id,))
    changes.delete(here)
    for table in (*PARTITIONED_TABLES, KEY_TABLE):
        here.conn.execute(here.sql(f"DROP TABLE IF EXISTS {{{table}_p}}"))
    here.conn.execute(here.sql("DELETE FROM {s}.collections WHERE collection_id = %s"), (here.collection_id,))


# -- the review loop: pairs in an order, filtered by label and similarity ---------------------------

# How far a title or snippet of a document may run in a listing (characters).
TITLE_CHARS = 120
# What a pairs listing may be ordered by: its key expression over pair_list (``p``). "queue" is
# the distance from the threshold, nearest first: the pairs a reviewer is least sure of.
PAIR_ORDERS = {"queue": "abs(p.similarity - %(t)s)", "similarity": "p.similarity"}
# Which pairs a listing keeps by their label: every one, unlabelled, labelled, or one verdict.
LABEL_FILTERS = ("all", "unlabelled", "labelled", "duplicate", "not_duplicate")


@dataclass(frozen=True)
class PairRow:
    """A pair of documents in a listing: ids (smaller first), similarity, method, its label (None
    when unlabelled) and the listing's sort key (to start the next page after it)."""

    id_a: str
    id_b: str
    similarity: float
    method: str
    label: str | None
    key: float


def _label_clause(which: str) -> str:
    if which not in LABEL_FILTERS:
        raise ValueError(f"label filter must be one of {LABEL_FILTERS}, got {which!r}")
    return {
        "all": "",
        "unlabelled": "AND l.label IS NULL ",
        "labelled": "AND l.label IS NOT NULL ",
        "duplicate": "AND l.label = 'duplicate' ",
        "not_duplicate": "AND l.label = 'not_duplicate' ",
    }[which]


@dataclass(frozen=True)
class PairQuery:
    """Which pairs of documents a listing shows, in what order: ``order`` ("queue": distance from
    the threshold, nearest first; "similarity"), then ids, ascending unless ``descending``; those
    with similarity in [low, high] and a label as ``labels`` says (one of LABEL_FILTERS); starting
    after the key (sort key, id_a, id_b) ``after``, or at it when ``inclusive``."""

    order: str = "similarity"
    labels: str = "all"
    low: float = 0.0
    high: float = 1.0
    after: tuple[float, str, str] | None = None
    descending: bool = False
    inclusive: bool = False


def pair_rows(scope: Scope, threshold: float, query: PairQuery, limit: int) -> list[PairRow]:
    """Up to ``limit`` pairs of documents as ``query`` asks, the collection's threshold being
    ``threshold``."""
    with translated("reading a page of pairs"):
        read = _pairs_read(scope, threshold)
        return _pair_rows(scope, read, query, limit)


def queue_counts(scope: Scope, threshold: float, key: tuple[float, str, str] | None) -> tuple[int, int]:
    """Of the unlabelled pairs of documents: how many come before ``key`` in the queue's order
    (distance from ``threshold``, then ids; 0 when ``key`` is None), and how many there are; in
    one pass over the pairs."""
    with translated("counting the review queue"):
        return _queue_counts(scope, _pairs_read(scope, threshold), key)


def queue(
    scope: Scope, threshold: float, query: PairQuery, fallback: PairQuery | None = None
) -> tuple[PairRow | None, int, int]:
    """The review queue at one pair: the first pair ``query`` asks for (else ``fallback``'s first,
    when given), how many unlabelled pairs come before it and how many there are (``pair_rows``
    and ``queue_counts``), with the pairs of documents read once for all three."""
    with translated("reading the review queue"):
        read = _pairs_read(scope, threshold)
        rows = _pair_rows(scope, read, query, 1)
        if not rows and fallback is not None:
            rows = _pair_rows(scope, read, fallback, 1)
        current = rows[0] if rows else None
        at = (current.key, current.id_a, current.id_b) if current else None
        before, left = _queue_counts(scope, read, at)
    return current, before, left


@dataclass(frozen=True)
class _PairsRead:
    """What a page's statements read the pairs of documents from: on one server the ``dp``
    expression with its parameters; on a distributed collection the rows themselves (read in steps,
    ``pair_list.pairs_of_documents``) and the collection's labels, which the page then orders,
    filters and counts here. Bound back into a statement, the rows cost more to send and parse
    than the steps that read them."""

    dp: str
    params: dict[str, Any]
    rows: list[tuple[str, str, float, str, int, int]] | None = None
    labels: dict[tuple[str, str], str] | None = None


def _pairs_read(scope: Scope, threshold: float) -> _PairsRead:
    params: dict[str, Any] = {"c": scope.collection_id, "t": threshold}
    if not scope.distributed:
        return _PairsRead(pair_list.cte(scope), params)
    rows = pair_list.pairs_of_documents(scope, params)
    if rows is None:  # more than a page may hold here: the server orders and pages them
        return _PairsRead(pair_list.cte(scope), params)
    labels = scope.conn.execute(
        scope.sql("SELECT id_a, id_b, label FROM {s}.labels WHERE collection_id = %s"), (scope.collection_id,)
    ).fetchall()
    return _PairsRead("", params, rows, {(a, b): lab for a, b, lab in labels})


def _label_kept(which: str, label: str | None) -> bool:
    """Whether a pair with ``label`` (None: unlabelled) is kept by the filter ``which``, as
    ``_label_clause`` keeps it."""
    if which == "all":
        return True
    if which == "unlabelled":
        return label is None
    if which == "labelled":
        return label is not None
    return label == which


def _pair_rows(scope: Scope, read: _PairsRead, query: PairQuery, limit: int) -> list[PairRow]:
    if read.rows is not None and read.labels is not None:
        return _pair_rows_here(read.rows, read.labels, float(read.params["t"]), query, limit)
    key = PAIR_ORDERS[query.order]
    direction, compare = ("DESC", "<") if query.descending else ("ASC", ">")
    compare += "=" if query.inclusive else ""
    params: dict[str, Any] = {**read.params, "lo": query.low, "hi": query.high, "n": limit}
    sql = (
        f"WITH {read.dp} "
        f"SELECT p.id_a, p.id_b, p.similarity, p.method, l.label, {key} AS k FROM dp p "
        "LEFT JOIN {s}.labels l ON l.collection_id = %(c)s AND l.id_a = p.id_a AND l.id_b = p.id_b "
        "WHERE p.similarity BETWEEN %(lo)s AND %(hi)s " + _label_clause(query.labels)
    )
    if query.after is not None:
        sql += f"AND ({key}, p.id_a, p.id_b) {compare} (%(k)s, %(a)s, %(b)s) "
        params.update(k=query.after[0], a=query.after[1], b=query.after[2])
    sql += f"ORDER BY k {direction}, p.id_a {direction}, p.id_b {direction} LIMIT %(n)s"
    rows = scope.conn.execute(scope.sql(sql), params).fetchall()
    return [PairRow(a, b, float(s), m, lab, float(k)) for a, b, s, m, lab, k in rows]


def _pair_rows_here(
    rows: list[tuple[str, str, float, str, int, int]],
    labels: dict[tuple[str, str], str],
    threshold: float,
    query: PairQuery,
    limit: int,
) -> list[PairRow]:
    """``_pair_rows``' statement, run here on the rows read: the same keys (float8 arithmetic is
    Python's), the same filters, and ids ordered bytewise (Python orders str by code point, the
    order of their UTF-8)."""
    if query.order not in PAIR_ORDERS:
        raise KeyError(query.order)
    _label_clause(query.labels)  # the same check of the filter's name
    queue = query.order == "queue"
    found: list[PairRow] = []
    for a, b, s, m, _, _ in rows:
        label = labels.get((a, b))
        if not (query.low <= s <= query.high) or not _label_kept(query.labels, label):
            continue
        k = abs(s - threshold) if queue else s
        if query.after is not None:
            at, mark = (k, a, b), query.after
            if not (at < mark if query.descending else at > mark) and not (query.inclusive and at == mark):
                continue
        found.append(PairRow(a, b, s, m, label, k))
    found.sort(key=lambda r: (r.key, r.id_a, r.id_b), reverse=query.descending)
    return found[:limit]


def _queue_counts(scope: Scope, read: _PairsRead, key: tuple[float, str, str] | None) -> tuple[int, int]:
    if read.rows is not None and read.labels is not None:
        t, labels = float(read.params["t"]), read.labels
        keys = [(abs(s - t), a, b) for a, b, s, _, _, _ in read.rows if (a, b) not in labels]
        return (0 if key is None else sum(1 for k in keys if k < key)), len(keys)
    before = "false"
    params = dict(read.params)
    if key is not None:
        before = f"({PAIR_ORDERS['queue']}, p.id_a, p.id_b) < (%(k)s, %(a)s, %(b)s)"
        params.update(k=key[0], a=key[1], b=key[2])
    query = (
        f"WITH {read.dp} SELECT count(*) FILTER (WHERE {before}), count(*) "
        "FROM dp p LEFT JOIN {s}.labels l ON l.collection_id = %(c)s AND l.id_a = p.id_a "
        "AND l.id_b = p.id_b WHERE true " + _label_clause("unlabelled")
    )
    row = scope.conn.execute(scope.sql(query), params).fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def review_counts(scope: Scope) -> dict[str, int]:
    """Documents, clusters, pairs of documents (identical copies included, as pair_list lists
    them), how many of those pairs are labelled, how many are left to review, and whether the
    counts are estimated (1, as ``statistics.collection_counts`` estimates them: the labels are
    then counted as they are, and ``left`` is the estimated pairs less the labels), else 0."""
    if scope.distributed:
        span = statistics.id_span(scope)
        if statistics.estimated(scope, span):
            return _estimated_review(scope, {scope.collection_id: span})[scope.collection_id]
    params: dict[str, Any] = {"c": scope.collection_id}
    with translated("counting a collection for review"):
        query = (
            f"WITH {pair_list.bound(scope, params)} SELECT (SELECT count(*) FROM {{documents_p}}), "
            f"({statistics.CLUSTER_COUNT}), count(p.id_a), count(l.label) FROM dp p LEFT JOIN {{s}}.labels l "
            "ON l.collection_id = %(c)s AND l.id_a = p.id_a AND l.id_b = p.id_b"
        )
        row = scope.conn.execute(scope.sql(query), params).fetchone()
    documents, clusters, pairs, labelled = (int(v) for v in row) if row else (0, 0, 0, 0)
    return {
        "documents": documents,
        "clusters": clusters,
        "document_pairs": pairs,
        "labelled": labelled,
        "left": pairs - labelled,
        "estimated": 0,
    }


def _estimated_review(scope: Scope, id_spans: dict[int, int]) -> dict[int, dict[str, int]]:
    """``review_counts`` of the distributed collections of ``id_spans`` ({collection id: its
    ``next_content_id``}), estimated."""
    with translated("counting collections for review"):
        labels = dict(
            scope.conn.execute(
                scope.sql(
                    "SELECT collection_id, count(*) FROM {s}.labels WHERE collection_id = ANY(%s::int4[]) "
                    "GROUP BY collection_id"
                ),
                (list(id_spans),),
            ).fetchall()
        )
        found = {}
        for c, span in id_spans.items():
            sampled = statistics.sample_counts(scope.with_collection(c, True), span)
            labelled = int(labels.get(c, 0))
            found[c] = {
                "documents": sampled["documents"],
                "clusters": sampled["clusters"],
                "document_pairs": sampled["document_pairs"],
                "labelled": labelled,
                "left": max(sampled["document_pairs"] - labelled, 0),
                "estimated": 1,
            }
    return found


def review_counts_of(scope: Scope, id_spans: dict[int, int], distributed: bool) -> dict[int, dict[str, int]]:
    """``review_counts`` of several collections of the scope's schema, given as {collection id:
    its ``next_content_id``} (``distributed`` if its collections are), each exact count a
    statement reading the schema's tables once for all of them."""
    guessed = {c: span for c, span in id_spans.items() if distributed and span > statistics.ESTIMATE_ABOVE}
    found = _estimated_review(scope, guessed) if guessed else {}
    collection_ids = [c for c in id_spans if c not in guessed]
    if not collection_ids:
        return found
    params = {"cs": collection_ids}
    found.update({c: dict.fromkeys(_REVIEW_COUNTS, 0) for c in collection_ids})
    statements = (
        statistics.LISTED_COUNTS[0],
        statistics.LISTED_COUNTS[2],
        (
            "document_pairs",
            f"WITH {pair_list.cte_of_collections(distributed)} "
            "SELECT p.collection_id, count(*), count(l.label) FROM dp p LEFT JOIN {s}.labels l "
            "ON l.collection_id = p.collection_id AND l.id_a = p.id_a AND l.id_b = p.id_b "
            "GROUP BY p.collection_id",
        ),
    )
    with translated("counting collections for review"):
        for what, query in statements:
            for row in scope.conn.execute(scope.sql(query), params).fetchall():
                found[int(row[0])][what] = int(row[1])
                if what == "document_pairs":
                    found[int(row[0])]["labelled"] = int(row[2])
    for c in collection_ids:
        found[c]["left"] = found[c]["document_pairs"] - found[c]["labelled"]
    return found


_REVIEW_COUNTS = ("documents", "clusters", "document_pairs", "labelled", "left", "estimated")


def titles(scope: Scope, ids: list[str]) -> dict[str, str]:
    """A short line for each of ``ids`` that is a document: its metadata's ``title`` (or
    ``headline``) when it has one, else the start of its text; "" when neither is stored."""
    if not ids:
        return {}
    with translated("reading documents' titles"):
        rows = scope.conn.execute(
            scope.sql(
                "SELECT external_id, coalesce(meta->>'title', meta->>'headline', left(text, %s), '') "
                "FROM {documents_p} WHERE external_id = ANY(%s)"
            ),
            (TITLE_CHARS * 2, sorted(set(ids))),
        ).fetchall()
    out = {}
    for doc_id, line in rows:
        line = " ".join(str(line).split())
        out[doc_id] = line if len(line) <= TITLE_CHARS else line[: TITLE_CHARS - 1].rstrip() + "…"
    return out
