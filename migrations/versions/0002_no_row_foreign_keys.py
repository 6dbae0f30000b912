"""Drop the foreign keys from documents and pairs to contents.

Checked row by row, they cost more than the rest of writing those rows: a foreign-key trigger
fires per inserted row, and a profile of ingest found most of the time of the pairs' and
documents' COPY in these checks (bench/bench_speed.py's Debian ingest: 12.16 s before, 6.84 s
after). Every write to these tables goes through the index, one
transaction per batch under the collection's row lock, which inserts a content before anything
that names it and deletes what names a content with it (storage/contents.delete); the test suite
checks after every kind of write and interruption that no row names a missing content.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21
"""

from __future__ import annotations

from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | None = None
depends_on: str | None = None

_KEYS = (
    ("documents", "documents_content_fkey", "content_id", ""),
    ("pairs", "pairs_content_a_fkey", "content_a", " ON DELETE CASCADE"),
    ("pairs", "pairs_content_b_fkey", "content_b", " ON DELETE CASCADE"),
)


def upgrade(schema: str) -> None:
    """Drop the three foreign keys (their partitions' copies go with them)."""
    s = f'"{schema}"'
    for table, name, _, _ in _KEYS:
        op.execute(f"ALTER TABLE {s}.{table} DROP CONSTRAINT {name}")


def downgrade(schema: str) -> None:
    """Put the foreign keys back (checking every stored row against contents)."""
    s = f'"{schema}"'
    for table, name, column, action in _KEYS:
        op.execute(
            f"ALTER TABLE {s}.{table} ADD CONSTRAINT {name} FOREIGN KEY (collection_id, {column}) "
            f"REFERENCES {s}.contents (collection_id, content_id){action}"
        )
