"""Server-rendered pages: the Jinja2 environment, the security headers, and whether a request
wants HTML (a browser) or JSON (an API client), by its Accept header."""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import jinja2
from fastapi import Request
from fastapi.responses import HTMLResponse

TEMPLATES = Path(__file__).parent / "templates"

env = jinja2.Environment(
    loader=jinja2.FileSystemLoader(TEMPLATES),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
)
env.filters["q"] = lambda params: urlencode(params)


def _inline_hash(tag: str) -> str:
    """The CSP source of base.html's one inline ``tag`` (style or script), by its SHA-256: the
    pages then run no script and no style but those, whatever a stored text holds."""
    base = (TEMPLATES / "base.html").read_text(encoding="utf-8")
    found = re.search(rf"<{tag}>(.*?)</{tag}>", base, re.DOTALL)
    if found is None:
        return "'none'"
    digest = hashlib.sha256(found.group(1).encode("utf-8")).digest()
    return f"'sha256-{base64.b64encode(digest).decode()}'"


# Every page: no framing (clickjacking a label form), no script or style but base.html's own
# (the keyboard shortcuts), nothing fetched from elsewhere, forms posted only here.
PAGE_HEADERS = {
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": (
        f"default-src 'none'; style-src {_inline_hash('style')}; script-src {_inline_hash('script')}; "
        "img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
}


def page(request: Request, template: str, status: int = 200, **values: Any) -> HTMLResponse:
    """``template`` rendered with ``values``, with the pages' security headers."""
    html = env.get_template(template).render(request=request, **values)
    return HTMLResponse(html, status_code=status, headers=PAGE_HEADERS)


_HTML_TYPES = ("text/html", "application/xhtml+xml")
_JSON_TYPES = ("application/json", "application/problem+json")


def _quality(params: str) -> float:
    for param in params.split(";"):
        name, _, value = param.strip().partition("=")
        if name.strip().lower() == "q":
            try:
                return min(max(float(value), 0.0), 1.0)
            except ValueError:
                return 0.0
    return 1.0


def wants_html(request: Request) -> bool:
    """True when the Accept header asks for HTML at least as much as for JSON (a browser's does);
    an API client that sends none, or ``*/*``, gets JSON."""
    best_html = best_json = 0.0
    for part in request.headers.get("accept", "").split(",")[:50]:
        media, _, params = part.partition(";")
        media = media.strip().lower()
        if media in _HTML_TYPES:
            best_html = max(best_html, _quality(params))
        elif media in _JSON_TYPES:
            best_json = max(best_json, _quality(params))
    return best_html > 0 and best_html >= best_json
