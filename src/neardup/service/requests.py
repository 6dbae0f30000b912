"""Each request's id, its figures in /metrics, and (with ``--log-format json``) its one log line.

The id is the client's ``X-Request-ID`` when it sent a short plain one, else a new random one; the
answer carries it back in ``X-Request-ID``, error documents in their ``request_id`` member, and the
log line as ``request_id``, so that a client's report of an error finds its line in the log. The
line holds the method, the route's template, the path with its query redacted (``logs.redact_query``:
a token sent in a URL never reaches the log; headers and bodies are never logged), the status and
the time taken.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Sequence

from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from neardup.service.logs import redact_query
from neardup.service.metrics import Metrics

REQUEST_LOGGER = "neardup.request"
HEADER = b"x-request-id"
# A client's own request id is taken when it is this plain: anything else could forge log lines.
_CLIENT_ID = re.compile(rb"[A-Za-z0-9._:-]{1,64}")
# What a request that matched no route is counted as (paths are not labels: any client could make
# as many series as it likes).
UNMATCHED = "unmatched"

log = logging.getLogger(REQUEST_LOGGER)


def request_id(scope: Scope) -> str | None:
    """The id ``RequestLog`` gave the request of ``scope``, if any."""
    state = scope.get("state")
    found = state.get("request_id") if isinstance(state, dict) else None
    return found if isinstance(found, str) else None


def _new_id(scope: Scope) -> str:
    for name, value in scope.get("headers", ()):
        if name == HEADER and _CLIENT_ID.fullmatch(value):
            return str(value.decode("ascii"))
    return uuid.uuid4().hex


class RequestLog:
    """ASGI middleware, outermost: id, figures and log line of every HTTP request."""

    def __init__(
        self, app: ASGIApp, metrics: Metrics, routes: Sequence[BaseRoute], *, log_lines: bool
    ) -> None:
        """Wrap ``app``, whose routes (each with a ``path`` template) are ``routes``; ``log_lines``:
        write one line a request to the ``neardup.request`` logger."""
        self.app, self.metrics, self.routes, self.log_lines = app, metrics, routes, log_lines

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Run the request, then count it (and log it)."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = _new_id(scope)
        state = scope.setdefault("state", {})
        state["request_id"] = rid
        started = time.perf_counter()
        status = 500  # unless an answer starts: the server's error page says 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                headers = [h for h in message.get("headers", ()) if h[0].lower() != HEADER]
                message = {**message, "headers": [*headers, (HEADER, rid.encode("ascii"))]}
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            seconds = time.perf_counter() - started
            try:
                route = self._route(scope)
                self.metrics.request(route, scope["method"], status, seconds)
                if self.log_lines:
                    self._log(scope, rid, route, status, seconds)
            except Exception:  # counting must never cost a request its answer
                log.exception("counting request %s failed", rid)

    def _route(self, scope: Scope) -> str:
        """The template of the route the request's method and path match (the query's fast path
        and the body limit answer before routing, so it is found here, not in the scope)."""
        for route in self.routes:
            path = getattr(route, "path", None)
            if isinstance(path, str) and route.matches(scope)[0] == Match.FULL:
                return path
        return UNMATCHED

    @staticmethod
    def _log(scope: Scope, rid: str, route: str, status: int, seconds: float) -> None:
        target = scope.get("path", "")
        query = scope.get("query_string", b"")
        if query:
            target = redact_query(f"{target}?{query.decode('latin-1')}")
        client = scope.get("client")
        log.info(
            "%s %s %d",
            scope["method"],
            target,
            status,
            extra={
                "request_id": rid,
                "method": scope["method"],
                "route": route,
                "path": target,
                "status": status,
                "duration_ms": round(seconds * 1000, 3),
                "client": client[0] if client else None,
            },
        )
