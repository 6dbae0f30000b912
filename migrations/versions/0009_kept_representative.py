"""Each collection stores which document of a cluster is kept (its representative), and the
cluster_list view follows it.

``collections.keep`` is one of ``first`` (the earliest inserted document, the default for new
collections: no later document displaces it), ``longest`` (the longest text; without stored texts,
the most shingles), ``id`` (the smallest id, bytewise) or ``meta:FIELD`` / ``meta:FIELD:desc``
(the smallest / largest value of a metadata field, documents without it last); ties go to the
earliest inserted. Collections that exist already keep ``id``, the representative they showed.

Cluster ids need no change: every stored cluster id is already the smallest content id of its
cluster, an id the content id counter never hands out again, which is what the writer now keeps
stable (``neardup.core.cluster_ids``).

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-26
"""

from __future__ import annotations

from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | None = None
depends_on: str | None = None

_CLUSTERS = """
CREATE OR REPLACE VIEW {s}.cluster_list AS
SELECT collection, collection_id, cluster, id, {representative} AS representative, size
FROM (
    SELECT c.name AS collection, d.collection_id, t.cluster_id AS cluster, d.external_id AS id,
           {columns}
           count(*) OVER (PARTITION BY d.collection_id, t.cluster_id) AS size
    FROM {s}.documents d
    JOIN {s}.contents t ON t.collection_id = d.collection_id AND t.content_id = d.content_id
        AND t.shingle_count > 0
    JOIN {s}.collections c ON c.collection_id = d.collection_id
) m
WHERE size > 1
WINDOW w AS (PARTITION BY collection_id, cluster{order})"""

# The representative by the collection's policy; the length is read only under 'longest'. ("\\:"
# is a colon: alembic's text() would take ":desc" for a parameter.)
_KEPT = {
    "representative": "row_number() OVER w = 1",
    "columns": """d.doc_id, c.keep, d.meta,
           CASE WHEN c.keep = 'longest' THEN coalesce(length(d.text), t.shingle_count) END AS length,""",
    "order": """ ORDER BY
    length DESC NULLS LAST,
    CASE WHEN keep = 'id' THEN id END,
    CASE WHEN keep LIKE 'meta:%' AND keep NOT LIKE '%\\:desc' THEN meta -> split_part(keep, ':', 2) END
        NULLS LAST,
    CASE WHEN keep LIKE 'meta:%\\:desc' THEN meta -> split_part(keep, ':', 2) END DESC NULLS LAST,
    doc_id""",
}
# As 0001 made it: the smallest id.
_SMALLEST = {"representative": "id = min(id) OVER w", "columns": "", "order": ""}


def upgrade(schema: str) -> None:
    """Add the policy (``id`` for existing collections, ``first`` for new ones) and follow it in
    cluster_list."""
    s = f'"{schema}"'
    op.execute(f"ALTER TABLE {s}.collections ADD COLUMN keep text NOT NULL DEFAULT 'id'")
    op.execute(f"ALTER TABLE {s}.collections ALTER COLUMN keep SET DEFAULT 'first'")
    op.execute(
        f"ALTER TABLE {s}.collections ADD CONSTRAINT collections_keep_check CHECK "
        "(keep IN ('first', 'longest', 'id') OR keep ~ '^meta:[^:]{1,100}(\\:desc)?$')"
    )
    op.execute(f"DROP VIEW {s}.cluster_list")
    op.execute(_CLUSTERS.format(s=s, **_KEPT))


def downgrade(schema: str) -> None:
    """Restore 0001's cluster_list and drop the policy."""
    s = f'"{schema}"'
    op.execute(f"DROP VIEW {s}.cluster_list")
    op.execute(_CLUSTERS.format(s=s, **_SMALLEST))
    op.execute(f"ALTER TABLE {s}.collections DROP COLUMN keep")
