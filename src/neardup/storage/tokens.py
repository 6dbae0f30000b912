"""API tokens and review sessions: only SHA-256 hashes of their secrets are stored.

A token is looked up by its hash, so the secret itself never reaches the database, a log line or a
query plan; a session (the review pages' cookie) is a second secret tied to one token, ending with
it when the token is revoked.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from neardup.errors import InputError, InternalError
from neardup.storage.connect import transaction, translated
from neardup.storage.scope import Scope


@dataclass(frozen=True)
class TokenRow:
    """A stored token (without its secret)."""

    token_id: int
    prefix: str
    scope: str
    collection: str | None
    name: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None


_COLUMNS = "token_id, prefix, scope, collection, name, created_at, last_used_at, revoked_at"


def insert(
    scope: Scope, token_hash: bytes, prefix: str, access: str, collection: str | None, name: str
) -> int:
    """Store a new token's hash; returns its id."""
    with translated("creating a token"):
        row = scope.conn.execute(
            scope.sql(
                "INSERT INTO {s}.tokens (token_hash, prefix, scope, collection, name) "
                "VALUES (%s, %s, %s, %s, %s) RETURNING token_id"
            ),
            (token_hash, prefix, access, collection, name),
        ).fetchone()
    if row is None:
        raise InternalError("inserting a token returned no row")
    return int(row[0])


def all_tokens(scope: Scope) -> list[TokenRow]:
    """Every token, revoked ones included, oldest first."""
    with translated("listing tokens"):
        rows = scope.conn.execute(
            scope.sql(f"SELECT {_COLUMNS} FROM {{s}}.tokens ORDER BY token_id")
        ).fetchall()
    return [TokenRow(*r) for r in rows]


def revoke(scope: Scope, token_id: int) -> bool:
    """Mark a token revoked and end its sessions; False when there is no such live token."""
    with translated(f"revoking token {token_id}"), transaction(scope.conn):
        row = scope.conn.execute(
            scope.sql(
                "UPDATE {s}.tokens SET revoked_at = now() WHERE token_id = %s AND revoked_at IS NULL "
                "RETURNING token_id"
            ),
            (token_id,),
        ).fetchone()
        scope.conn.execute(scope.sql("DELETE FROM {s}.sessions WHERE token_id = %s"), (token_id,))
    return row is not None


def find_by_prefix(scope: Scope, prefix: str) -> list[int]:
    """Ids of live tokens whose printed prefix is ``prefix`` (for ``token revoke PREFIX``)."""
    with translated("finding a token"):
        rows = scope.conn.execute(
            scope.sql("SELECT token_id FROM {s}.tokens WHERE prefix = %s AND revoked_at IS NULL"), (prefix,)
        ).fetchall()
    return [int(r[0]) for r in rows]


# last_used_at is written at most this often per token: a write per request would cost more
# than the request's own reads.
_TOUCH_EVERY = "60 seconds"


def lookup(scope: Scope, token_hash: bytes) -> TokenRow | None:
    """The live token with this hash (refreshing its last use now and then), else None."""
    with translated("checking a token"):
        row = scope.conn.execute(
            scope.sql(
                f"SELECT {_COLUMNS}, last_used_at IS NULL OR last_used_at < now() - %s::interval "
                "FROM {s}.tokens WHERE token_hash = %s AND revoked_at IS NULL"
            ),
            (_TOUCH_EVERY, token_hash),
        ).fetchone()
        if row is None:
            return None
        if row[-1]:
            scope.conn.execute(
                scope.sql("UPDATE {s}.tokens SET last_used_at = now() WHERE token_id = %s"), (row[0],)
            )
    return TokenRow(*row[:-1])


def open_session(scope: Scope, session_hash: bytes, token_id: int, csrf: str, seconds: int) -> None:
    """Store a review session for a token, valid for ``seconds``."""
    if seconds <= 0:
        raise InputError(f"a session must last a positive number of seconds, got {seconds}")
    with translated("opening a session"):
        scope.conn.execute(
            scope.sql(
                "INSERT INTO {s}.sessions (session_hash, token_id, csrf, expires_at) "
                "VALUES (%s, %s, %s, now() + make_interval(secs => %s))"
            ),
            (session_hash, token_id, csrf, seconds),
        )


def session(scope: Scope, session_hash: bytes) -> tuple[TokenRow, str] | None:
    """The live token of an unexpired session and the session's CSRF value, else None."""
    with translated("checking a session"):
        row = scope.conn.execute(
            scope.sql(
                f"SELECT {', '.join('t.' + c for c in _COLUMNS.split(', '))}, s.csrf "
                "FROM {s}.sessions s JOIN {s}.tokens t ON t.token_id = s.token_id "
                "WHERE s.session_hash = %s AND s.expires_at > now() AND t.revoked_at IS NULL"
            ),
            (session_hash,),
        ).fetchone()
    return None if row is None else (TokenRow(*row[:-1]), str(row[-1]))


def close_session(scope: Scope, session_hash: bytes) -> None:
    """Forget a session (logging out), and any session that has expired."""
    with translated("closing a session"):
        scope.conn.execute(
            scope.sql("DELETE FROM {s}.sessions WHERE session_hash = %s OR expires_at < now()"),
            (session_hash,),
        )
