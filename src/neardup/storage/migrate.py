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

from neardup.errors import DatabaseError, Hint, ParamsError, SchemaError
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
            f"schema {schema!r} is at revision {current or 'none'}, this neardup needs {head}",
            hint=Hint("migrate it with", remedy="upgrade"),
        )


def downgrade_steps(current: str | None, target: str) -> tuple[str, list[tuple[str, str]]]:
    """The revision a downgrade from ``current`` to ``target`` ends at (``base`` or an id), and the
    migrations it undoes, newest first, each as (revision, the first sentence of what it added,
    which its downgrade drops); ``target`` is a revision, ``base`` or ``-N`` (N steps down).
    ParamsError for a target that is no revision below ``current``."""
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(_config(DEFAULT_SCHEMA))
    chain = list(script.iterate_revisions(current, "base")) if current else []
    ids = [s.revision for s in chain]
    if target == "base":
        undone = chain
    elif target.startswith("-") and target[1:].isascii() and target[1:].isdigit():
        undone = chain[: int(target[1:])]
        if len(undone) < int(target[1:]):
            raise ParamsError(
                f"schema is at {current or 'no revision'}: it cannot go {target[1:]} revisions down"
            )
    elif target in ids:
        undone = chain[: ids.index(target)]
    else:
        below = ", ".join(ids[1:]) or "none"
        raise ParamsError(
            f"{target!r} is no revision below the schema's {current or 'none'} (below it: {below}; or base)"
        )
    below = ids[len(undone)] if len(undone) < len(ids) else "base"
    return below, [(s.revision, _first_line(s.module.__doc__)) for s in undone]


def _first_line(doc: str | None) -> str:
    """The first sentence of a docstring, on one line."""
    text = " ".join((doc or "").split("\n\n")[0].split()).split(". ")[0].rstrip(".")
    if len(text) > _TITLE_CHARACTERS:
        text = text[: _TITLE_CHARACTERS - 3].rsplit(" ", 1)[0] + " ..."
    return text or "(no description)"


# The most of a migration's description a downgrade's message shows.
_TITLE_CHARACTERS = 100


def documents_by_collection(conn: Connection, schema: str = DEFAULT_SCHEMA) -> list[tuple[str, int]]:
    """Each collection of the schema with its number of documents, by name, read with the columns
    every revision has (so that a schema at any revision can say what a downgrade would drop);
    none when the schema was never migrated."""
    if revision_on(conn, schema) is None:
        return []
    s = sql.Identifier(check_schema_name(schema))
    with translated(f"counting the documents of schema {schema!r}"):
        rows = conn.execute(
            sql.SQL(
                # grouped, then joined: Citus runs no subquery per row of a reference table
                "SELECT c.name, coalesce(n.documents, 0) FROM {s}.collections c LEFT JOIN ("
                "SELECT collection_id, count(*) AS documents FROM {s}.documents GROUP BY collection_id) n "
                "ON n.collection_id = c.collection_id ORDER BY c.name"
            ).format(s=s)
        ).fetchall()
    return [(str(r[0]), int(r[1])) for r in rows]
