"""A collection's pairs of documents, as the ``pair_list`` view lists them, for the statements that
read them: a common table expression named ``dp`` (id_a, id_b, similarity, method, content_a,
content_b) to put after ``WITH``, the collection's id bound as ``%(c)s``.

On one server it is the view, inlined into the statement that reads it. On a distributed
collection the view's join of a pair to the documents of its second content would cross shards,
which Citus does by a repartition join of both tables (every shard of each sent through
intermediate files, seconds even for a dozen documents). ``bound`` reads them first instead, in two
statements that Citus runs shard by shard (each pair with its first content's documents, where
the pair lives; then the documents of the second contents, where they live), and binds the rows
into the statement as arrays, which then runs on the coordinator alone, where it orders them,
pages them and joins them to the labels (a table of the coordinator's). ``cte`` does the same
inside one statement, in rounds of tasks that each send an intermediate result to every node (the
changes feed still reads it so). What moves between nodes is a row for each stored pair and for
each document of a pair's text, never the collection.
"""

from __future__ import annotations

from typing import Any

from neardup.storage.scope import Scope

# The pairs of distinct texts, each with a document of either text, and the pairs of documents of
# one text (two or more documents, at least one shingle). Both halves keep the first content (a
# distribution column of the pairs and documents) in the fifth column, so that Citus runs their
# union shard by shard.
_DISTRIBUTED = """dp_second AS MATERIALIZED (
    SELECT d.content_id, d.external_id FROM {{documents_p}} d
    WHERE d.content_id IN (SELECT p.content_b FROM {{pairs_p}} p WHERE true{among_p})
), dp AS MATERIALIZED (
    SELECT least(da.external_id, db.external_id) AS id_a, greatest(da.external_id, db.external_id) AS id_b,
           p.similarity, p.method, p.content_a, p.content_b
    FROM {{pairs_p}} p
    JOIN {{documents_p}} da ON da.content_id = p.content_a
    JOIN dp_second db ON db.content_id = p.content_b
    WHERE true{among_p}
    UNION ALL
    SELECT da.external_id, db.external_id, 1.0::double precision, 'identical', da.content_id, db.content_id
    FROM (SELECT content_id FROM {{documents_p}} GROUP BY content_id HAVING count(*) > 1) m
    JOIN {{documents_p}} da ON da.content_id = m.content_id
    JOIN {{documents_p}} db ON db.content_id = m.content_id AND db.external_id > da.external_id
    JOIN {{contents_p}} t ON t.content_id = m.content_id AND t.shingle_count > 0
    WHERE true{among_m}
)"""

_ONE_SERVER = """dp AS (
    SELECT id_a, id_b, similarity, method, content_a, content_b FROM {{s}}.pair_list
    WHERE collection_id = %(c)s{among}
)"""


def cte(scope: Scope, among: str | None = None) -> str:
    """The ``dp`` expression(s) to follow ``WITH``, a template for ``scope.sql``. ``among``: a
    subquery of content ids (a template too); only the pairs whose first content is one of them."""
    if scope.distributed:
        return _DISTRIBUTED.format(
            among_p="" if among is None else f" AND p.content_a IN ({among})",
            among_m="" if among is None else f" AND m.content_id IN ({among})",
        )
    return _ONE_SERVER.format(among="" if among is None else f" AND content_a IN ({among})")


# The most rows of pairs of documents a reader holds in this process, read in steps on a distributed
# collection: past it, the server joins them (``cte``), which costs more but holds them itself, so
# that what a page or a count holds here never follows the size of the collection.
HELD_MOST = 100_000
# Rows fetched at a time while counting them against HELD_MOST.
_FETCHED = 10_000

# The pairs of documents of a distributed collection, read in steps and bound as arrays (``bound``):
# the ids are compared as the documents' "C" collation compares them, bytewise.
_BOUND = """dp AS MATERIALIZED (
    SELECT a COLLATE "C" AS id_a, b COLLATE "C" AS id_b, s AS similarity, m AS method,
           ca AS content_a, cb AS content_b
    FROM unnest(%(dp_a)s::text[], %(dp_b)s::text[], %(dp_s)s::float8[], %(dp_m)s::text[],
                %(dp_ca)s::int8[], %(dp_cb)s::int8[]) AS x(a, b, s, m, ca, cb)
)"""

