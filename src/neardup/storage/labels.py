"""Labels of pairs by people ("duplicate" or "not_duplicate", with a note), and what they measure.

A label names two document ids, smaller first; re-labelling a pair replaces its label. The
``pair_labels`` view shows each label beside the pair's current similarity.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from neardup.errors import InputError
from neardup.storage.connect import translated
from neardup.storage.scope import Scope

LABELS = ("duplicate", "not_duplicate")


@dataclass(frozen=True)
class LabelRow:
    """A label as the pair_labels view shows it."""

    collection: str
    id_a: str
    id_b: str
    label: str
    note: str
    labelled_by: str
    labelled_at: datetime
    similarity: float | None
    method: str | None

    def to_dict(self) -> dict[str, Any]:
        """The label as JSON-ready values."""
        return {
            "collection": self.collection,
            "id_a": self.id_a,
            "id_b": self.id_b,
            "label": self.label,
            "note": self.note,
            "labelled_by": self.labelled_by,
            "labelled_at": self.labelled_at.isoformat(),
            "similarity": self.similarity,
            "method": self.method,
        }


_VIEW_COLUMNS = "collection, id_a, id_b, label, note, labelled_by, labelled_at, similarity, method"


def put(
    scope: Scope, id_a: str, id_b: str, label: str, note: str, token_id: int | None, labelled_by: str
) -> None:
    """Label the pair (id_a, id_b) of the scope's collection, replacing an earlier label; both
    must be documents of the collection (InputError naming the one that is not)."""
    if label not in LABELS:
        raise InputError(f"label must be one of {', '.join(LABELS)}, got {label!r:.40}")
    if id_a == id_b:
        raise InputError("a pair needs two different ids")
    low, high = sorted((id_a, id_b))
    with translated("storing a label"):
        found = scope.conn.execute(
            scope.sql("SELECT external_id FROM {documents_p} WHERE external_id = ANY(%s)"), ([low, high],)
        ).fetchall()
    stored = {row[0] for row in found}
    for doc_id in (id_a, id_b):
        if doc_id not in stored:
            raise InputError(
                f"no document with id {doc_id!r:.80} in this collection: a label is of two stored documents"
            )
    with translated("storing a label"):
        scope.conn.execute(
            scope.sql(
                "INSERT INTO {s}.labels (collection_id, id_a, id_b, label, note, token_id, labelled_by) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (collection_id, id_a, id_b) DO UPDATE "
                "SET label = excluded.label, note = excluded.note, token_id = excluded.token_id, "
                "labelled_by = excluded.labelled_by, labelled_at = now()"
            ),
            (scope.collection_id, low, high, label, note, token_id, labelled_by),
        )


def get(scope: Scope, id_a: str, id_b: str) -> LabelRow | None:
    """The label of one pair of the scope's collection, or None."""
    low, high = sorted((id_a, id_b))
    with translated("reading a label"):
        if not scope.distributed:
            row = scope.conn.execute(
                scope.sql(
                    f"SELECT {_VIEW_COLUMNS} FROM {{s}}.pair_labels "
                    "WHERE collection_id = %s AND id_a = %s AND id_b = %s"
                ),
                (scope.collection_id, low, high),
            ).fetchone()
            return None if row is None else LabelRow(*row)
        # On a distributed collection the labels alone first (a table of the coordinator's): most
        # pairs shown have none, and the view's joins to the documents and pairs are statements on
        # every shard, which the similarity of a labelled pair takes two lookups for instead.
        row = scope.conn.execute(
            scope.sql(
                "SELECT c.name, l.id_a, l.id_b, l.label, l.note, l.labelled_by, l.labelled_at "
                "FROM {s}.labels l JOIN {s}.collections c ON c.collection_id = l.collection_id "
                "WHERE l.collection_id = %s AND l.id_a = %s AND l.id_b = %s"
            ),
            (scope.collection_id, low, high),
        ).fetchone()
        if row is None:
            return None
        stored = _similarity(scope, low, high)
    similarity, method = stored if stored is not None else (None, None)
    name, a, b, label, note, by, at = row
    return LabelRow(name, a, b, label, note, by, at, similarity, method)


