"""Request bodies: read one whole at the ASGI level (within a limit) and hand it on again; parse
JSON refusing repeated keys."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException
from starlette.types import Receive

from neardup.strict_json import DuplicateKeyError, loads


class BodyTooLargeError(Exception):
    """The body went past the limit while it was read."""


async def read_body(receive: Receive, max_bytes: int | None = None) -> bytes | None:
    """The whole request body, or None when the client left before sending all of it;
    BodyTooLargeError as soon as more than ``max_bytes`` have arrived."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if max_bytes is not None and size > max_bytes:
            raise BodyTooLargeError
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def replay(body: bytes, receive: Receive) -> Receive:
    """A receive that gives ``body`` once, then whatever the client sends next."""
    sent = False

    async def replayed() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        message: dict[str, Any] = dict(await receive())
        return message

    return replayed


def repeated_key(body: bytes) -> DuplicateKeyError | None:
    """The error for the first repeated key of the JSON ``body``, or None (also when it is no JSON
    at all: whoever parses it next says what is wrong with it)."""
    try:
        loads(body)
    except DuplicateKeyError as exc:
        return exc
    except (ValueError, RecursionError):
        return None
    return None


class _StrictJSONRequest(Request):
    """A request whose ``json()`` refuses repeated keys (422 naming the key)."""

    async def json(self) -> Any:
        """The body as JSON; FastAPI calls this for a route's body model."""
        if not hasattr(self, "_json"):
            try:
                self._json = loads(await self.body())
            except DuplicateKeyError as exc:
                # FastAPI re-raises an HTTPException from here as it is (any other error becomes
                # its generic 400); the app's handler makes it a problem document.
                raise HTTPException(422, f"the request body is not valid: {exc}") from exc
        return self._json


class StrictJSONRoute(APIRoute):
    """A route whose JSON body model is parsed refusing repeated keys."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        """FastAPI's handler, given the stricter request."""
        handler = super().get_route_handler()

        async def strict(request: Request) -> Response:
            return await handler(_StrictJSONRequest(request.scope, request.receive))

        return strict