# The steps. First, in one task a shard with no rows moving between nodes: each stored pair with
# the ids of its first content's documents (co-located with the pair), and the ids of the contents
# of two or more documents and at least one shingle (grouped by the distribution column); a row of
# the second kind has no second content. Then the documents of the pairs' second contents: their
# content ids go to the workers as one intermediate result, joined there on each shard (a literal
# array of them is sent whole to every shard and probed there id by id, several times slower).
_STEP_FIRST = """
SELECT p.content_a, p.content_b, p.similarity, p.method, d.external_id
FROM {pairs_p} p JOIN {documents_p} d ON d.collection_id = p.collection_id AND d.content_id = p.content_a
WHERE p.collection_id = %(c)s{among_p}
UNION ALL
SELECT d.content_id, NULL, NULL, NULL, d.external_id
FROM {documents_p} d JOIN {contents_p} t ON t.collection_id = d.collection_id AND t.content_id = d.content_id
WHERE d.collection_id = %(c)s AND t.shingle_count > 0 AND d.content_id IN (
    SELECT content_id FROM {documents_p} WHERE collection_id = %(c)s{among_m}
    GROUP BY content_id HAVING count(*) > 1)"""
_STEP_SECOND = """
WITH i AS MATERIALIZED (SELECT unnest(%(dp_ids)s::int8[]) AS content_id)
SELECT d.content_id, d.external_id FROM {documents_p} d JOIN i ON d.content_id = i.content_id
WHERE d.collection_id = %(c)s"""


def bound(scope: Scope, params: dict[str, Any], among: str | None = None) -> str:
    """``cte`` for a statement run at once on ``scope``'s connection with ``params`` (which bind
    ``%(c)s`` and what ``among`` needs). On a distributed collection the pairs of documents are
    read first, in two statements each run shard by shard (``pairs_of_documents``), put together
    here and bound into ``params`` as arrays: the statement that reads ``dp`` then runs on the
    coordinator alone, beside the labels. ``cte`` instead joins the second contents' documents to
    the pairs on the shards in four rounds of tasks, each sending an intermediate result to every
    node, which cost several times more on a cluster of many shards."""
    if not scope.distributed:
        return cte(scope, among)
    rows = pairs_of_documents(scope, params, among)
    if rows is None:  # more than this process holds: the server joins them, in rounds
        return cte(scope, among)
    names = ("dp_a", "dp_b", "dp_s", "dp_m", "dp_ca", "dp_cb")
    columns: list[list[Any]] = [[] for _ in names]
    for row in rows:
        for column, value in zip(columns, row, strict=True):
            column.append(value)
    params.update(zip(names, columns, strict=True))
    return _BOUND


