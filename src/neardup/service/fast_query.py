"""The query's fast path: the service's hottest request answered below the framework, or handed on.

``POST /v1/collections/{name}/query`` is short in the index, so FastAPI's routing, dependency
solving and exception layers are a large share of its cost (docs/benchmarks/ has the service's figures). This
layer answers the request itself when everything about it is ordinary: tokens off, or a bearer
token checked in the last seconds that may read the collection; a JSON body that validates (no
key repeated); a plain similarity query of a text short enough to sketch on the event loop
(``on_loop``); an open index of the collection free at once; a query that succeeds.
Anything else (no token, an unknown one, too small a scope, a bad body, a busy or unknown
collection, an error in the query) goes to the route in ``routes.py`` with the body replayed, so
every check and every error document stays the route's own. A query changes nothing, so running
it again on the route after an error here is safe.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from neardup.credentials import digest
from neardup.service import models
from neardup.service.bodies import read_body, repeated_key, replay
from neardup.service.context import Context
from neardup.service.problems import ProblemError

if TYPE_CHECKING:
    from neardup.index import Index

# The route's path; a collection name never holds a slash (storage.names).
_PATH = re.compile(r"/v1/collections/([^/]+)/query")
_JSON_HEADERS = [(b"content-type", b"application/json")]


def matches_body(hits: list[tuple[str, float]]) -> bytes:
    """The query's answer as the route sends it: ``{"matches": [{"id", "jaccard"}, ...]}``."""
    matches = [{"id": i, "jaccard": j} for i, j in hits]
    return json.dumps({"matches": matches}, ensure_ascii=False).encode("utf-8")


def answer(index: Index, text: str, query: models.Query) -> bytes:
    """The body of ``query``'s answer from ``index``: similar, top-k or containment matches."""
    if query.min_containment is None:
        return matches_body(index.query(text, query.min_jaccard, query.limit, k=query.top_k))
    # Every option passed on: the index refuses those that do not go together, as it says.
    found = index.query(  # type: ignore[call-overload]
        text,
        query.min_jaccard,
        query.limit,
        k=query.top_k,
        min_containment=query.min_containment,
        direction=query.direction,
    )
    matches = [{"id": c.id, "containment": c.containment, "jaccard": c.jaccard} for c in found]
    return json.dumps({"matches": matches}, ensure_ascii=False).encode("utf-8")


# The longest text a query may have to be answered on the event loop: sketching a longer one, like a
# top-k or containment query's fingerprint work, would hold the loop (and every other request, /healthz
# included) for as long as it takes, so those run in a worker thread.
ON_LOOP_MAX_CHARS = 65_536


def on_loop(query: models.Query) -> bool:
    """Whether ``query`` is short enough to answer on the event loop: a plain similarity query
    (no top-k, no containment) of a text up to ``ON_LOOP_MAX_CHARS``."""
    return query.top_k is None and query.min_containment is None and len(query.text) <= ON_LOOP_MAX_CHARS


def text_ok(text: str, what: str) -> str:
    """``text`` if it is valid Unicode (no lone surrogate, which a JSON escape can carry)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ProblemError(422, f"{what} is not valid Unicode (a lone surrogate)") from exc
    return text


class FastQuery:
    """ASGI middleware: answer ordinary queries at once, pass everything else to ``app``."""

    def __init__(self, app: ASGIApp, ctx: Context) -> None:
        """Wrap ``app`` (the FastAPI application whose state is ``ctx``)."""
        self.app, self.ctx = app, ctx

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer the request, or hand it on with its body replayed."""
        if scope["type"] != "http" or scope["method"] != "POST" or not (m := _PATH.fullmatch(scope["path"])):
            await self.app(scope, receive, send)
            return
        body = await read_body(receive)
        if body is None:  # the client left before sending its body
            return
        answer = self._answer(m.group(1), scope, body)
        if answer is None:
            await self.app(scope, replay(body, receive), send)
            return
        headers = [*_JSON_HEADERS, (b"content-length", str(len(answer)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": answer})

    def _answer(self, name: str, scope: Scope, body: bytes) -> bytes | None:
        """The answer's body, or None for the route to answer (every error included)."""
        ctx = self.ctx
        if ctx.auth:
            scheme, _, secret = Headers(scope=scope).get("authorization", "").partition(" ")
            who = ctx.tokens.recall(digest(secret)) if scheme.lower() == "bearer" and secret else None
            if who is None:
                return None
            try:
                who.require("read", name)
            except ProblemError:
                return None
        try:
            if repeated_key(body) is not None:  # pydantic would keep the last silently
                return None
            query = models.Query.model_validate_json(body)
            if not on_loop(query):  # the route answers it in a worker thread
                return None
            text = text_ok(query.text, "'text'")
            with ctx.indexes.index(name, wait=False) as index:
                return answer(index, text, query)
        except Exception:  # a bad body, a busy index, any error: the route answers as it would
            return None
