"""Record whether a collection is distributed (its tables are Citus tables; docs/distributed.md).

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
    """Add collections.distributed (false for every existing collection)."""
    op.execute(f'ALTER TABLE "{schema}".collections ADD COLUMN distributed boolean NOT NULL DEFAULT false')


def downgrade(schema: str) -> None:
    """Drop collections.distributed (a distributed schema's tables stay Citus tables)."""
    op.execute(f'ALTER TABLE "{schema}".collections DROP COLUMN distributed')
