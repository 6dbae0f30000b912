"""The JSON API under /v1 and /healthz: parse the request, call the Index or the Database, format."""

from __future__ import annotations

import base64
import binascii
import itertools
import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Any, Literal, cast

from fastapi import APIRouter, Depends, Path, Request, Response
from fastapi import Query as QueryParam
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from neardup.errors import CollectionNotFoundError, InputError, NeardupError
from neardup.records import Document, documents
from neardup.service import models
from neardup.service.auth import Principal, context, require
from neardup.service.bodies import StrictJSONRoute, repeated_key
from neardup.service.fast_query import answer, on_loop, text_ok
from neardup.service.longpoll import wait_for_changes
from neardup.service.pools import BusyError
from neardup.service.problems import MEDIA_TYPE, UNAVAILABLE, ProblemError
from neardup.strict_json import DuplicateKeyError, loads

if TYPE_CHECKING:
    from neardup.neighbours import Contained
    from neardup.search import CheckResult

router = APIRouter(route_class=StrictJSONRoute)
NDJSON = "application/x-ndjson"
# Rows a page holds unless ``limit`` says otherwise, and the most it may say.
DEFAULT_PAGE, MAX_PAGE = 1000, 10_000
_PROBLEMS: dict[int | str, dict[str, Any]] = {
    status: {"description": text, "content": {MEDIA_TYPE: {}}}
    for status, text in (
        (401, "no token, or an unknown or revoked one"),
        (403, "the token's scope or collection does not allow this"),
        (404, "no such collection or document"),
        (413, "the request body is too large"),
        (422, "the request is not valid; a bad record is named by position and field"),
        (503, "the database is unavailable; try again after Retry-After seconds"),
    )
}
_PROBLEMS[503]["headers"] = {
    "Retry-After": {"description": "seconds to wait before trying again", "schema": {"type": "integer"}}
}
Read = Annotated[Principal, Depends(require("read"))]
Write = Annotated[Principal, Depends(require("write"))]
Admin = Annotated[Principal, Depends(require("admin"))]
MinJaccard = Annotated[float | None, QueryParam(ge=0.0, le=1.0)]


def _json_default(value: object) -> Any:
    raise TypeError(f"{type(value).__name__} is not JSON")


def _ndjson(rows: Iterator[dict[str, Any]]) -> Iterator[bytes]:
    for row in rows:
        yield (json.dumps(row, ensure_ascii=False, default=_json_default) + "\n").encode()


def _wants_ndjson(request: Request) -> bool:
    return NDJSON in request.headers.get("accept", "")


def _cursor(key: list[Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(key, ensure_ascii=False).encode()).decode().rstrip("=")


def _not_a_cursor(why: str = "") -> ProblemError:
    detail = "'after' is not a cursor this service gave out" + (f" ({why})" if why else "")
    return ProblemError(422, detail, extra={"errors": [{"location": ["query", "after"], "detail": detail}]})


def _after(cursor: str | None, length: int) -> list[Any] | None:
    """The key a cursor holds (a list of ``length`` strings that PostgreSQL's text can hold), or 422."""
    if cursor is None:
        return None
    try:
        key = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, binascii.Error, RecursionError) as exc:
        raise _not_a_cursor() from exc
    if not (isinstance(key, list) and len(key) == length and all(isinstance(k, str) for k in key)):
        raise _not_a_cursor()
    # A JSON escape can carry what no stored id holds, and what the database would refuse with an
    # error rather than compare: a NUL, or a lone surrogate (no UTF-8 encoding at all).
    for k in key:
        if "\x00" in k:
            raise _not_a_cursor("it holds a NUL character")
        try:
            k.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise _not_a_cursor("it holds a lone surrogate") from exc
    return key


def _text_ok(text: str, what: str, *, stored: bool = False) -> str:
    """``text`` if it is valid Unicode (and, when ``stored``, holds no NUL, which PostgreSQL cannot store)."""
    text_ok(text, what)
    if stored and "\x00" in text:
        raise ProblemError(422, f"{what} contains a NUL character")
    return text


