"""Record whether a collection is distributed (its tables are Citus tables; docs/distributed.md),
and add document_keys, the table that keeps external ids unique in a distributed collection.

The distribution itself is not a migration: it is applied by ``Index.create(distributed=True)`` to
a schema with no collections yet (``storage/citus.py``), so that one set of migrations serves a
plain PostgreSQL and a Citus coordinator alike, and the migrations after this one run on both.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""

from __future__ import annotations

from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade(schema: str) -> None:
    """Add collections.distributed (false for every existing collection) and document_keys."""
    s = f'"{schema}"'
    op.execute(f"ALTER TABLE {s}.collections ADD COLUMN distributed boolean NOT NULL DEFAULT false")
    # One row per document of a distributed collection, distributed by external id: its primary key
    # is the unique external id that documents (distributed by content id) cannot enforce there.
    # Plain collections have no partition of it.
    op.execute(f"""
CREATE TABLE {s}.document_keys (
    collection_id integer NOT NULL,
    external_id text COLLATE "C" NOT NULL,
    content_id bigint NOT NULL,
    CONSTRAINT document_keys_pkey PRIMARY KEY (collection_id, external_id)
) PARTITION BY LIST (collection_id)""")


def downgrade(schema: str) -> None:
    """Drop document_keys and collections.distributed (a distributed schema's other tables stay
    Citus tables)."""
    s = f'"{schema}"'
    op.execute(f"DROP TABLE {s}.document_keys")
    op.execute(f"ALTER TABLE {s}.collections DROP COLUMN distributed")
