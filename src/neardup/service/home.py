"""The service's front door: ``/`` points a browser to the review pages and the API documentation
(and says how to make a first token), an API client to the same places as JSON; and the icon
browsers ask for on every page."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, JSONResponse, Response

from neardup.errors import NeardupError
from neardup.service import html
from neardup.service.auth import context

router = APIRouter(include_in_schema=False)
_ICON = Path(__file__).parent / "static" / "favicon.svg"
# Where each part of the service is, as the landing page and its JSON say.
PLACES = {"review": "/review/", "docs": "/docs", "openapi": "/openapi.json", "health": "/healthz"}
FIRST_TOKEN = "neardup token create --scope admin --name me"


def _tokens_exist(request: Request) -> bool | None:
    """Whether a live token exists; None when that cannot be read now (the database is down)."""
    try:
        return any(t.revoked_at is None for t in context(request).db.tokens.list())
    except NeardupError:
        return None


@router.get("/")
def landing(request: Request) -> Response:
    """Where the review pages and the API documentation are, and, while no token exists, how to make one."""
    ctx = context(request)
    tokens = _tokens_exist(request) if ctx.auth else True
    if not html.wants_html(request):
        body: dict[str, Any] = {**PLACES, "auth": ctx.auth}
        if tokens is False:
            body["first_token"] = FIRST_TOKEN
        return JSONResponse(body)
    return html.page(
        request, "landing.html", places=PLACES, auth=ctx.auth, tokens=tokens, first_token=FIRST_TOKEN
    )


@router.get("/favicon.svg")
@router.get("/favicon.ico")
def favicon() -> FileResponse:
    """The service's icon (an SVG: browsers take one for /favicon.ico too)."""
    return FileResponse(_ICON, media_type="image/svg+xml", headers={"Cache-Control": "public, max-age=86400"})