def _records(body: bytes, content_type: str) -> list[Document]:
    """The documents of an add or check body (a JSON array, or NDJSON), each checked; 422 names
    the first bad one by position (from 0) and field."""
    items: list[Any]
    try:
        if content_type.split(";")[0].strip().lower() == NDJSON:
            items = []
            # Records end at "\n" only (a "\r" before it is JSON whitespace): str.splitlines would
            # also split at U+2028, U+0085 and others, which JSON strings may hold unescaped.
            for line in body.decode("utf-8").split("\n"):
                if line.strip():
                    try:
                        items.append(loads(line))
                    except DuplicateKeyError as exc:
                        raise InputError(f"record {len(items)}: {exc}") from exc
                    except ValueError as exc:
                        raise InputError(f"record {len(items)}: not a JSON object ({exc})") from exc
        else:
            parsed = loads(body)
            if not isinstance(parsed, list):
                raise ProblemError(
                    422, "the body must be a JSON array of {id, text, meta} objects (or NDJSON)"
                )
            items = parsed
    except InputError:
        raise
    except UnicodeDecodeError as exc:
        raise ProblemError(422, f"the body is not UTF-8 ({exc.reason} at byte {exc.start})") from exc
    except RecursionError as exc:
        raise ProblemError(422, "the body nests too deeply") from exc
    except DuplicateKeyError as exc:
        raise ProblemError(422, f"the request body is not valid: {exc}") from exc
    except ValueError as exc:
        raise ProblemError(422, f"the body is not JSON ({exc})") from exc
    for n, item in enumerate(items):
        if not isinstance(item, dict):
            raise InputError(
                f"record {n}: expected an object with id, text and meta, got {type(item).__name__}"
            )
        doc_id = item.get("id")
        if isinstance(doc_id, int) and not isinstance(doc_id, bool):
            item["id"] = str(doc_id)  # as `neardup add` reads a JSON integer id: its decimal text
    return list(documents(items))


# -- health and collections -----------------------------------------------------------------------


@router.get("/healthz", response_model=models.Health, responses={503: _PROBLEMS[503]}, tags=["health"])
def healthz(request: Request) -> dict[str, str]:
    """200 when the database answers, 503 otherwise; needs no token."""
    try:
        context(request).db.ping()
    except NeardupError as exc:
        raise ProblemError(503, UNAVAILABLE) from exc
    return {"status": "ok"}


@router.get(
    "/v1/collections", response_model=models.CollectionList, responses=_PROBLEMS, tags=["collections"]
)
def list_collections(request: Request, who: Read) -> dict[str, Any]:
    """The collections this token may read."""
    rows = context(request).db.collections(counts=False)
    return {
        "collections": [
            {"name": c.name, "threshold": c.threshold, "store_text": c.store_text}
            for c in rows
            if who.collection is None or who.collection == c.name
        ]
    }


@router.post(
    "/v1/collections",
    status_code=201,
    response_model=models.CollectionInfo,
    responses=_PROBLEMS,
    tags=["collections"],
)
def create_collection(request: Request, body: models.NewCollection, who: Admin) -> dict[str, Any]:
    """Create a collection with the parameters of ``neardup init`` (admin)."""
    who.require("admin", body.name)
    with context(request).db.create(body.name, **body.model_dump(exclude={"name"})) as index:
        return {
            "name": index.name,
            "threshold": index.threshold,
            "store_text": index.store_text,
            "params": index.params.to_dict(),
            "keep": index.keep,
        }


@router.get(
    "/v1/collections/{name}", response_model=models.CollectionInfo, responses=_PROBLEMS, tags=["collections"]
)
def get_collection(request: Request, name: str, who: Read) -> dict[str, Any]:
    """A collection's parameters and counts."""
    with context(request).indexes.index(name) as index:
        s, keep = index.stats(), index.keep
    return {
        "name": s.name,
        "threshold": s.threshold,
        "store_text": s.store_text,
        "params": s.params.to_dict(),
        "keep": keep,
        "stats": {
            **s.counts(),
            "bucket_rows": s.bucket_rows,
            "bytes_on_disk": s.bytes_on_disk,
            **(
                {"neighbour_rows": s.neighbour_rows, "neighbour_bytes": s.neighbour_bytes}
                if s.params.neighbours
                else {}
            ),
            "expected_fp_rate": s.expected_fp_rate,
            "expected_fn_rate": s.expected_fn_rate,
            "candidate_probability_at_threshold": s.candidate_probability_at_threshold,
            "expected_threshold_bin_recall": s.expected_threshold_bin_recall,
            **({"threshold_bin_check": s.recall_check.to_dict()} if s.recall_check else {}),
        },
    }


@router.delete("/v1/collections/{name}", status_code=204, responses=_PROBLEMS, tags=["collections"])
def drop_collection(request: Request, name: str, who: Admin) -> Response:
    """Drop a collection with everything in it (admin)."""
    ctx = context(request)
    ctx.indexes.forget(name)
    dropped = ctx.db.drop(name)
    ctx.indexes.forget(name)
    if not dropped:
        raise CollectionNotFoundError(f"no collection named {name!r}")
    return Response(status_code=204)


