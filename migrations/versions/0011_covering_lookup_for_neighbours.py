"""In a collection that keeps its neighbours, the bucket lookup index carries each row's content,
so that a top-k or containment query reads a fingerprint's holders from the index alone
(``storage.buckets.create_index``; before, every holder was a heap fetch), and an index on the
contents' shingle counts finds a containment query's long candidates
(``storage.fingerprints.sharing``).

Collections without neighbours keep the plain index on the bucket key and get no sizes index:
they pay nothing. A partition whose lookup index is not there (an ingest deferred it) gets the
new kind when it is built. Downgrading builds the plain index again and drops the sizes index.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-26
"""

from __future__ import annotations

from alembic import op
from sqlalchemy import text

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | None = None
depends_on: str | None = None


def _neighbour_collections(schema: str) -> list[int]:
    rows = op.get_bind().execute(
        text(
            f'SELECT collection_id FROM "{schema}".collections '
            "WHERE coalesce((params ->> 'neighbours')::boolean, false) AND NOT distributed"
        )
    )
    return [int(v) for v in rows.scalars().all()]


def _rebuild(schema: str, covering: str) -> None:
    s = f'"{schema}"'
    for collection_id in _neighbour_collections(schema):
        index = f"buckets_c{int(collection_id)}_lookup"
        found = op.get_bind().execute(text("SELECT to_regclass(:name)"), {"name": f"{s}.{index}"}).scalar()
        if found is not None:
            op.execute(f'DROP INDEX {s}."{index}"')
            op.execute(f'CREATE INDEX "{index}" ON {s}."buckets_c{int(collection_id)}" (bucket){covering}')


def upgrade(schema: str) -> None:
    """Rebuild the lookup index of each collection with neighbours to carry the content, and
    index its contents' shingle counts."""
    _rebuild(schema, " INCLUDE (content_id)")
    for collection_id in _neighbour_collections(schema):
        op.execute(
            f'CREATE INDEX IF NOT EXISTS "neardup_sizes_{collection_id}" '
            f'ON "{schema}"."contents_c{collection_id}" (shingle_count)'
        )


def downgrade(schema: str) -> None:
    """Rebuild those lookup indexes on the bucket key alone, as 0010 had them, and drop the sizes
    indexes."""
    _rebuild(schema, "")
    for collection_id in _neighbour_collections(schema):
        op.execute(f'DROP INDEX IF EXISTS "{schema}"."neardup_sizes_{collection_id}"')