def _similarity(scope: Scope, low: str, high: str) -> tuple[float, str] | None:
    """The similarity and method of two documents as ``pair_labels`` shows them (1.0 and
    "identical" for two documents of one text with a shingle), or None: in two lookups, each on
    the shards of its rows (the documents' contents, then the pair of contents)."""
    ends = {
        str(r[0]): (int(r[1]), int(r[2]))
        for r in scope.conn.execute(
            scope.sql(
                "SELECT d.external_id, d.content_id, t.shingle_count FROM {documents_p} d "
                "JOIN {contents_p} t ON t.collection_id = d.collection_id AND t.content_id = d.content_id "
                "WHERE d.collection_id = %s AND d.external_id IN (%s, %s)"
            ),
            (scope.collection_id, low, high),
        ).fetchall()
    }
    if low not in ends or high not in ends:
        return None
    (a, shingles), (b, _) = ends[low], ends[high]
    if a == b:
        return (1.0, "identical") if shingles > 0 else None
    found = scope.conn.execute(
        scope.sql(
            "SELECT similarity, method FROM {pairs_p} WHERE collection_id = %s AND content_a = %s "
            "AND content_b = %s"
        ),
        (scope.collection_id, min(a, b), max(a, b)),
    ).fetchone()
    return None if found is None else (float(found[0]), str(found[1]))


def export(scope: Scope, collection: str | None = None) -> list[LabelRow]:
    """Every label (of one collection, when named), by collection and pair."""
    query = f"SELECT {_VIEW_COLUMNS} FROM {{s}}.pair_labels"
    params: tuple[str, ...] = ()
    if collection is not None:
        query += " WHERE collection = %s"
        params = (collection,)
    with translated("exporting labels"):
        rows = scope.conn.execute(scope.sql(query + " ORDER BY collection, id_a, id_b"), params).fetchall()
    return [LabelRow(*r) for r in rows]


def verdicts(scope: Scope) -> tuple[int, int]:
    """Of the labelled pairs that are stored pairs of the scope's collection now: how many were
    labelled duplicate, and how many not (the labels' measure of precision)."""
    with translated("counting labels"):
        row = scope.conn.execute(
            scope.sql(
                "SELECT count(*) FILTER (WHERE label = 'duplicate'), "
                "count(*) FILTER (WHERE label = 'not_duplicate') "
                "FROM {s}.pair_labels WHERE collection_id = %s AND similarity IS NOT NULL"
            ),
            (scope.collection_id,),
        ).fetchone()
    return (0, 0) if row is None else (int(row[0]), int(row[1]))


def labels_of(scope: Scope, pairs: list[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """The labels of those of ``pairs`` (each in either order) that are labelled in the scope's
    collection, keyed by the pair with its smaller id first."""
    if not pairs:
        return {}
    ordered = sorted({(min(a, b), max(a, b)) for a, b in pairs})
    with translated("reading labels"):
        rows = scope.conn.execute(
            scope.sql(
                "SELECT l.id_a, l.id_b, l.label FROM {s}.labels l "
                "JOIN unnest(%s::text[], %s::text[]) AS x(a, b) ON l.id_a = x.a AND l.id_b = x.b "
                "WHERE l.collection_id = %s"
            ),
            ([a for a, _ in ordered], [b for _, b in ordered], scope.collection_id),
        ).fetchall()
    return {(a, b): label for a, b, label in rows}


def labelled_similarities(scope: Scope) -> tuple[list[float], list[bool]]:
    """The labelled pairs that are stored pairs of the scope's collection now: (their similarity,
    whether each was labelled duplicate)."""
    with translated("reading labelled similarities"):
        # Most collections have none: the labels alone say so, without the view's joins (which on a
        # distributed collection are statements on every shard).
        labelled = scope.conn.execute(
            scope.sql("SELECT EXISTS (SELECT FROM {s}.labels WHERE collection_id = %s)"),
            (scope.collection_id,),
        ).fetchone()
        if not (labelled and labelled[0]):
            return [], []
        rows = scope.conn.execute(
            scope.sql(
                "SELECT similarity, label = 'duplicate' FROM {s}.pair_labels "
                "WHERE collection_id = %s AND similarity IS NOT NULL"
            ),
            (scope.collection_id,),
        ).fetchall()
    return [float(r[0]) for r in rows], [bool(r[1]) for r in rows]