# -- documents ------------------------------------------------------------------------------------


@router.post(
    "/v1/collections/{name}/documents",
    response_model=models.AddSummary,
    responses=_PROBLEMS,
    openapi_extra=models.DOCUMENTS_BODY,
    tags=["documents"],
)
async def add_documents(request: Request, name: str, who: Write) -> dict[str, int]:
    """Add or replace documents, all or nothing: a bad record stores nothing of the request."""
    body = await request.body()
    ctx = context(request)

    def add() -> dict[str, int]:
        records = _records(body, request.headers.get("content-type", ""))
        with ctx.indexes.index(name) as index:
            r = index.add(records, batch_size=None)  # the request is one transaction
        ctx.metrics.written(r.added, r.replaced, 0, r.new_pairs)
        return {
            "added": r.added,
            "replaced": r.replaced,
            "unchanged": r.unchanged,
            "empty": r.empty,
            "new_pairs": r.new_pairs,
        }

    return await run_in_threadpool(add)


@router.get(
    "/v1/collections/{name}/documents/{doc_id:path}",
    response_model=models.Document,
    responses=_PROBLEMS,
    tags=["documents"],
)
def get_document(request: Request, name: str, doc_id: str, who: Read) -> dict[str, Any]:
    """A document's text, metadata, cluster and near-duplicates."""
    _text_ok(doc_id, "the id", stored=True)
    here = context(request).db.review(name)
    doc = here.document(doc_id)
    if doc is None:
        raise ProblemError(404, f"no document {doc_id!r:.200} in collection {name!r}")
    found = here.document_pairs(doc_id)
    return {
        "id": doc.id,
        "text": doc.text,
        "meta": doc.meta,
        "cluster": doc.cluster,
        "pairs": [{"id": other, "jaccard": sim, "method": method} for other, sim, method in found],
    }


@router.delete(
    "/v1/collections/{name}/documents/{doc_id:path}", status_code=204, responses=_PROBLEMS, tags=["documents"]
)
def delete_document(request: Request, name: str, doc_id: str, who: Write) -> Response:
    """Remove a document with its pairs."""
    _text_ok(doc_id, "the id", stored=True)
    ctx = context(request)
    with ctx.indexes.index(name) as index:
        found = index.remove([doc_id])
    ctx.metrics.written(0, 0, found, 0)
    if not found:
        raise ProblemError(404, f"no document {doc_id!r:.200} in collection {name!r}")
    return Response(status_code=204)


# -- looking up -----------------------------------------------------------------------------------


@router.post(
    "/v1/collections/{name}/query",
    response_model=models.Matches,
    responses=_PROBLEMS,
    openapi_extra=models.QUERY_BODY,
    tags=["queries"],
)
async def query(request: Request, name: str, who: Read) -> Response:
    """Stored documents similar to a text, best first."""
    raw = await request.body()
    if (repeated := repeated_key(raw)) is not None:
        raise ProblemError(422, f"the request body is not valid: {repeated}")
    try:
        body = models.Query.model_validate_json(raw)
    except ValidationError as exc:  # reported as FastAPI reports a body it parsed itself
        raise RequestValidationError([{**e, "loc": ("body", *e["loc"])} for e in exc.errors()]) from exc
    text = _text_ok(body.text, "'text'")
    pool = context(request).indexes

    def run(wait: bool) -> Response:
        with pool.index(name, wait=wait) as index:
            return Response(answer(index, text, body), media_type="application/json")

    # Ordinary queries are answered before they get here (fast_query.py); those that come here
    # answer the same way. A plain query of a short text is short: with an open index free at once
    # it runs on the event loop, since the hop to a worker thread and back is a large share of its
    # cost. Anything longer (top-k, containment, a long text) or
    # waiting for an index runs in a worker thread, so that the loop keeps answering others.
    if on_loop(body):
        try:
            return run(wait=False)
        except BusyError:
            pass
    return await run_in_threadpool(run, True)


