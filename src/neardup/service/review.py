"""The review pages under /review: clusters, members, a pair side by side, search, and labels.

Server-rendered (Jinja2, autoescaped). A page takes the bearer token header, or the session cookie
that the login form gives for a token: HttpOnly, SameSite=Strict, its secret stored only as a
hash. Forms sent with the cookie carry the session's CSRF value; the login form a double-submit one.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlencode

import jinja2
from fastapi import APIRouter, Depends, FastAPI, Form, Request, Security
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.security import HTTPAuthorizationCredentials

from neardup.credentials import digest, new_session
from neardup.service.auth import ANYONE, SESSION_COOKIE, Principal, bearer, context, from_session, from_token
from neardup.service.diff import side_by_side
from neardup.service.problems import ProblemError

router = APIRouter(prefix="/review", include_in_schema=False)
LOGIN_CSRF_COOKIE = "nd_login_csrf"
# Clusters per page of the review list, and ids shown per cluster there.
CLUSTERS_PER_PAGE, IDS_SHOWN = 25, 6
# Members and pairs listed on a cluster's page.
MEMBERS_SHOWN, PAIRS_SHOWN = 200, 200

_env = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
)
_env.filters["q"] = lambda params: urlencode(params)


def _style_hash() -> str:
    """The CSP source of the pages' one inline style sheet (base.html's <style>), by its SHA-256:
    the pages then run no script and no style but that one, whatever a stored text holds."""
    base = (Path(__file__).parent / "templates" / "base.html").read_text(encoding="utf-8")
    found = re.search(r"<style>(.*?)</style>", base, re.DOTALL)
    if found is None:
        return "'none'"
    digest_ = hashlib.sha256(found.group(1).encode("utf-8")).digest()
    return f"'sha256-{base64.b64encode(digest_).decode()}'"


# Every page: no framing (clickjacking a label form), no scripts, nothing fetched from elsewhere,
# forms posted only here.
PAGE_HEADERS = {
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": (
        f"default-src 'none'; style-src {_style_hash()}; img-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
}


class LoginRequiredError(Exception):
    """A browser without a session: send it to the login form."""

    def __init__(self, next_path: str) -> None:
        """``next_path``: where to go back after logging in."""
        super().__init__(next_path)
        self.next_path = next_path


def install(app: FastAPI) -> None:
    """Redirect a browser without a session to the login form."""

    @app.exception_handler(LoginRequiredError)
    async def to_login(request: Request, exc: LoginRequiredError) -> Response:
        return RedirectResponse("/review/login?" + urlencode({"next": exc.next_path}), status_code=303)


def _page(request: Request, template: str, status: int = 200, **values: Any) -> HTMLResponse:
    html = _env.get_template(template).render(request=request, **values)
    return HTMLResponse(html, status_code=status, headers=PAGE_HEADERS)


def _no_nul(value: str, what: str) -> str:
    """``value``, or 422: PostgreSQL's text holds no NUL, so a lookup by it would fail in the database."""
    if "\x00" in value:
        where = {"location": ["query", what.strip("'")], "detail": "contains a NUL character"}
        raise ProblemError(422, f"{what} contains a NUL character", extra={"errors": [where]})
    return value


def reviewer(needed: str) -> Any:
    """A dependency: who is reviewing (bearer token or session), allowed ``needed`` on the
    ``collection`` of the path."""

    def dependency(
        request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Security(bearer)]
    ) -> Principal:
        ctx = context(request)
        if not ctx.auth:
            return ANYONE
        if credentials is not None:
            who = from_token(ctx, credentials.credentials)
        else:
            cookie = request.cookies.get(SESSION_COOKIE)
            found = from_session(ctx, cookie) if cookie else None
            if found is None:
                if request.method == "GET":
                    raise LoginRequiredError(
                        str(request.url.path) + (f"?{request.url.query}" if request.url.query else "")
                    )
                raise ProblemError(401, "log in again: the session is unknown or expired")
            who = found
        who.require(needed, request.path_params.get("collection"))
        return who

    return dependency