def pairs_of_documents(
    scope: Scope, params: dict[str, Any], among: str | None = None, most: int = HELD_MOST
) -> list[tuple[str, str, float, str, int, int]] | None:
    """The rows of ``dp`` (id_a, id_b, similarity, method, content_a, content_b) of a distributed
    collection, in no order, read in two steps (``_STEP_FIRST``, ``_STEP_SECOND``); None once
    either step, or the rows, would pass ``most``: then the caller reads ``cte`` instead, whose
    rows the server holds, so that what this process holds never follows the collection."""
    conn, step = scope.conn, dict(params)
    among_p = among_m = ""
    if among is not None:
        step["dp_among"] = [int(r[0]) for r in conn.execute(scope.sql(among), step).fetchall()]
        among_p = " AND p.content_a = ANY(%(dp_among)s::int8[])"
        among_m = " AND content_id = ANY(%(dp_among)s::int8[])"
    first = _STEP_FIRST.replace("{among_p}", among_p).replace("{among_m}", among_m)
    pairs: dict[tuple[int, int], tuple[float, str, list[str]]] = {}
    copies: dict[int, list[str]] = {}
    cursor = conn.execute(scope.sql(first), step)
    read = 0
    while batch := cursor.fetchmany(_FETCHED):
        read += len(batch)
        if read > most:
            cursor.close()
            return None
        for a, b, similarity, method, external in batch:
            _held(pairs, copies, a, b, similarity, method, external)
    seconds: dict[int, list[str]] = {}
    step["dp_ids"] = sorted({b for _, b in pairs})
    if step["dp_ids"]:
        cursor = conn.execute(scope.sql(_STEP_SECOND), step)
        while batch := cursor.fetchmany(_FETCHED):
            read += len(batch)
            if read > most:
                cursor.close()
                return None
            for content, external in batch:
                seconds.setdefault(int(content), []).append(external)
    if (
        sum(len(firsts) * len(seconds.get(b, ())) for (_, b), (_, _, firsts) in pairs.items())
        + sum(len(ids) * (len(ids) - 1) // 2 for ids in copies.values())
        > most
    ):
        return None
    return _rows(pairs, copies, seconds)


def _held(
    pairs: dict[tuple[int, int], tuple[float, str, list[str]]],
    copies: dict[int, list[str]],
    a: Any,
    b: Any,
    similarity: Any,
    method: Any,
    external: str,
) -> None:
    """One row of the first step, kept: a document of a pair's first content, or of a text of
    several documents (no second content)."""
    if b is None:
        copies.setdefault(int(a), []).append(external)
    else:
        pairs.setdefault((int(a), int(b)), (float(similarity), method, []))[2].append(external)


def _rows(
    pairs: dict[tuple[int, int], tuple[float, str, list[str]]],
    copies: dict[int, list[str]],
    seconds: dict[int, list[str]],
) -> list[tuple[str, str, float, str, int, int]]:
    """The pairs of documents of the pairs of texts and of the texts of several documents."""
    out: list[tuple[str, str, float, str, int, int]] = []
    # Python orders str by code point, which is the bytewise order of their UTF-8 ("C" collation).
    for (a, b), (similarity, method, firsts) in pairs.items():
        for x in firsts:
            for y in seconds.get(b, ()):
                low, high = (x, y) if x < y else (y, x)
                out.append((low, high, similarity, method, a, b))
    for content, ids in copies.items():
        same = sorted(ids)
        for i, x in enumerate(same):
            out.extend((x, y, 1.0, "identical", content, content) for y in same[i + 1 :])
    return out


# The same over the schema's parent tables, for the collections in %(cs)s, with their collection_id.
_DISTRIBUTED_MANY = """dp_second AS MATERIALIZED (
    SELECT d.collection_id, d.content_id, d.external_id FROM {s}.documents d
    WHERE d.collection_id = ANY(%(cs)s::int4[]) AND (d.collection_id, d.content_id) IN
        (SELECT p.collection_id, p.content_b FROM {s}.pairs p WHERE p.collection_id = ANY(%(cs)s::int4[]))
), dp AS MATERIALIZED (
    SELECT p.collection_id, least(da.external_id, db.external_id) AS id_a,
           greatest(da.external_id, db.external_id) AS id_b, p.similarity, p.method, p.content_a, p.content_b
    FROM {s}.pairs p
    JOIN {s}.documents da ON da.collection_id = p.collection_id AND da.content_id = p.content_a
    JOIN dp_second db ON db.collection_id = p.collection_id AND db.content_id = p.content_b
    WHERE p.collection_id = ANY(%(cs)s::int4[])
    UNION ALL
    SELECT da.collection_id, da.external_id, db.external_id, 1.0::double precision, 'identical',
           da.content_id, db.content_id
    FROM (SELECT collection_id, content_id FROM {s}.documents WHERE collection_id = ANY(%(cs)s::int4[])
          GROUP BY collection_id, content_id HAVING count(*) > 1) m
    JOIN {s}.documents da ON da.collection_id = m.collection_id AND da.content_id = m.content_id
    JOIN {s}.documents db ON db.collection_id = m.collection_id AND db.content_id = m.content_id
        AND db.external_id > da.external_id
    JOIN {s}.contents t ON t.collection_id = m.collection_id AND t.content_id = m.content_id
        AND t.shingle_count > 0
)"""

_ONE_SERVER_MANY = """dp AS (
    SELECT collection_id, id_a, id_b, similarity, method, content_a, content_b FROM {s}.pair_list
    WHERE collection_id = ANY(%(cs)s::int4[])
)"""


def cte_of_collections(distributed: bool) -> str:
    """``cte`` for several collections at once (their ids bound as ``%(cs)s``), with each pair's
    ``collection_id`` first: the schema's tables read once for all of them, not once each."""
    return _DISTRIBUTED_MANY if distributed else _ONE_SERVER_MANY
