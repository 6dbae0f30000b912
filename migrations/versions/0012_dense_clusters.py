"""A view of the dense clusters: those of at least the collection's ``dense_cluster_size`` contents
(128 for a collection whose parameters predate it), which store a verified subset of their pairs
that connects them rather than every pair (docs/design.md, "Dense clusters").

``dense_clusters`` has one row per dense cluster: collection, collection_id, cluster (its lasting
id, as ``cluster_list`` shows it) and contents (its distinct texts). A cluster's documents are in
``cluster_list``; its stored pairs in ``pair_list``; its complete pairs only on demand
(``neardup pairs --cluster ID --complete``), since they are quadratic in its size. The changes
feed's cluster events gain ``dense`` (whether they concern a dense cluster). Downgrading drops the
view and the column.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-28
"""

from __future__ import annotations

from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | None = None
depends_on: str | None = None

# The default of ``core.params.DEFAULT_DENSE_CLUSTER_SIZE``, for parameters stored without it.
_VIEW = """
CREATE VIEW {s}.dense_clusters AS
SELECT c.name AS collection, t.collection_id, t.cluster_id AS cluster, count(*) AS contents
FROM {s}.contents t
JOIN {s}.collections c ON c.collection_id = t.collection_id
GROUP BY c.collection_id, t.collection_id, t.cluster_id
HAVING count(*) >= coalesce((c.params ->> 'dense_cluster_size')::bigint, 128)"""


def upgrade(schema: str) -> None:
    """Create the ``dense_clusters`` view and the changes' ``dense`` column."""
    op.execute(_VIEW.format(s=f'"{schema}"'))
    op.execute(f'ALTER TABLE "{schema}".changes ADD COLUMN dense boolean')


def downgrade(schema: str) -> None:
    """Drop them."""
    op.execute(f'ALTER TABLE "{schema}".changes DROP COLUMN dense')
    op.execute(f'DROP VIEW "{schema}".dense_clusters')