@router.post(
    "/v1/collections/{name}/check",
    response_model=models.CheckResults,
    responses=_PROBLEMS,
    openapi_extra=models.DOCUMENTS_BODY,
    tags=["queries"],
)
async def check(
    request: Request,
    name: str,
    who: Read,
    min_jaccard: MinJaccard = None,
    limit: Annotated[int | None, QueryParam(ge=1, le=100_000)] = None,
    top_k: Annotated[int | None, QueryParam(ge=1, le=100_000)] = None,
    min_containment: Annotated[float | None, QueryParam(gt=0.0, le=1.0)] = None,
    direction: Literal["contains", "within"] = "contains",
) -> dict[str, Any]:
    """Each document's stored near-duplicates, in input order; nothing is stored. With top_k or
    min_containment (a collection with neighbours), the query's answers to them instead."""
    if direction == "within" and min_containment is None:
        detail = "direction 'within' goes with min_containment (as --within with --min-containment)"
        where = {"location": ["query", "direction"], "detail": detail}
        raise ProblemError(422, detail, extra={"errors": [where]})
    body = await request.body()
    ctx = context(request)

    def run() -> dict[str, Any]:
        records = _records(body, request.headers.get("content-type", ""))
        with ctx.indexes.index(name) as index:
            found = list(
                index.check(
                    records,
                    min_jaccard=min_jaccard,
                    limit=limit,
                    k=top_k,
                    min_containment=min_containment,
                    direction=direction,
                )
            )
        if min_containment is not None:
            return {"results": [{"id": r.id, "matches": [c._asdict() for c in _contained(r)]} for r in found]}
        return {
            "results": [
                {"id": r.id, "matches": [{"id": m, "jaccard": j} for m, j in r.matches]} for r in found
            ]
        }

    return await run_in_threadpool(run)


def _contained(result: CheckResult) -> list[Contained]:
    """A check result's containment answers (asked with min_containment)."""
    return cast("list[Contained]", result.matches)


# -- listings -------------------------------------------------------------------------------------

_LISTING = {
    200: {"content": {NDJSON: {"schema": {"type": "string"}}}, "description": "a page, or NDJSON"},
    **_PROBLEMS,
}


@router.get(
    "/v1/collections/{name}/pairs", response_model=models.PairPage, responses=_LISTING, tags=["listings"]
)
def list_pairs(
    request: Request,
    name: str,
    who: Read,
    min_jaccard: MinJaccard = None,
    limit: Annotated[int, QueryParam(ge=1, le=MAX_PAGE)] = DEFAULT_PAGE,
    after: str | None = None,
) -> Any:
    """Stored pairs by (id_a, id_b), a page at a time; all of them as NDJSON with
    ``Accept: application/x-ndjson``."""
    ctx = context(request)
    key = _after(after, 2)  # checked whatever the answer's type, as for clusters
    if _wants_ndjson(request):
        with ctx.indexes.index(name) as index:
            rows = index.pairs(min_jaccard)
        return StreamingResponse(
            _ndjson({"id_a": a, "id_b": b, "jaccard": j} for a, b, j in rows), media_type=NDJSON
        )
    rows_ = ctx.db.review(name).pairs_page(min_jaccard, (key[0], key[1]) if key else None, limit + 1)
    more = len(rows_) > limit
    rows_ = rows_[:limit]
    return {
        "pairs": [{"id_a": a, "id_b": b, "jaccard": s, "method": m} for a, b, s, m in rows_],
        "next": _cursor([rows_[-1][0], rows_[-1][1]]) if more else None,
    }


@router.get(
    "/v1/collections/{name}/clusters",
    response_model=models.ClusterPage,
    responses=_LISTING,
    tags=["listings"],
)
def list_clusters(
    request: Request,
    name: str,
    who: Read,
    limit: Annotated[int, QueryParam(ge=1, le=MAX_PAGE)] = DEFAULT_PAGE,
    after: str | None = None,
) -> Any:
    """Clusters by representative, a page at a time; all of them as NDJSON with
    ``Accept: application/x-ndjson``."""
    key = _after(after, 1)
    here = context(request).db.review(name)
    if not _wants_ndjson(request):
        rows = here.clusters_page(key[0] if key else None, limit + 1)
        more = len(rows) > limit
        rows = rows[:limit]
        return {
            "clusters": [
                {"cluster": c.cluster, "representative": c.representative, "ids": c.ids, "dense": c.dense}
                for c in rows
            ],
            "next": _cursor([rows[-1].representative]) if more else None,
        }

    def stream() -> Iterator[dict[str, Any]]:
        last = None
        while True:
            batch = here.clusters_page(last, DEFAULT_PAGE)
            for c in batch:
                yield {
                    "cluster": c.cluster,
                    "representative": c.representative,
                    "ids": c.ids,
                    "dense": c.dense,
                }
            if len(batch) < DEFAULT_PAGE:
                return
            last = batch[-1].representative

    return StreamingResponse(_ndjson(stream()), media_type=NDJSON)


