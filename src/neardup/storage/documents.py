"""The documents table: the caller's records, each pointing at the content (normalised text) it has."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from psycopg.types.json import Jsonb

from neardup.storage import citus
from neardup.storage.binary import Int8s
from neardup.storage.scope import Scope, index_probes


@dataclass(frozen=True)
class Match:
    """What is stored already for one incoming record (by its id, or by its content hash)."""

    position: int
    """Index of the record in the batch."""
    doc_id: int | None
    """The stored document with the same external id, if any."""
    content_id: int | None
    """That document's content."""
    existing_content: int | None
    """A stored content with the record's content hash, if any."""
    text: str | None
    """The stored document's text and metadata, when its content equals the record's (to tell
    'unchanged' from 'metadata or raw text changed')."""
    meta: Any


_MATCH = """
SELECT m.ord - 1, d.doc_id, d.content_id, e.content_id,
       CASE WHEN e.content_id = d.content_id THEN d.text END,
       CASE WHEN e.content_id = d.content_id THEN d.meta END
FROM unnest(%(ids)s::text[], %(hashes)s::bytea[]) WITH ORDINALITY AS m(external_id, content_hash, ord)
LEFT JOIN {documents_p} d ON d.collection_id = %(c)s AND d.external_id = m.external_id COLLATE "C"
LEFT JOIN {contents_p} e ON e.collection_id = %(c)s AND e.content_hash = m.content_hash
WHERE d.doc_id IS NOT NULL OR e.content_id IS NOT NULL"""

# On a distributed collection neither join is on the distribution column (content id): Citus would
# move the tables to the coordinator to join them to the batch, a result that grows with the
# collection (and is refused past citus.max_intermediate_result_size). Each lookup instead runs on
# every shard with the batch's ids (or hashes) as a filter, its local index probed there, and only
# the rows found come back to be joined to the batch.
_MATCH_DISTRIBUTED = """
WITH d AS MATERIALIZED (
    SELECT doc_id, content_id, external_id, text, meta FROM {documents_p}
    WHERE collection_id = %(c)s AND external_id = ANY(%(ids)s::text[])
), e AS MATERIALIZED (
    SELECT content_id, content_hash FROM {contents_p}
    WHERE collection_id = %(c)s AND content_hash = ANY(%(hashes)s::bytea[])
)
SELECT m.ord - 1, d.doc_id, d.content_id, e.content_id,
       CASE WHEN e.content_id = d.content_id THEN d.text END,
       CASE WHEN e.content_id = d.content_id THEN d.meta END
FROM unnest(%(ids)s::text[], %(hashes)s::bytea[]) WITH ORDINALITY AS m(external_id, content_hash, ord)
LEFT JOIN d ON d.external_id = m.external_id COLLATE "C"
LEFT JOIN e ON e.content_hash = m.content_hash
WHERE d.doc_id IS NOT NULL OR e.content_id IS NOT NULL"""


def match(scope: Scope, external_ids: Sequence[str], content_hashes: Sequence[bytes]) -> list[Match]:
    """Stored documents with the batch's ids and stored contents with its hashes, one statement."""
    with index_probes(scope.conn):
        rows = scope.conn.execute(
            scope.sql(_MATCH_DISTRIBUTED if scope.distributed else _MATCH),
            {"ids": list(external_ids), "hashes": list(content_hashes), "c": scope.collection_id},
            # Never a generic plan: the batch's size matters to the plan.
            prepare=False,
        ).fetchall()
    return [Match(*r) for r in rows]


def insert(
    scope: Scope,
    doc_ids: npt.NDArray[np.int64],
    external_ids: Sequence[str],
    content_ids: npt.NDArray[np.int64],
    texts: Sequence[str | None],
    metas: Sequence[Any],
) -> None:
    """Insert documents with binary COPY (ids, contents, texts and metadata given per row), in
    external-id order: the unique index on it then takes them in sequence, leaf after leaf, not at
    random; each row keeps the ids given with it."""
    c = scope.collection_id
    order = sorted(range(len(external_ids)), key=external_ids.__getitem__)
    doc_list, content_list = doc_ids.tolist(), content_ids.tolist()
    with (
        scope.conn.cursor() as cur,
        cur.copy(
            scope.sql(
                "COPY {documents_p} (collection_id, doc_id, external_id, content_id, text, meta) "
                "FROM STDIN (FORMAT BINARY)"
            )
        ) as copy,
    ):
        copy.set_types(["int4", "int8", "text", "int8", "text", "jsonb"])
        for i in order:
            meta = metas[i]
            copy.write_row(
                (
                    c,
                    doc_list[i],
                    external_ids[i],
                    content_list[i],
                    texts[i],
                    None if meta is None else Jsonb(meta),
                )
            )
    if scope.distributed:
        citus.insert_keys(scope, [external_ids[i] for i in order], content_ids[order])


def delete(scope: Scope, doc_ids: Sequence[int]) -> list[int]:
    """Delete documents by internal id; returns the contents they pointed at."""
    rows = scope.conn.execute(
        scope.sql(
            "DELETE FROM {documents_p} "
            "WHERE collection_id = %s AND doc_id IN (SELECT unnest(%s::int8[])) "
            "RETURNING content_id, external_id"
        ),
        (scope.collection_id, Int8s(doc_ids)),
    ).fetchall()
    if scope.distributed:
        citus.delete_keys(scope, [r[1] for r in rows])
    return [r[0] for r in rows]


