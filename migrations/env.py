"""Alembic environment for neardup: migrates the connection and schema that the caller passes in.

neardup's own code (``neardup db upgrade``, ``Index.create``) passes an open SQLAlchemy connection
in ``config.attributes["connection"]`` and the target schema in ``config.attributes["schema"]``.
Run by hand (``alembic upgrade head`` from the project root), it reads ``NEARDUP_DATABASE_URL``.
"""

from __future__ import annotations

import os

from alembic import context
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Connection

from neardup.storage.names import DEFAULT_SCHEMA, VERSION_TABLE, check_schema_name


def _migrate(connection: Connection, schema: str) -> None:
    check_schema_name(schema)
    connection.execute(text(f'CREATE SCHEMA IF NOT EXISTS "{schema}"'))
    context.configure(
        connection=connection,
        version_table=VERSION_TABLE,
        version_table_schema=schema,
        transactional_ddl=True,
    )
    with context.begin_transaction():
        context.run_migrations(schema=schema)


def run() -> None:
    """Migrate the passed connection, or one opened from NEARDUP_DATABASE_URL."""
    config = context.config
    schema = config.attributes.get("schema") or os.environ.get("NEARDUP_SCHEMA", DEFAULT_SCHEMA)
    connection = config.attributes.get("connection")
    if connection is not None:
        _migrate(connection, schema)
        return
    url = os.environ.get("NEARDUP_DATABASE_URL")
    if not url:
        raise SystemExit("set NEARDUP_DATABASE_URL to the database to migrate")
    from neardup.storage.connect import sqlalchemy_url

    engine = create_engine(sqlalchemy_url(url))
    with engine.begin() as conn:
        _migrate(conn, schema)
    engine.dispose()


if context.is_offline_mode():
    raise SystemExit("neardup migrations run online only (they need the target schema's state)")
run()