def _check_csrf(who: Principal, sent: str) -> None:
    """Forms sent with a session cookie must carry its CSRF value (a header token needs none)."""
    if who.csrf is not None and not hmac.compare_digest(who.csrf.encode(), sent.encode()):
        raise ProblemError(403, "the form is stale or forged (CSRF check failed); reload the page")


# -- login ----------------------------------------------------------------------------------------


def _safe_next(path: str) -> str:
    return path if path.startswith("/review/") and not path.startswith("//") else "/review/"


@router.get("/login", response_class=HTMLResponse)
def login_form(request: Request, next: str = "/review/") -> HTMLResponse:
    """The form that exchanges a token for a session cookie."""
    csrf = secrets.token_urlsafe(16)
    response = _page(request, "login.html", next=_safe_next(next), csrf=csrf, error=None)
    response.set_cookie(
        LOGIN_CSRF_COOKIE,
        csrf,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/review",
    )
    return response


@router.post("/login", response_class=HTMLResponse)
def login(
    request: Request,
    token: Annotated[str, Form()],
    csrf: Annotated[str, Form()],
    next: Annotated[str, Form()] = "/review/",
) -> Response:
    """Check the token and the form's CSRF value; set the session cookie."""
    ctx = context(request)
    expected = request.cookies.get(LOGIN_CSRF_COOKIE, "")
    if not expected or not hmac.compare_digest(expected.encode(), csrf.encode()):
        raise ProblemError(403, "the login form is stale or forged (CSRF check failed); reload it")
    try:
        who = from_token(ctx, token.strip())
    except ProblemError:
        fresh = secrets.token_urlsafe(16)
        response: Response = _page(
            request, "login.html", 401, next=_safe_next(next), csrf=fresh, error="That token is not valid."
        )
        response.set_cookie(LOGIN_CSRF_COOKIE, fresh, httponly=True, samesite="strict", path="/review")
        return response
    secret, session_csrf = new_session()
    ctx.db.tokens.open_session(digest(secret), who.token_id or 0, session_csrf, ctx.settings.session_seconds)
    response = RedirectResponse(_safe_next(next), status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        secret,
        max_age=ctx.settings.session_seconds,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/review",
    )
    response.delete_cookie(LOGIN_CSRF_COOKIE, path="/review")
    return response


@router.post("/logout")
def logout(request: Request, csrf: Annotated[str, Form()] = "") -> Response:
    """End the session."""
    ctx = context(request)
    cookie = request.cookies.get(SESSION_COOKIE)
    if cookie:
        who = from_session(ctx, cookie)
        if who is not None:
            _check_csrf(who, csrf)
        ctx.db.tokens.close_session(digest(cookie))
    response = RedirectResponse("/review/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/review")
    return response


@router.get("/", response_class=HTMLResponse)
def index_page(request: Request, who: Annotated[Principal, Depends(reviewer("read"))]) -> HTMLResponse:
    """The collections this token may review, with what their labels say of the threshold."""
    db = context(request).db
    rows = db.collections(counts=False)
    names = [c.name for c in rows if who.collection is None or who.collection == c.name]
    advice = {n: db.labels.advise(n) for n in names}
    return _page(request, "home.html", who=who, names=names, advice=advice)


# -- a collection ---------------------------------------------------------------------------------


@router.get("/{collection}", response_class=HTMLResponse)
def clusters_page(
    request: Request,
    collection: str,
    who: Annotated[Principal, Depends(reviewer("read"))],
    size: int | None = None,
    after: str | None = None,
) -> HTMLResponse:
    """The clusters, largest first, a page at a time."""
    key = (size, _no_nul(after, "'after'")) if size is not None and after is not None else None
    here = context(request).db.review(collection)
    rows = here.largest_clusters(key, CLUSTERS_PER_PAGE + 1, IDS_SHOWN)
    more = len(rows) > CLUSTERS_PER_PAGE
    rows = rows[:CLUSTERS_PER_PAGE]
    following = {"size": rows[-1].size, "after": rows[-1].representative} if more else None
    return _page(
        request,
        "clusters.html",
        who=who,
        name=here.name,
        threshold=here.threshold,
        clusters=rows,
        following=following,
    )


