"""A followed table's change queue in its own database: the queue table, the trigger function and
the triggers that fill it (installed and removed here), and the statements that drain it.

The queue holds ids, not rows: a change says "look at this id again", and applying it reads the
row as it is then (gone: remove the document). So applying a change twice does what applying it
once did, and the queue may be filled twice for one row without harm.

Every name from the user (the table, its columns) reaches SQL as an identifier (``sql.Identifier``),
in the trigger function's body too; every value is bound.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import sql

from neardup.errors import Hint, ParamsError, SchemaError
from neardup.storage.connect import Connection

QUEUE = "follow_queue"
FUNCTION = "follow_enqueue"
# The channel the triggers notify (once a statement, with the table's name) and followers listen on.
CHANNEL = "neardup_follow"
# One statement trigger per event: a trigger with transition tables takes one event only.
TRIGGERS = {
    "INSERT": ("neardup_follow_insert", "AFTER INSERT", "REFERENCING NEW TABLE AS new_rows"),
    "UPDATE": (
        "neardup_follow_update",
        "AFTER UPDATE",
        "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows",
    ),
    "DELETE": ("neardup_follow_delete", "AFTER DELETE", "REFERENCING OLD TABLE AS old_rows"),
    # TRUNCATE fires no row trigger: before it, every id still there is queued (to be removed).
    "TRUNCATE": ("neardup_follow_truncate", "BEFORE TRUNCATE", ""),
}

# The trigger function, one per followed table (its names are written into it, so that every
# statement is static and planned once a session; one function for every table, reading the id
# column from the trigger's arguments, had to EXECUTE dynamic SQL, which doubled the triggers' cost
# to a single-row INSERT). It queues the ids a statement touched (an update the
# old and the new, which differ when the id changes) in one INSERT ... SELECT, and notifies
# followers once. SECURITY DEFINER: the table's writers need no grant on the queue.
_FUNCTION_BODY = """
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO {s}.follow_queue (source_schema, source_table, doc_id)
        SELECT TG_TABLE_SCHEMA, TG_TABLE_NAME, {id}::text FROM new_rows WHERE {id} IS NOT NULL;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO {s}.follow_queue (source_schema, source_table, doc_id)
        SELECT TG_TABLE_SCHEMA, TG_TABLE_NAME, {id}::text FROM old_rows WHERE {id} IS NOT NULL;
    ELSIF TG_OP = 'UPDATE' THEN
        INSERT INTO {s}.follow_queue (source_schema, source_table, doc_id)
        SELECT TG_TABLE_SCHEMA, TG_TABLE_NAME, q.id::text
        FROM (SELECT {id} FROM old_rows UNION SELECT {id} FROM new_rows) AS q(id) WHERE q.id IS NOT NULL;
    ELSE
        INSERT INTO {s}.follow_queue (source_schema, source_table, doc_id)
        SELECT TG_TABLE_SCHEMA, TG_TABLE_NAME, {id}::text FROM {table} WHERE {id} IS NOT NULL;
    END IF;
    IF FOUND THEN
        PERFORM pg_notify('neardup_follow', TG_TABLE_SCHEMA || '.' || TG_TABLE_NAME);
    END IF;
    RETURN NULL;
END
"""


def _function(schema: str, found: Table) -> sql.Identifier:
    """The table's trigger function (named by its oid: a table renamed keeps it)."""
    return sql.Identifier(schema, f"{FUNCTION}_{found.oid}")


@dataclass(frozen=True)
class Table:
    """A followed table as the server names it: its oid, schema and name, and its columns."""

    oid: int
    schema: str
    name: str
    columns: tuple[str, ...]

    @property
    def identifier(self) -> sql.Identifier:
        """The table's qualified name as SQL."""
        return sql.Identifier(self.schema, self.name)

    def __str__(self) -> str:
        return self.identifier.as_string(None)


def table(conn: Connection, name: str) -> Table:
    """The table ``name`` (``schema.table``, quoted as SQL quotes identifiers) or ParamsError."""
    row = conn.execute(
        "SELECT c.oid, n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE c.oid = to_regclass(%s) AND c.relkind IN ('r', 'p')",
        (name,),
    ).fetchone()
    if row is None:
        raise ParamsError(f"table {name!r}: no such table in the source database")
    columns = conn.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = %s AND attnum > 0 AND NOT attisdropped "
        "ORDER BY attnum",
        (row[0],),
    ).fetchall()
    return Table(int(row[0]), row[1], row[2], tuple(c[0] for c in columns))


def check_columns(found: Table, columns: dict[str, Sequence[str]]) -> None:
    """ParamsError naming the role and the column when one of ``columns`` (by role: "id column",
    ...) is not a column of the table."""
    for option, names in columns.items():
        for name in names:
            if name not in found.columns:
                raise ParamsError(
                    f"{option} {name!r}: table {found} has no such column (it has {', '.join(found.columns)})"
                )


