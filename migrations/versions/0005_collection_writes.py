"""A write counter on each collection, so a long ingest can tell whether anyone else wrote.

``collections.writes`` goes up by one in every transaction that changes a collection's documents,
contents, buckets or parameters. An ingest into an empty collection holds its own bucket rows in
memory and builds the bucket index once at the end (``ingest.writer``); between two of its batches
it compares the counter with the value its last batch left, and if another writer came between,
it builds the index and probes the database from then on.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23
"""

from __future__ import annotations

from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade(schema: str) -> None:
    """Add the counter (0 for existing collections: only differences between reads matter)."""
    op.execute(f'ALTER TABLE "{schema}".collections ADD COLUMN writes bigint NOT NULL DEFAULT 0')


def downgrade(schema: str) -> None:
    """Drop the counter."""
    op.execute(f'ALTER TABLE "{schema}".collections DROP COLUMN writes')
