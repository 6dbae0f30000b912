"""The ASGI application: the JSON API, the review pages, problem documents and a body size limit."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from neardup import __version__
from neardup.service import docs, home, logs, problems, review, routes
from neardup.service.arenas import cap_arenas, fix_mmap_threshold
from neardup.service.auth import context
from neardup.service.bodies import BodyTooLargeError, read_body, replay
from neardup.service.context import DEFAULT_MAX_BODY, Context, Settings
from neardup.service.fast_query import FastQuery
from neardup.service.longpoll import DEFAULT_MAX_LONGPOLLS
from neardup.service.metrics import CONTENT_TYPE
from neardup.service.requests import RequestLog


class BodyLimit:
    """Refuse request bodies over ``max_bytes`` with 413, before the application reads them.

    A declared Content-Length is checked at once; a chunked body is read up to the limit and
    handed on only when it fits.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        """Wrap ``app``."""
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check the size, then run the application."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None:
            if not length.isdigit() or int(length) > self.max_bytes:
                await self._refuse(scope, send)
                return
            await self.app(scope, receive, send)
            return
        try:
            body = await read_body(receive, self.max_bytes)
        except BodyTooLargeError:
            await self._refuse(scope, send)
            return
        if body is not None:  # else the client left: nobody to answer
            await self.app(scope, replay(body, receive), send)

    async def _refuse(self, scope: Scope, send: Send) -> None:
        problem = problems.ProblemError(413, f"the request body is larger than {self.max_bytes:,} bytes")
        await problem.response(Request(scope))(scope, _no_body, send)


async def _no_body() -> Message:
    return {"type": "http.disconnect"}


# The API's areas, in the order /docs lists them; every route is tagged with one.
API_AREAS = [
    {"name": "collections", "description": "Create, list, read and drop collections."},
    {"name": "documents", "description": "Add, read and remove documents (a request is one transaction)."},
    {"name": "queries", "description": "Stored near-duplicates of a text (query) or of records (check)."},
    {"name": "listings", "description": "Every pair and every cluster, a page at a time or as NDJSON."},
    {"name": "changes", "description": "The changes feed: writes numbered in commit order."},
    {"name": "labels", "description": "People's verdicts on pairs."},
    {"name": "health", "description": "Whether the database answers (no token needed)."},
]


def create_app(settings: Settings) -> FastAPI:
    """The service for one database (every collection of its schema)."""
    cap_arenas()  # before the request threads exist: each would take an arena of its own
    fix_mmap_threshold()  # a request's large arrays go back to the system when freed
    ctx = Context(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        logs.install()
        yield
        ctx.close()

    app = FastAPI(
        title="neardup",
        version=__version__,
        summary="Near-duplicate documents in PostgreSQL: add, query, check, list pairs and clusters.",
        lifespan=lifespan,
        openapi_tags=API_AREAS,
        docs_url=None,
        redoc_url=None,
    )
    app.state.ctx = ctx
    problems.install(app)
    review.install(app)
    app.include_router(routes.router)
    app.include_router(review.router)
    app.include_router(docs.router)
    app.include_router(home.router)
    app.add_middleware(FastQuery, ctx=ctx)  # inside the body limit: added first, it wraps less
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)

    @app.get("/metrics", include_in_schema=False)
    async def metrics(request: Request) -> Response:
        """The service's figures in the Prometheus text format; needs no token, as /healthz (it
        names no collection, document or token). On the event loop, where the worker threads'
        figures are read."""
        return Response(context(request).metrics.exposition(), media_type=CONTENT_TYPE)

    known = [r for router in (routes.router, review.router, docs.router, home.router) for r in router.routes]
    known += [r for r in app.routes if isinstance(getattr(r, "path", None), str)]
    # Outermost: every request gets its id before anything can answer it, and is counted.
    app.add_middleware(RequestLog, metrics=ctx.metrics, routes=known, log_lines=settings.log_format == "json")
    return app


def app_from_environment() -> Any:
    """The app for ``uvicorn --factory neardup.service.app:app_from_environment`` (workers > 1):
    settings from NEARDUP_SERVE_* variables that ``neardup serve`` sets."""
    import os

    return create_app(
        Settings(
            url=os.environ["NEARDUP_SERVE_URL"],
            schema=os.environ.get("NEARDUP_SERVE_SCHEMA", "neardup"),
            auth=os.environ.get("NEARDUP_SERVE_AUTH", "1") == "1",
            max_body_bytes=int(os.environ.get("NEARDUP_SERVE_MAX_BODY", str(DEFAULT_MAX_BODY))),
            max_longpolls=int(os.environ.get("NEARDUP_SERVE_MAX_LONGPOLLS", str(DEFAULT_MAX_LONGPOLLS))),
            log_format=os.environ.get("NEARDUP_SERVE_LOG_FORMAT", "text"),
            embedded_data_dir=os.environ.get("NEARDUP_SERVE_EMBEDDED_DIR") or None,
        )
    )