def install(conn: Connection, schema: str, found: Table, id_column: str) -> None:
    """Create the queue in ``schema`` when missing, and (again) the table's trigger function and
    triggers; the caller's transaction makes it all or nothing."""
    s = sql.Identifier(schema)
    conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(s))
    conn.execute(
        sql.SQL(
            "CREATE TABLE IF NOT EXISTS {s}.follow_queue ("
            "seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, "
            "source_schema name NOT NULL, source_table name NOT NULL, doc_id text NOT NULL)"
        ).format(s=s)
    )
    conn.execute(
        sql.SQL(
            "CREATE INDEX IF NOT EXISTS follow_queue_source "
            "ON {s}.follow_queue (source_schema, source_table, seq)"
        ).format(s=s)
    )
    body = (
        sql.SQL(_FUNCTION_BODY)
        .format(s=s, id=sql.Identifier(id_column), table=found.identifier)
        .as_string(conn)
    )
    conn.execute(
        sql.SQL(
            "CREATE OR REPLACE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql "
            "SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS {body}"
        ).format(function=_function(schema, found), body=sql.Literal(body))
    )
    for name, when, referencing in TRIGGERS.values():
        trigger = sql.Identifier(name)
        conn.execute(sql.SQL("DROP TRIGGER IF EXISTS {} ON {}").format(trigger, found.identifier))
        conn.execute(
            sql.SQL(
                "CREATE TRIGGER {trigger} {when} ON {table} {referencing} FOR EACH STATEMENT "
                "EXECUTE FUNCTION {function}({id_column}, {schema})"
            ).format(
                trigger=trigger,
                when=sql.SQL(when),
                table=found.identifier,
                referencing=sql.SQL(referencing),
                function=_function(schema, found),
                id_column=sql.Literal(id_column),
                schema=sql.Literal(schema),
            )
        )


def enqueue_all(conn: Connection, schema: str, found: Table, id_column: str) -> int:
    """Queue the id of every row of the table (the first indexing); returns how many."""
    cur = conn.execute(
        sql.SQL(
            "INSERT INTO {s}.follow_queue (source_schema, source_table, doc_id) "
            "SELECT %s, %s, {id}::text FROM {table} WHERE {id} IS NOT NULL"
        ).format(s=sql.Identifier(schema), id=sql.Identifier(id_column), table=found.identifier),
        (found.schema, found.name),
    )
    return cur.rowcount


def uninstall(conn: Connection, schema: str, found: Table) -> bool:
    """Drop the table's triggers, its trigger function and its queued changes; the queue too when
    no other table uses it. False when the table had no trigger to drop."""
    had = installed(conn, schema, found) is not None
    for name, _, _ in TRIGGERS.values():
        conn.execute(
            sql.SQL("DROP TRIGGER IF EXISTS {} ON {}").format(sql.Identifier(name), found.identifier)
        )
    s = sql.Identifier(schema)
    if _exists(conn, schema, QUEUE):
        conn.execute(
            sql.SQL("DELETE FROM {s}.follow_queue WHERE source_schema = %s AND source_table = %s").format(
                s=s
            ),
            (found.schema, found.name),
        )
    conn.execute(sql.SQL("DROP FUNCTION IF EXISTS {}()").format(_function(schema, found)))
    users = conn.execute(
        "SELECT count(*) FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid "
        "JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = %s AND p.proname LIKE %s",
        (schema, f"{FUNCTION}%"),
    ).fetchone()
    if users is not None and users[0] == 0:
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {s}.follow_queue").format(s=s))
    return had


def _exists(conn: Connection, schema: str, name: str) -> bool:
    row = conn.execute("SELECT to_regclass(format('%%I.%%I', %s::text, %s::text))", (schema, name)).fetchone()
    return row is not None and row[0] is not None


def installed(conn: Connection, schema: str, found: Table) -> str | None:
    """The id column the table's triggers queue into ``schema``, or None when they are not all
    there."""
    rows = conn.execute(
        "SELECT tgname, tgargs FROM pg_trigger WHERE tgrelid = %s AND tgname = ANY(%s)",
        (found.oid, [name for name, _, _ in TRIGGERS.values()]),
    ).fetchall()
    arguments = {bytes(args).rstrip(b"\x00").decode() for _, args in rows}
    if len(rows) != len(TRIGGERS) or len(arguments) != 1 or not _exists(conn, schema, QUEUE):
        return None
    id_column, _, queue_schema = arguments.pop().partition("\x00")
    return id_column if queue_schema == schema else None


