"""The service's tables: API tokens (hashes only), review sessions, and labels of pairs.

``tokens`` holds the SHA-256 of each token, never the token; ``sessions`` the SHA-256 of each review
page's session cookie with its CSRF value; ``labels`` one verdict per pair of document ids
("duplicate" or "not_duplicate"), and the ``pair_labels`` view shows each beside the pair's current
similarity (null when the two are no longer a stored pair).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23
"""

from __future__ import annotations

from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade(schema: str) -> None:
    """Create tokens, sessions and labels, and the pair_labels view."""
    s = f'"{schema}"'
    op.execute(f"""
CREATE TABLE {s}.tokens (
    token_id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    token_hash bytea NOT NULL CONSTRAINT tokens_hash_key UNIQUE,
    prefix text NOT NULL,
    scope text NOT NULL CONSTRAINT tokens_scope_check CHECK (scope IN ('read', 'write', 'admin')),
    collection text CONSTRAINT tokens_collection_check
        CHECK (collection ~ '^[A-Za-z0-9_][A-Za-z0-9_.-]{{0,99}}$'),
    name text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    revoked_at timestamptz
)""")
    op.execute(f"""
CREATE TABLE {s}.sessions (
    session_hash bytea PRIMARY KEY,
    token_id integer NOT NULL CONSTRAINT sessions_token_fkey REFERENCES {s}.tokens (token_id)
        ON DELETE CASCADE,
    csrf text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
)""")
    op.execute(f"CREATE INDEX sessions_token_idx ON {s}.sessions (token_id)")
    op.execute(f"""
CREATE TABLE {s}.labels (
    collection_id integer NOT NULL CONSTRAINT labels_collection_fkey
        REFERENCES {s}.collections (collection_id) ON DELETE CASCADE,
    id_a text COLLATE "C" NOT NULL,
    id_b text COLLATE "C" NOT NULL,
    label text NOT NULL CONSTRAINT labels_label_check CHECK (label IN ('duplicate', 'not_duplicate')),
    note text NOT NULL DEFAULT '',
    token_id integer CONSTRAINT labels_token_fkey REFERENCES {s}.tokens (token_id) ON DELETE SET NULL,
    labelled_by text NOT NULL DEFAULT '',
    labelled_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT labels_pkey PRIMARY KEY (collection_id, id_a, id_b),
    CONSTRAINT labels_order_check CHECK (id_a < id_b)
)""")
    # Each label with the pair's similarity now: through the two documents' contents to the stored
    # pair (or 'identical' when both have one content), by index lookups, not a scan of pair_list.
    op.execute(f"""
CREATE VIEW {s}.pair_labels AS
SELECT c.name AS collection, l.collection_id, l.id_a, l.id_b, l.label, l.note, l.labelled_by,
       l.labelled_at,
       CASE WHEN da.content_id = db.content_id AND t.shingle_count > 0 THEN 1.0::double precision
            ELSE p.similarity END AS similarity,
       CASE WHEN da.content_id = db.content_id AND t.shingle_count > 0 THEN 'identical'
            ELSE p.method END AS method
FROM {s}.labels l
JOIN {s}.collections c ON c.collection_id = l.collection_id
LEFT JOIN {s}.documents da ON da.collection_id = l.collection_id AND da.external_id = l.id_a
LEFT JOIN {s}.documents db ON db.collection_id = l.collection_id AND db.external_id = l.id_b
LEFT JOIN {s}.contents t ON t.collection_id = l.collection_id AND t.content_id = da.content_id
LEFT JOIN {s}.pairs p ON p.collection_id = l.collection_id
    AND p.content_a = least(da.content_id, db.content_id)
    AND p.content_b = greatest(da.content_id, db.content_id)""")


def downgrade(schema: str) -> None:
    """Drop the view and the three tables."""
    s = f'"{schema}"'
    op.execute(f"DROP VIEW IF EXISTS {s}.pair_labels")
    for table in ("labels", "sessions", "tokens"):
        op.execute(f"DROP TABLE IF EXISTS {s}.{table}")
