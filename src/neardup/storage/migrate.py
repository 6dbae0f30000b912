"""Schema migrations (alembic), run on neardup's own connection: upgrade, downgrade, current.

Alembic and SQLAlchemy are imported only to migrate or to read the migrations: opening an index at
the head revision (every command but ``db`` and ``init``) reads the revision with psycopg and
compares it with HEAD_REVISION.
"""

from __future__ import annotations

from contextlib import closing
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from psycopg import sql

from neardup.errors import DatabaseError, SchemaError
from neardup.storage.connect import Connection, connect, redacted, sqlalchemy_url, translated
from neardup.storage.names import DEFAULT_SCHEMA, VERSION_TABLE, check_schema_name

if TYPE_CHECKING:
    from alembic.config import Config

# The head of migrations/versions, known without alembic reading them, so that opening an index at
# the head needs no alembic (tests/storage/test_migrations.py fails unless it is alembic's head). A
# schema at any other revision is judged against the migrations themselves.
HEAD_REVISION = "0012"


def migrations_dir() -> Path:
    """The alembic script directory: inside the installed wheel, else the source checkout's."""
    packaged = Path(str(resources.files("neardup"))) / "_migrations"
    if (packaged / "env.py").is_file():
        return packaged
    checkout = Path(__file__).resolve().parents[3] / "migrations"
    if (checkout / "env.py").is_file():
        return checkout
    raise SchemaError(f"neardup's migrations are missing (looked in {packaged} and {checkout})")


def _config(schema: str) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    config.attributes["schema"] = check_schema_name(schema)
    return config


def head_revision() -> str:
    """The newest revision this version of neardup knows, read from its migrations."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(_config(DEFAULT_SCHEMA)).get_current_head()
    if head is None:
        raise SchemaError(f"neardup's migrations in {migrations_dir()} have no head revision")
    return head


def _run(url: str, schema: str, action: str, revision: str) -> None:
    from alembic import command
    from sqlalchemy import create_engine, text
    from sqlalchemy.exc import SQLAlchemyError

    config = _config(schema)
    engine = create_engine(sqlalchemy_url(url))
    try:
        with engine.begin() as conn:
            # One migrator per schema at a time; the lock ends with the transaction.
            conn.execute(text("SELECT pg_advisory_xact_lock(hashtext(:key))"), {"key": f"neardup:{schema}"})
            config.attributes["connection"] = conn
            if action == "upgrade":
                command.upgrade(config, revision)
            else:
                command.downgrade(config, revision)
    except SQLAlchemyError as exc:
        raise DatabaseError(
            f"{action} of schema {schema!r} at {redacted(url)}: {exc.__cause__ or exc}"
        ) from exc
    finally:
        engine.dispose()


def upgrade(url: str, schema: str = DEFAULT_SCHEMA, revision: str = "head") -> None:
    """Create or bring the neardup schema up to ``revision`` (default: the newest), in one transaction."""
    _run(url, schema, "upgrade", revision)


def downgrade(url: str, schema: str = DEFAULT_SCHEMA, revision: str = "base") -> None:
    """Take the schema down to ``revision``; ``base`` drops every neardup table (and its data)."""
    _run(url, schema, "downgrade", revision)


def revision_on(conn: Connection, schema: str = DEFAULT_SCHEMA) -> str | None:
    """The revision the schema is at, read on an open connection, or None when it was never migrated."""
    table = sql.Identifier(check_schema_name(schema), VERSION_TABLE)
    with translated(f"reading the revision of schema {schema!r}"):
        found = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (table.as_string(conn),)).fetchone()
        if not (found and found[0]):
            return None
        row = conn.execute(sql.SQL("SELECT version_num FROM {}").format(table)).fetchone()
    return str(row[0]) if row else None


def current_revision(url: str, schema: str = DEFAULT_SCHEMA) -> str | None:
    """The revision the schema is at, or None when it was never migrated."""
    with closing(connect(url)) as conn:
        return revision_on(conn, schema)


def is_head(revision: str | None) -> bool:
    """Whether a schema at ``revision`` is at the newest revision this neardup knows."""
    return revision == HEAD_REVISION or revision == head_revision()


def require_head(conn: Connection, schema: str = DEFAULT_SCHEMA) -> None:
    """Refuse (SchemaError) a schema that is not at the revision this neardup needs."""
    current = revision_on(conn, schema)
    if current != HEAD_REVISION and current != (head := head_revision()):
        raise SchemaError(
            f"schema {schema!r} is at revision {current or 'none'}, this neardup needs {head}: "
            "run `neardup db upgrade`"
        )