@router.get("/{collection}/cluster/{cluster}", response_class=HTMLResponse)
def cluster_page(
    request: Request, collection: str, cluster: int, who: Annotated[Principal, Depends(reviewer("read"))]
) -> HTMLResponse:
    """A cluster's members with their metadata, and its pairs, most similar first."""
    here = context(request).db.review(collection)
    members = here.cluster_members(cluster, MEMBERS_SHOWN + 1)
    pairs = here.cluster_pairs(cluster, PAIRS_SHOWN + 1)
    if not members:
        raise ProblemError(404, f"no cluster {cluster} in collection {here.name!r}")
    return _page(
        request,
        "cluster.html",
        who=who,
        name=here.name,
        cluster=cluster,
        members=members[:MEMBERS_SHOWN],
        more_members=len(members) > MEMBERS_SHOWN,
        pairs=pairs[:PAIRS_SHOWN],
        more_pairs=len(pairs) > PAIRS_SHOWN,
    )


@router.get("/{collection}/pair", response_class=HTMLResponse)
def pair_page(
    request: Request,
    collection: str,
    a: str,
    b: str,
    who: Annotated[Principal, Depends(reviewer("read"))],
    saved: bool = False,
) -> HTMLResponse:
    """Two documents side by side: shared passages marked, the similarity and how it was measured."""
    _no_nul(a, "'a'")
    _no_nul(b, "'b'")
    db = context(request).db
    here = db.review(collection)
    doc_a, doc_b = here.document(a), here.document(b)
    if doc_a is None or doc_b is None:
        raise ProblemError(
            404, f"no document {(a if doc_a is None else b)!r:.200} in collection {here.name!r}"
        )
    stored = here.pair(a, b) if a != b else None
    label = db.labels.get(here.name, a, b) if a != b else None
    view = side_by_side(doc_a.text or "", doc_b.text or "") if doc_a.text and doc_b.text else None
    return _page(
        request,
        "pair.html",
        who=who,
        name=here.name,
        threshold=here.threshold,
        a=doc_a,
        b=doc_b,
        stored=stored,
        view=view,
        label=label,
        saved=saved,
        can_label=who.access in ("write", "admin"),
    )


@router.post("/{collection}/label")
def label_pair(
    request: Request,
    collection: str,
    a: Annotated[str, Form()],
    b: Annotated[str, Form()],
    label: Annotated[str, Form()],
    who: Annotated[Principal, Depends(reviewer("write"))],
    note: Annotated[str, Form()] = "",
    csrf: Annotated[str, Form()] = "",
) -> Response:
    """Label a pair (write); back to the pair's page."""
    _check_csrf(who, csrf)
    if "\x00" in a + b + note:
        raise ProblemError(422, "the form holds a NUL character")
    context(request).db.labels.put(collection, a, b, label, note, who.token_id, who.name)
    target = f"/review/{collection}/pair?" + urlencode({"a": a, "b": b, "saved": "true"})
    return RedirectResponse(target, status_code=303)


@router.get("/{collection}/document", response_class=HTMLResponse)
def document_page(
    request: Request, collection: str, id: str, who: Annotated[Principal, Depends(reviewer("read"))]
) -> HTMLResponse:
    """Search by id: the document, its metadata and its near-duplicates."""
    here = context(request).db.review(collection)
    doc = here.document(id) if "\x00" not in id else None
    found = here.document_pairs(id) if doc is not None else []
    status = 200 if doc is not None else 404
    return _page(request, "document.html", status, who=who, name=here.name, id=id, doc=doc, pairs=found)


@router.post("/{collection}/search", response_class=HTMLResponse)
def search(
    request: Request,
    collection: str,
    text: Annotated[str, Form()],
    who: Annotated[Principal, Depends(reviewer("read"))],
    csrf: Annotated[str, Form()] = "",
) -> HTMLResponse:
    """Paste a text: the stored documents similar to it, best first."""
    _check_csrf(who, csrf)
    with context(request).indexes.index(collection) as index:
        hits = index.query(text, limit=100)
    return _page(request, "matches.html", who=who, name=collection, text=text, matches=hits)
