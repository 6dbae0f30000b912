"""A collection's pairs of documents, as the ``pair_list`` view lists them, for the statements that
read them: a common table expression named ``dp`` (id_a, id_b, similarity, method, content_a,
content_b) to put after ``WITH``, the collection's id bound as ``%(c)s``.

On one server it is the view, inlined into the statement that reads it. On a distributed
collection the view's join of a pair to the documents of its second content would cross shards,
which Citus does by a repartition join of both tables (every shard of each sent through
intermediate files, seconds even for a dozen documents); instead the documents of the pairs'
second contents are read first (their content ids from the pairs, then those documents, each on
their own shards), and the pairs are joined to them and to the documents of their first contents
where the pairs live. What moves between nodes is a row for each stored pair and for each
document of a pair's second text, never the collection. The result is materialised on the
coordinator, where the reading statement orders it, pages it and joins it to the labels (a table
of the coordinator's).
"""

from __future__ import annotations

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
