"""Who is asking: a bearer token (API and review pages) or a review session cookie.

Tokens are looked up by their SHA-256 in the database; the token itself is never stored, logged or
accepted in a URL. A token limited to one collection is refused on the others (403); no token
is 401, too small a scope 403.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from neardup.credentials import allows, digest
from neardup.service.context import Context
from neardup.service.problems import ProblemError

SESSION_COOKIE = "nd_session"
bearer = HTTPBearer(
    auto_error=False,
    description="A token from `neardup token create`: read, write or admin, optionally for one collection.",
)


@dataclass(frozen=True)
class Principal:
    """The holder of a token: its scope, its collection (None: every one) and its name."""

    access: str
    collection: str | None
    name: str
    token_id: int | None = None
    csrf: str | None = None
    """The session's CSRF value when the request came with a session cookie, else None."""

    def require(self, needed: str, collection: str | None) -> None:
        """Refuse (403) what this token may not do on ``collection`` (None: no one collection; a
        listing of collections shows a limited token only its own)."""
        if not allows(self.access, needed):
            article = "an" if needed[0] in "aeiou" else "a"
            raise ProblemError(403, f"this needs {article} {needed} token; this one is {self.access}")
        if self.collection is not None and collection is not None and collection != self.collection:
            raise ProblemError(403, f"this token is limited to collection {self.collection!r}")


ANYONE = Principal("admin", None, "no-auth")
_UNAUTHORIZED = {"WWW-Authenticate": 'Bearer realm="neardup"'}


def context(request: Request) -> Context:
    """The service's shared state."""
    ctx: Context = request.app.state.ctx
    return ctx


def from_token(ctx: Context, secret: str) -> Principal:
    """The holder of a bearer token; 401 when it is unknown or revoked."""
    key = digest(secret)
    row = ctx.db.tokens.lookup(key)
    if row is None:
        ctx.tokens.forget(key)
        raise ProblemError(401, "the token is not valid (unknown or revoked)", headers=_UNAUTHORIZED)
    who = Principal(row.scope, row.collection, row.name, row.token_id)
    ctx.tokens.remember(key, who)
    return who


def from_session(ctx: Context, secret: str) -> Principal | None:
    """The holder of a review session cookie, or None when it is unknown or expired."""
    found = ctx.db.tokens.session(digest(secret))
    if found is None:
        return None
    row, csrf = found
    return Principal(row.scope, row.collection, row.name, row.token_id, csrf)


def require(needed: str, path_param: str = "name") -> Callable[..., Awaitable[Principal]]:
    """A dependency: the caller, allowed ``needed`` on the collection named by ``path_param``."""

    async def dependency(
        request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Security(bearer)]
    ) -> Principal:
        ctx = context(request)
        if not ctx.auth:
            return ANYONE
        if credentials is None:
            raise ProblemError(401, "send a token: Authorization: Bearer <token>", headers=_UNAUTHORIZED)
        # A token checked in the last seconds needs no database round trip (nor a thread).
        who: Principal | None = ctx.tokens.recall(digest(credentials.credentials))
        if who is None:
            who = await run_in_threadpool(from_token, ctx, credentials.credentials)
        who.require(needed, request.path_params.get(path_param))
        return who

    return dependency
