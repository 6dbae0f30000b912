"""The API documentation page at /docs: Swagger UI over the service's OpenAPI document, from files
shipped in a Python package (fastapi-offline, in the ``service`` extra), never from a CDN.

The page's Content-Security-Policy allows scripts, styles and images from this server only, and
requests to it (the OpenAPI document, "Try it out"); no inline script runs.
"""

from __future__ import annotations

from importlib import util
from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse, HTMLResponse

from neardup.service.html import TEMPLATES
from neardup.service.problems import ProblemError

router = APIRouter(include_in_schema=False)
_OURS = Path(__file__).parent / "static"
# The files the page loads, and where each comes from (the package's or ours).
_MEDIA = {".js": "text/javascript", ".css": "text/css", ".png": "image/png"}
_PACKAGED = ("swagger-ui-bundle.js", "swagger-ui.css", "favicon.png")
_OWN = ("docs-init.js", "docs.css")

HEADERS = {
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; font-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
}


def _packaged() -> Path | None:
    """fastapi-offline's folder of Swagger UI files, or None when it is not installed."""
    spec = util.find_spec("fastapi_offline")
    if spec is None or spec.origin is None:
        return None
    folder = Path(spec.origin).parent / "static"
    return folder if folder.is_dir() else None


@router.get("/docs", response_class=HTMLResponse)
def docs_page() -> HTMLResponse:
    """Swagger UI over /openapi.json."""
    if _packaged() is None:
        raise ProblemError(
            404, "the API documentation page needs fastapi-offline: pip install 'neardup[service]'"
        )
    html = (TEMPLATES / "docs.html").read_text(encoding="utf-8")
    return HTMLResponse(html, headers={**HEADERS, "Cache-Control": "no-cache"})


@router.get("/docs/assets/{name}")
def docs_asset(name: str) -> FileResponse:
    """One of the page's files (a fixed list: nothing else is served from here)."""
    folder = _OURS if name in _OWN else _packaged() if name in _PACKAGED else None
    if folder is None:
        raise ProblemError(404, f"no documentation asset {name!r:.80}")
    media = _MEDIA[Path(name).suffix]
    # Immutable for a day: the files change only with an upgrade of neardup or fastapi-offline.
    headers = {**HEADERS, "Cache-Control": "public, max-age=86400"}
    return FileResponse(folder / name, media_type=media, headers=headers)