def require_installed(conn: Connection, schema: str, found: Table, id_column: str) -> None:
    """SchemaError unless the table's triggers queue ``id_column`` into ``schema``."""
    queued = installed(conn, schema, found)
    if queued is None:
        raise SchemaError(
            f"table {found} is not followed into schema {schema!r} of its database",
            hint=Hint("install its triggers first with", remedy="follow_install"),
        )
    if queued != id_column:
        raise ParamsError(
            f"id column {id_column!r}: the triggers on {found} queue column {queued!r}",
            hint=Hint("to change it, install them again with", remedy="follow_install"),
        )


def last_seq(conn: Connection, schema: str, found: Table) -> int:
    """The newest queued change of the table (0 when none)."""
    row = conn.execute(
        sql.SQL(
            "SELECT coalesce(max(seq), 0) FROM {s}.follow_queue "
            "WHERE source_schema = %s AND source_table = %s"
        ).format(s=sql.Identifier(schema)),
        (found.schema, found.name),
    ).fetchone()
    return int(row[0]) if row else 0


def pending(conn: Connection, schema: str, found: Table, up_to: int, limit: int) -> list[tuple[int, str]]:
    """The oldest ``limit`` queued changes of the table up to ``up_to``: (seq, id)."""
    return conn.execute(
        sql.SQL(
            "SELECT seq, doc_id FROM {s}.follow_queue WHERE source_schema = %s AND source_table = %s "
            "AND seq <= %s ORDER BY seq LIMIT %s"
        ).format(s=sql.Identifier(schema)),
        (found.schema, found.name, up_to, limit),
    ).fetchall()


def rows(
    conn: Connection,
    found: Table,
    id_column: str,
    text_column: str,
    meta_columns: Sequence[str],
    ids: list[str],
    max_text_length: int,
) -> list[tuple[str, str | None, int, dict[str, Any] | None]]:
    """The rows of ``ids`` as they are now, with a text: (id, text, its length in characters, meta
    of ``meta_columns`` or None); a text longer than ``max_text_length`` is not read (None). The
    ids are bound as an array of the id column's own type, so its index finds them."""
    meta: sql.Composable = sql.NULL
    if meta_columns:
        meta = sql.SQL("jsonb_build_object({})").format(
            sql.SQL(", ").join(sql.SQL("%s::text, {}").format(sql.Identifier(c)) for c in meta_columns)
        )
    query = sql.SQL(
        "SELECT {id}::text, CASE WHEN length({text}::text) <= %s THEN {text}::text END, "
        "length({text}::text), {meta} FROM {table} WHERE {id} = ANY(%s) AND {text} IS NOT NULL"
    ).format(
        id=sql.Identifier(id_column), text=sql.Identifier(text_column), meta=meta, table=found.identifier
    )
    # A list of str is sent as an array literal of unknown type, which the server reads as an array
    # of the id column's type.
    return conn.execute(query, (max_text_length, *meta_columns, ids)).fetchall()


def dequeue(conn: Connection, schema: str, seqs: list[int]) -> int:
    """Delete the applied changes ``seqs``; returns how many were there."""
    cur = conn.execute(
        sql.SQL("DELETE FROM {s}.follow_queue WHERE seq = ANY(%s::bigint[])").format(
            s=sql.Identifier(schema)
        ),
        (seqs,),
    )
    return cur.rowcount


def queue_size(conn: Connection, schema: str, found: Table) -> tuple[int, int]:
    """The table's queued changes, and the bytes of the whole queue with its index."""
    row = conn.execute(
        sql.SQL(
            "SELECT count(*), pg_total_relation_size(format('%%I.%%I', %s::text, %s::text)::regclass) "
            "FROM {s}.follow_queue WHERE source_schema = %s AND source_table = %s"
        ).format(s=sql.Identifier(schema)),
        (schema, QUEUE, found.schema, found.name),
    ).fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def try_lock(conn: Connection, schema: str, found: Table) -> bool:
    """Take the session lock of the table's one follower into ``schema``; False when another holds it."""
    row = conn.execute(
        "SELECT pg_try_advisory_lock(hashtext(%s))", (f"neardup:follow:{schema}:{found.oid}",)
    ).fetchone()
    return bool(row and row[0])


def listen(conn: Connection) -> None:
    """Listen on the triggers' channel (an autocommit connection hears at once)."""
    conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(CHANNEL)))


def identity(conn: Connection) -> tuple[Any, ...]:
    """What names the database a connection reaches: its name and oid, and the start of its server."""
    row = conn.execute(
        "SELECT current_database(), (SELECT oid FROM pg_database WHERE datname = current_database()), "
        "pg_postmaster_start_time()"
    ).fetchone()
    return tuple(row) if row else ()
