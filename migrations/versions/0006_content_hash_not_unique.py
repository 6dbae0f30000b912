"""Content hashes are kept unique by neardup's writers, not by a unique index.

Concurrent writers to one collection (``Index.add(concurrent=True)``, ``neardup add --jobs``) now
write a batch's new contents and signatures before their turn at the collection's lock. Two of them
may hold the same new text at once; with a unique index the second would wait for the first to
commit and then fail. So the unique key on ``(collection_id, content_hash)`` becomes a plain index
serving the same lookups, and each batch, in its turn, checks its new hashes against what is
committed and writes its contents again if another writer stored one of them meanwhile
(``ingest.writer``). A distributed schema already has this layout (Citus cannot enforce a unique key
that does not contain the distribution column), hence the ``IF [NOT] EXISTS``.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23
"""

from __future__ import annotations

from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade(schema: str) -> None:
    """Replace the unique key on content hashes with a plain index."""
    s = f'"{schema}"'
    op.execute(f"ALTER TABLE {s}.contents DROP CONSTRAINT IF EXISTS contents_hash_key")
    op.execute(f"CREATE INDEX IF NOT EXISTS contents_hash_idx ON {s}.contents (collection_id, content_hash)")


def downgrade(schema: str) -> None:
    """Restore the unique key (fails, changing nothing, if a hash is stored twice)."""
    s = f'"{schema}"'
    op.execute(f"DROP INDEX IF EXISTS {s}.contents_hash_idx")
    op.execute(
        f"ALTER TABLE {s}.contents ADD CONSTRAINT contents_hash_key UNIQUE (collection_id, content_hash)"
    )
