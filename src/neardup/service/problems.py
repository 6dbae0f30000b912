"""Errors as RFC 9457 problem documents: one mapping from neardup's errors to HTTP statuses, and a
generic document for anything unexpected (logged here, never shown to the client)."""

from __future__ import annotations

import json
import logging
import re
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect

from neardup.errors import (
    ChangesFeedError,
    ChangesGoneError,
    ClusterNotFoundError,
    CollectionExistsError,
    CollectionNotFoundError,
    DatabaseConnectionError,
    DistributedError,
    Hint,
    InputError,
    NeardupError,
    ParamsError,
    ParamsMismatchError,
    SchemaError,
    TextNotStoredError,
)
from neardup.service import html
from neardup.service.requests import request_id

MEDIA_TYPE = "application/problem+json"
log = logging.getLogger("neardup.service")

# (error class, status), first match wins; anything else is a 500 with a generic detail.
_STATUSES: tuple[tuple[type[NeardupError], int], ...] = (
    (CollectionNotFoundError, 404),
    (ClusterNotFoundError, 404),
    # A `since` older than the changes feed keeps: gone, the client must list the collection again.
    (ChangesGoneError, 410),
    (ChangesFeedError, 409),
    (CollectionExistsError, 409),
    (ParamsMismatchError, 409),
    # A layout the database cannot give: distributed without Citus, plain in a distributed schema.
    (DistributedError, 409),
    (InputError, 422),
    (ParamsError, 422),
    (TextNotStoredError, 422),
    (DatabaseConnectionError, 503),
    (SchemaError, 503),
)
# What a 503 says: the error's own text names the database's user, host and port or socket path
# (psycopg's connection messages do), which a caller, even one with a bad token, must not learn;
# the server log keeps it.
UNAVAILABLE = "the database is unavailable"
# Seconds a client is asked to wait after a 503 (Retry-After) before trying again.
RETRY_AFTER_SECONDS = 5
# "record 3: field 'id' ..." or "record 3 (id 'x'): field 'text' ...", as neardup.records words it.
_RECORD = re.compile(r"^record (\d+)(?: \(id .*?\))?: (?:field '(\w+)')?")


class ProblemError(Exception):
    """An error the client is told about: status, title, detail and optional extra members."""

    def __init__(
        self,
        status: int,
        detail: str,
        *,
        extra: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        """``detail`` must be safe to show: no secret, no stack trace."""
        super().__init__(detail)
        self.status, self.detail, self.extra, self.headers = status, detail, extra or {}, headers

    def response(self, request: Request | None = None) -> Response:
        """The problem document; for a browser (its Accept header prefers HTML), an error page
        that says the same."""
        body: dict[str, Any] = {
            "type": "about:blank",
            "title": HTTPStatus(self.status).phrase,
            "status": self.status,
            "detail": self.detail,
            **self.extra,
        }
        if request is not None:
            body["instance"] = request.url.path
            if (rid := request_id(request.scope)) is not None:
                body["request_id"] = rid  # the request's log line says the same
        headers = self.headers
        if self.status == 503:
            headers = {"Retry-After": str(RETRY_AFTER_SECONDS), **(headers or {})}
        if request is not None and html.wants_html(request):
            error = html.page(request, "error.html", self.status, problem=body, **_reviewer(request))
            error.headers.update(headers or {})
            return error
        return JSONResponse(body, status_code=self.status, media_type=MEDIA_TYPE, headers=headers)


def _reviewer(request: Request) -> dict[str, Any]:
    """``who`` of the review session a browser's error page belongs to (the review pages' access
    check leaves it on the request), so that the page keeps its Log out button; nothing when the
    error came before the session was known."""
    who = getattr(request.state, "reviewer", None)
    return {"who": who} if who is not None else {}


# Each remedy in the words of an HTTP client, who asks the service's operator for steps it cannot take.
REMEDIES: dict[str, str] = {
    "upgrade": "the operator's `neardup db upgrade`",
    "rebuild_neighbours": "the operator's `neardup rebuild --neighbours`",
    "changes_feed": "the operator's `neardup changes-feed on --collection {name}`",
    "follow_install": "the operator's `neardup follow --install`",
    "carry_across": "the operator's backup and restore across PostgreSQL {made} and {have}",
}


def words(hint: Hint) -> str:
    """``hint`` as an HTTP client reads it: a keyword is a field of the request's JSON body."""
    if hint.remedy is not None:
        return f"{hint.advice} {REMEDIES[hint.remedy].format(**dict(hint.fields))}"
    return f"{hint.advice} {json.dumps(hint.keyword)}: {json.dumps(hint.value)} in the request body"


def from_error(exc: NeardupError) -> ProblemError:
    """The problem a neardup error becomes; bad records name their position and field."""
    status = next((s for cls, s in _STATUSES if isinstance(exc, cls)), 500)
    if status == 500:
        return ProblemError(500, "the server could not complete the request; the error was logged")
    if status == 503:
        if isinstance(exc, SchemaError):
            return ProblemError(
                503,
                f"{UNAVAILABLE}: its neardup schema is missing or at another revision (neardup db upgrade)",
            )
        return ProblemError(503, UNAVAILABLE)
    extra: dict[str, Any] = {}
    detail = exc.worded(words)
    if isinstance(exc, InputError) and (m := _RECORD.match(detail)):
        extra["errors"] = [{"record": int(m.group(1)), "field": m.group(2), "detail": detail}]
    return ProblemError(status, detail, extra=extra)


def install(app: FastAPI) -> None:
    """Make every error of the app a problem document."""

    @app.exception_handler(ProblemError)
    async def on_problem(request: Request, exc: ProblemError) -> Response:
        return exc.response(request)

    @app.exception_handler(NeardupError)
    async def on_neardup(request: Request, exc: NeardupError) -> Response:
        problem = from_error(exc)
        rid = request_id(request.scope)
        if problem.status == 503:  # the detail the client was not told, without a traceback
            log.warning(
                "%s %s: %s: %s", request.method, request.url.path, UNAVAILABLE, exc, extra={"request_id": rid}
            )
        elif problem.status >= 500:
            log.error(
                "%s %s failed: %s",
                request.method,
                request.url.path,
                exc,
                exc_info=exc,
                extra={"request_id": rid},
            )
        return problem.response(request)

    @app.exception_handler(HTTPException)
    async def on_http(request: Request, exc: HTTPException) -> Response:
        detail = exc.detail if isinstance(exc.detail, str) else HTTPStatus(exc.status_code).phrase
        return ProblemError(exc.status_code, detail, headers=dict(exc.headers or {})).response(request)

    @app.exception_handler(RequestValidationError)
    async def on_invalid(request: Request, exc: RequestValidationError) -> Response:
        errors = [
            {"location": [str(p) for p in e.get("loc", ())], "detail": str(e.get("msg", ""))}
            for e in exc.errors()
        ]
        where = "; ".join(f"{'.'.join(e['location'])}: {e['detail']}" for e in errors[:5])
        return ProblemError(422, f"the request is not valid: {where}", extra={"errors": errors}).response(
            request
        )

    @app.exception_handler(ClientDisconnect)
    async def on_gone(request: Request, exc: ClientDisconnect) -> Response:
        # The client left while its body was read: nobody to answer, and nothing to log.
        return Response(status_code=400)

    @app.exception_handler(Exception)
    async def on_anything(request: Request, exc: Exception) -> Response:
        rid = request_id(request.scope)
        log.error("%s %s failed", request.method, request.url.path, exc_info=exc, extra={"request_id": rid})
        return ProblemError(500, "the server could not complete the request; the error was logged").response(
            request
        )
