"""The changes feed: a numbered list of the writes to a collection, kept where a collection asks.

``collections`` gets the feed's settings and counters: ``change_feed`` (whether writes are
recorded), ``change_retention`` (how long a change is kept; NULL keeps every one),
``last_change`` (the sequence number of the collection's last change) and ``changes_from`` (the
oldest ``since`` still answered: every change after it is kept). ``changes`` holds the changes,
one row each, numbered per collection in the order their transactions commit (the numbers are
taken under the collection's writer lock: storage/changes.py says why that is commit order).

A collection without the feed writes no row here and reads its settings with the row it reads
anyway, so it pays nothing.

Revision ID: 0010
Revises: 0008
Create Date: 2026-11-26
"""

from __future__ import annotations

from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade(schema: str) -> None:
    """Add the feed's columns to ``collections`` and the ``changes`` table."""
    s = f'"{schema}"'
    op.execute(
        f"ALTER TABLE {s}.collections ADD COLUMN change_feed boolean NOT NULL DEFAULT false, "
        "ADD COLUMN change_retention interval, "
        "ADD COLUMN last_change bigint NOT NULL DEFAULT 0, "
        "ADD COLUMN changes_from bigint NOT NULL DEFAULT 0"
    )
    op.execute(f"""
CREATE TABLE {s}.changes (
    collection_id integer NOT NULL,
    seq bigint NOT NULL,
    at timestamptz NOT NULL DEFAULT now(),
    kind text NOT NULL,
    id_a text COLLATE "C",
    id_b text COLLATE "C",
    similarity double precision,
    cluster bigint,
    clusters bigint[],
    CONSTRAINT changes_pkey PRIMARY KEY (collection_id, seq)
)""")


def downgrade(schema: str) -> None:
    """Drop the ``changes`` table and the feed's columns."""
    s = f'"{schema}"'
    op.execute(f"DROP TABLE {s}.changes")
    op.execute(
        f"ALTER TABLE {s}.collections DROP COLUMN change_feed, DROP COLUMN change_retention, "
        "DROP COLUMN last_change, DROP COLUMN changes_from"
    )