def stored_ids(scope: Scope, external_ids: Sequence[str]) -> set[str]:
    """Those of the caller's ids that name stored documents."""
    rows = scope.conn.execute(
        scope.sql(
            "SELECT external_id FROM {documents_p} WHERE collection_id = %s "
            'AND external_id IN (SELECT u COLLATE "C" FROM unnest(%s::text[]) AS u)'
        ),
        (scope.collection_id, list(external_ids)),
    ).fetchall()
    return {r[0] for r in rows}


def delete_by_external_id(scope: Scope, external_ids: Sequence[str]) -> tuple[list[str], list[int]]:
    """Delete documents by the caller's ids; returns the ids found and the contents they pointed at."""
    rows = scope.conn.execute(
        scope.sql(
            "DELETE FROM {documents_p} "
            "WHERE collection_id = %s "
            'AND external_id IN (SELECT u COLLATE "C" FROM unnest(%s::text[]) AS u) '
            "RETURNING external_id, content_id"
        ),
        (scope.collection_id, list(external_ids)),
    ).fetchall()
    if scope.distributed:
        citus.delete_keys(scope, [r[0] for r in rows])
    return [r[0] for r in rows], [r[1] for r in rows]


def texts(scope: Scope, content_ids: Sequence[int]) -> dict[int, str]:
    """One stored text per content (its earliest document's), for re-shingling."""
    rows = scope.conn.execute(
        scope.sql(
            "SELECT DISTINCT ON (content_id) content_id, text FROM {documents_p} "
            "WHERE collection_id = %s AND content_id IN (SELECT unnest(%s::int8[])) "
            "ORDER BY content_id, doc_id"
        ),
        (scope.collection_id, Int8s(content_ids)),
    ).fetchall()
    return {r[0]: r[1] for r in rows}


def external_ids(scope: Scope, content_ids: Sequence[int]) -> dict[int, list[str]]:
    """The ids of the documents of each content, sorted bytewise."""
    rows = scope.conn.execute(
        scope.sql(
            'SELECT content_id, array_agg(external_id ORDER BY external_id COLLATE "C") FROM {documents_p} '
            "WHERE collection_id = %s AND content_id IN (SELECT unnest(%s::int8[])) GROUP BY content_id"
        ),
        (scope.collection_id, Int8s(content_ids)),
    ).fetchall()
    return {r[0]: list(r[1]) for r in rows}


def content_texts(scope: Scope, chunk_rows: int) -> Iterator[tuple[npt.NDArray[np.int64], list[str]]]:
    """(content ids, texts) of every content with a stored text and at least one shingle, one text
    per content (its earliest document's), by content id, ``chunk_rows`` at a time; one statement
    read through a server-side cursor."""
    with (
        scope.conn.transaction(),
        scope.conn.cursor(name="neardup_content_texts") as cur,
    ):
        cur.execute(
            scope.sql(
                "SELECT DISTINCT ON (d.content_id) d.content_id, d.text FROM {documents_p} d "
                "JOIN {contents_p} t ON t.collection_id = d.collection_id AND t.content_id = d.content_id "
                "WHERE d.collection_id = %s AND t.shingle_count > 0 AND d.text IS NOT NULL "
                "ORDER BY d.content_id, d.doc_id"
            ),
            (scope.collection_id,),
        )
        while rows := cur.fetchmany(chunk_rows):
            yield np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows)), [r[1] for r in rows]


def stash(scope: Scope) -> int:
    """Copy every document (id, text, meta, cluster id) into a temporary table, for a rebuild;
    returns the count."""
    scope.conn.execute("DROP TABLE IF EXISTS neardup_stash")
    scope.conn.execute(
        scope.sql(
            "CREATE TEMP TABLE neardup_stash ON COMMIT DROP AS "
            "SELECT row_number() OVER (ORDER BY d.doc_id) AS n, d.external_id, d.text, d.meta, "
            "t.cluster_id FROM {documents_p} d JOIN {contents_p} t "
            "ON t.collection_id = d.collection_id AND t.content_id = d.content_id "
            "WHERE d.collection_id = %s"
        ),
        (scope.collection_id,),
    )
    row = scope.conn.execute("SELECT count(*) FROM neardup_stash").fetchone()
    return int(row[0]) if row else 0


def stashed(scope: Scope, batch_size: int) -> Iterator[list[tuple[str, str, Any]]]:
    """The stashed documents as (external_id, text, meta), in their old order, ``batch_size`` at a time."""
    last = 0
    while True:
        rows = scope.conn.execute(
            "SELECT n, external_id, text, meta FROM neardup_stash WHERE n > %s ORDER BY n LIMIT %s",
            (last, batch_size),
        ).fetchall()
        if not rows:
            return
        last = rows[-1][0]
        yield [(r[1], r[2], r[3]) for r in rows]


def stashed_clusters(
    scope: Scope,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """For every stashed document stored again: (its content id now, that content's cluster id
    now, its cluster id when stashed), by content id."""
    with scope.conn.cursor(binary=True) as cur:
        rows = cur.execute(
            scope.sql(
                "SELECT d.content_id, t.cluster_id, s.cluster_id FROM neardup_stash s "
                "JOIN {documents_p} d ON d.external_id = s.external_id "
                "JOIN {contents_p} t ON t.content_id = d.content_id ORDER BY d.content_id"
            )
        ).fetchall()
    columns = [np.fromiter((r[i] for r in rows), dtype=np.int64, count=len(rows)) for i in range(3)]
    return columns[0], columns[1], columns[2]