def _cluster_json(c: Any) -> dict[str, Any]:
    return {"cluster": c.cluster, "representative": c.representative, "ids": c.ids, "dense": c.dense}


@router.get("/v1/collections/{name}/clusters/{cluster}/pairs", responses=_LISTING, tags=["listings"])
def cluster_pairs(
    request: Request,
    name: str,
    cluster: Annotated[int, Path(ge=0, le=2**63 - 1)],
    who: Read,
    min_jaccard: MinJaccard = None,
) -> Any:
    """Every pair of one cluster (id_a, id_b, jaccard) as NDJSON, verified when read: a dense
    cluster stores only a verified subset of its pairs that connects it, and this gives them all.
    Quadratic in the cluster's size (a cluster of k near-copies has about k²/2 pairs)."""
    ctx = context(request)
    with ctx.indexes.index(name) as index:
        rows = index.cluster_pairs(cluster, min_jaccard)
        first = next(rows, None)  # a cluster that is not there is a 404, before the stream starts
    head = [] if first is None else [first]
    return StreamingResponse(
        _ndjson({"id_a": a, "id_b": b, "jaccard": j} for a, b, j in itertools.chain(head, rows)),
        media_type=NDJSON,
    )


# -- the changes feed -----------------------------------------------------------------------------

# Milliseconds a longpoll waits unless ``timeout`` says otherwise, and the most it may say. A
# waiting longpoll holds no worker thread and no connection (longpoll.py); how many may wait at
# once is bounded by `neardup serve --max-longpolls`.
DEFAULT_LONGPOLL_MS, MAX_LONGPOLL_MS = 30_000, 60_000


@router.get(
    "/v1/collections/{name}/changes",
    response_model=models.Changes,
    responses={
        **_PROBLEMS,
        409: {"description": "the collection keeps no changes feed", "content": {MEDIA_TYPE: {}}},
        410: {"description": "changes after 'since' are no longer kept", "content": {MEDIA_TYPE: {}}},
    },
    tags=["changes"],
)
async def list_changes(
    request: Request,
    name: str,
    who: Read,
    since: Annotated[int, QueryParam(ge=0, le=2**63 - 1)] = 0,
    limit: Annotated[int, QueryParam(ge=1, le=MAX_PAGE)] = DEFAULT_PAGE,
    feed: Literal["normal", "longpoll"] = "normal",
    timeout: Annotated[int, QueryParam(ge=0, le=MAX_LONGPOLL_MS)] = DEFAULT_LONGPOLL_MS,
) -> dict[str, Any]:
    """Writes to the collection numbered after ``since``, in commit order, with the ``since`` to
    ask with next (``last_seq``); ``feed=longpoll`` waits up to ``timeout`` milliseconds for a
    first one (503 with Retry-After when the server has as many longpolls waiting as it takes).
    410 when some after ``since`` are no longer kept."""
    ctx = context(request)
    if feed == "longpoll" and timeout > 0:
        async with ctx.longpolls.slot():
            page = await wait_for_changes(ctx.db, name, since, limit, timeout / 1000, request.is_disconnected)
    else:
        page = await run_in_threadpool(ctx.db.changes, name, since, limit=limit)
    return {"results": [c.to_dict() for c in page.changes], "last_seq": page.last_seq}


# -- labels ---------------------------------------------------------------------------------------


@router.post("/v1/collections/{name}/labels", status_code=204, responses=_PROBLEMS, tags=["labels"])
def put_label(request: Request, name: str, body: models.NewLabel, who: Write) -> Response:
    """Label a pair "duplicate" or "not_duplicate", with an optional note (replacing an earlier label)."""
    for value, what in ((body.id_a, "'id_a'"), (body.id_b, "'id_b'"), (body.note, "'note'")):
        _text_ok(value, what, stored=True)
    context(request).db.labels.put(name, body.id_a, body.id_b, body.label, body.note, who.token_id, who.name)
    return Response(status_code=204)


@router.get(
    "/v1/collections/{name}/labels", response_model=models.Labels, responses=_PROBLEMS, tags=["labels"]
)
def get_labels(request: Request, name: str, who: Read) -> JSONResponse:
    """Every label of the collection, with each pair's current similarity."""
    db = context(request).db
    rows = db.labels.export(db.review(name).name)  # review: 404 for an unknown collection
    return JSONResponse({"labels": [r.to_dict() for r in rows]})
