"""The review pages under /review: clusters, members, a pair side by side, search, and labels.

Server-rendered (Jinja2, autoescaped). A page takes the bearer token header, or the session cookie
that the login form gives for a token: HttpOnly, SameSite=Strict, its secret stored only as a
hash. Forms sent with the cookie carry the session's CSRF value; the login form a double-submit one.
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import replace
from typing import Annotated, Any, Literal
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, FastAPI, Form, Query, Request, Security
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.security import HTTPAuthorizationCredentials

from neardup.core.containment import containment
from neardup.credentials import digest, new_session
from neardup.database import Database, DocumentRow, PairQuery, PairRow, Review
from neardup.service.auth import ANYONE, SESSION_COOKIE, Principal, bearer, context, from_session, from_token
from neardup.service.diff import align
from neardup.service.html import page as _page
from neardup.service.problems import ProblemError

router = APIRouter(prefix="/review", include_in_schema=False)
LOGIN_CSRF_COOKIE = "nd_login_csrf"
# Clusters per page of the review list, and ids shown per cluster there.
CLUSTERS_PER_PAGE, IDS_SHOWN = 25, 6
# Members and pairs listed on a cluster's page; pairs a page of the pairs list.
MEMBERS_SHOWN, PAIRS_SHOWN, PAIRS_PER_PAGE = 200, 200, 50
# Matches the pasted-text search shows.
SEARCH_MATCHES = 100
# Characters of each member's text compared with the representative's on a cluster's page, and
# of the words shown where they part.
OPENING_CHARS, PARTING_CHARS = 20_000, 60
Similarity = Annotated[float, Query(ge=0.0, le=1.0)]
LabelFilter = Literal["all", "unlabelled", "labelled", "duplicate", "not_duplicate"]


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
        request.state.reviewer = who  # an error page of this request keeps the session's Log out
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
    """The collections this token may review, each with its counts and what its labels say of
    the threshold."""
    db = context(request).db
    rows = db.collections(counts=False)
    names = [c.name for c in rows if who.collection is None or who.collection == c.name]
    counts = db.review_counts(names)
    advice = {n: db.labels.advise(n) for n in names}
    return _page(request, "home.html", who=who, names=names, counts=counts, advice=advice)


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
        titles=here.titles([c.representative for c in rows]),
        counts=here.counts(),
        following=following,
    )


@router.get("/{collection}/cluster/{cluster}", response_class=HTMLResponse)
def cluster_page(
    request: Request, collection: str, cluster: int, who: Annotated[Principal, Depends(reviewer("read"))]
) -> HTMLResponse:
    """A cluster's members (with titles and metadata), then its pairs, most similar first, each
    with its label."""
    here = context(request).db.review(collection)
    members = here.cluster_members(cluster, MEMBERS_SHOWN + 1)
    if not members:
        raise ProblemError(404, f"no cluster {cluster} in collection {here.name!r}")
    pairs = here.cluster_pairs(cluster, PAIRS_SHOWN + 1)[:PAIRS_SHOWN]
    shown = [m for m, _ in members[:MEMBERS_SHOWN]]
    representative = here.cluster_representative(cluster)
    ids = shown + [x for a, b, _, _ in pairs for x in (a, b)] + [representative or ""]
    return _page(
        request,
        "cluster.html",
        who=who,
        name=here.name,
        cluster=cluster,
        dense=here.dense_size(cluster),
        members=members[:MEMBERS_SHOWN],
        representative=representative,
        parting=_parting(here.openings([*shown, representative or ""], OPENING_CHARS), representative),
        more_members=len(members) > MEMBERS_SHOWN,
        pairs=pairs,
        more_pairs=len(pairs) >= PAIRS_SHOWN,
        labels=here.labels_of([(a, b) for a, b, _, _ in pairs]),
        titles=here.titles(ids),
    )


def _parting(openings: dict[str, str], representative: str | None) -> dict[str, str]:
    """For each member with a stored text, how it differs from the representative's, in a few
    words: the same text, where it stops or goes on, or the words where it first parts from it
    (near-copies share their opening, so their titles alone tell them apart poorly)."""
    kept = openings.get(representative or "")
    if kept is None:
        return {}
    out: dict[str, str] = {}
    for doc_id, text in openings.items():
        if doc_id == representative:
            continue
        same = next(
            (i for i, (x, y) in enumerate(zip(text, kept, strict=False)) if x != y), min(len(text), len(kept))
        )
        start = text.rfind(" ", 0, same) + 1  # from the word it parts in
        if text == kept:
            out[doc_id] = "the same text"
        elif same == len(text):
            tail = " ".join(text[-PARTING_CHARS:].split())
            out[doc_id] = f"stops at “…{tail}”, where the representative goes on"
        elif same == len(kept):
            out[doc_id] = f"goes on: “{_snippet(text, start)}”"
        else:
            out[doc_id] = f"parts from it at “{_snippet(text, start)}”"
    return out


def _snippet(text: str, start: int) -> str:
    words = " ".join(text[start : start + PARTING_CHARS].split())
    return words + ("…" if start + PARTING_CHARS < len(text) else "")


def _pair_view(db: Database, here: Review, doc_a: DocumentRow, doc_b: DocumentRow) -> dict[str, Any]:
    """What the pair page and the queue show of two documents: the stored similarity, the texts
    aligned, how much of each the other contains, and the label."""
    a, b = doc_a.id, doc_b.id
    both = doc_a.text is not None and doc_b.text is not None
    params = here.params() if both else None
    contained = (
        containment(doc_a.text or "", doc_b.text or "", params.shingle, params.k, params.normalization)
        if params is not None
        else None
    )
    return {
        "threshold": here.threshold,
        "a": doc_a,
        "b": doc_b,
        "stored": here.pair(a, b) if a != b else None,
        "view": align(doc_a.text or "", doc_b.text or "") if both else None,
        "contained": contained,
        "shingling": f"{params.shingle} {params.k}-grams" if params is not None else "",
        "label": db.labels.get(here.name, a, b) if a != b else None,
    }


def _documents(here: Review, a: str, b: str) -> tuple[DocumentRow, DocumentRow]:
    doc_a, doc_b = here.document(_no_nul(a, "'a'")), here.document(_no_nul(b, "'b'"))
    if doc_a is None or doc_b is None:
        raise ProblemError(
            404, f"no document {(a if doc_a is None else b)!r:.200} in collection {here.name!r}"
        )
    return doc_a, doc_b


@router.get("/{collection}/pair", response_class=HTMLResponse)
def pair_page(
    request: Request,
    collection: str,
    a: str,
    b: str,
    who: Annotated[Principal, Depends(reviewer("read"))],
    saved: bool = False,
) -> HTMLResponse:
    """Two documents aligned passage by passage, what differs marked; the similarity, how it was
    measured, and how much of each the other contains; the label form."""
    db = context(request).db
    here = db.review(collection)
    doc_a, doc_b = _documents(here, a, b)
    return _page(
        request,
        "pair.html",
        who=who,
        name=here.name,
        saved=saved,
        can_label=who.access in ("write", "admin"),
        back="",
        **_pair_view(db, here, doc_a, doc_b),
    )


def _key(k: float | None, a: str | None, b: str | None) -> tuple[float, str, str] | None:
    """The listing key (sort key, id_a, id_b) of a page link, or None when it names none."""
    if k is None or a is None or b is None:
        return None
    return k, _no_nul(a, "'a'"), _no_nul(b, "'b'")


def _queue_url(name: str, row: PairRow, go: str, **extra: str) -> str:
    return f"/review/{name}/queue?" + urlencode(
        {"k": repr(row.key), "a": row.id_a, "b": row.id_b, "go": go, **extra}
    )


@router.get("/{collection}/queue", response_class=HTMLResponse)
def queue_page(
    request: Request,
    collection: str,
    who: Annotated[Principal, Depends(reviewer("read"))],
    k: float | None = None,
    a: str | None = None,
    b: str | None = None,
    go: Literal["here", "next", "prev"] = "here",
    last_a: str | None = None,
    last_b: str | None = None,
) -> HTMLResponse:
    """The review queue: one unlabelled pair at a time, nearest the threshold first (the pairs a
    reviewer is least sure of), with previous and next, and how many are left."""
    db = context(request).db
    here = db.review(collection)
    key = _key(k, a, b)
    first = PairQuery("queue", "unlabelled")
    asked = replace(first, after=key, descending=go == "prev", inclusive=go == "here")
    # Before the first: the first.
    current, before, left = here.queue(asked, first if key is not None and go == "prev" else None)
    last = None
    if last_a is not None and last_b is not None and "\x00" not in last_a + last_b:
        last = db.labels.get(here.name, last_a, last_b)
    values: dict[str, Any] = {"current": current, "left": left, "last": last, "position": 0}
    values["threshold"] = here.threshold
    if current is not None:
        values["position"] = before + 1
        values["previous_url"] = _queue_url(here.name, current, "prev")
        values["next_url"] = _queue_url(here.name, current, "next")
        values["after_label_url"] = _queue_url(
            here.name, current, "next", last_a=current.id_a, last_b=current.id_b
        )
        doc_a, doc_b = _documents(here, current.id_a, current.id_b)
        values.update(_pair_view(db, here, doc_a, doc_b))
    return _page(
        request,
        "queue.html",
        who=who,
        name=here.name,
        at_end=key is not None and current is None,
        can_label=who.access in ("write", "admin"),
        **values,
    )


@router.get("/{collection}/pairs", response_class=HTMLResponse)
def pairs_list(
    request: Request,
    collection: str,
    who: Annotated[Principal, Depends(reviewer("read"))],
    labels: LabelFilter = "all",
    low: Similarity = 0.0,
    high: Similarity = 1.0,
    order: Literal["desc", "asc", "queue"] = "desc",
    k: float | None = None,
    a: str | None = None,
    b: str | None = None,
) -> HTMLResponse:
    """Pairs of documents sorted by similarity (or nearest the threshold first), filtered by label
    and by a similarity range, a page at a time."""
    here = context(request).db.review(collection)
    key = _key(k, a, b)
    asked = PairQuery("queue" if order == "queue" else "similarity", labels, low, high, key, order == "desc")
    rows = here.pair_rows(asked, PAIRS_PER_PAGE + 1)
    filters = {"labels": labels, "low": low, "high": high, "order": order}
    following = None
    if len(rows) > PAIRS_PER_PAGE:
        rows = rows[:PAIRS_PER_PAGE]
        last = rows[-1]
        following = {**filters, "k": repr(last.key), "a": last.id_a, "b": last.id_b}
    return _page(
        request,
        "pairs.html",
        who=who,
        name=here.name,
        threshold=here.threshold,
        rows=rows,
        titles=here.titles([x for r in rows for x in (r.id_a, r.id_b)]),
        filters=filters,
        following=following,
        paged=key is not None,
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
    next: Annotated[str, Form()] = "",
) -> Response:
    """Label a pair (write); then to ``next`` (a review page: the queue's next pair), or back to
    the pair's page."""
    _check_csrf(who, csrf)
    if "\x00" in a + b + note:
        raise ProblemError(422, "the form holds a NUL character")
    context(request).db.labels.put(collection, a, b, label, note, who.token_id, who.name)
    target = f"/review/{collection}/pair?" + urlencode({"a": a, "b": b, "saved": "true"})
    return RedirectResponse(_safe_next(next) if next else target, status_code=303)


@router.get("/{collection}/document", response_class=HTMLResponse)
def document_page(
    request: Request, collection: str, id: str, who: Annotated[Principal, Depends(reviewer("read"))]
) -> HTMLResponse:
    """Search by id: the document, its metadata and its near-duplicates with their labels."""
    here = context(request).db.review(collection)
    doc = here.document(id) if "\x00" not in id else None
    found = here.document_pairs(id) if doc is not None else []
    status = 200 if doc is not None else 404
    return _page(
        request,
        "document.html",
        status,
        who=who,
        name=here.name,
        id=id,
        doc=doc,
        pairs=found,
        titles=here.titles([other for other, _, _ in found]),
        labels=here.labels_of([(id, other) for other, _, _ in found]),
    )


@router.post("/{collection}/search", response_class=HTMLResponse)
def search(
    request: Request,
    collection: str,
    text: Annotated[str, Form()],
    who: Annotated[Principal, Depends(reviewer("read"))],
    csrf: Annotated[str, Form()] = "",
) -> HTMLResponse:
    """Paste a text: the stored documents similar to it, best first; in a collection that keeps
    its neighbours, the nearest ones down to its neighbour floor, below the threshold too."""
    _check_csrf(who, csrf)
    with context(request).indexes.index(collection) as index:
        nearest = index.params.neighbours
        hits = index.query(text, k=SEARCH_MATCHES) if nearest else index.query(text, limit=SEARCH_MATCHES)
        floor, threshold = index.params.neighbour_floor, index.threshold
    titles = context(request).db.review(collection).titles([doc_id for doc_id, _ in hits])
    return _page(
        request,
        "matches.html",
        who=who,
        name=collection,
        text=text,
        matches=hits,
        titles=titles,
        nearest=nearest,
        floor=floor,
        threshold=threshold,
    )
