"""Request bodies at the ASGI level: read one whole (within a limit), and hand it on again."""

from __future__ import annotations

from typing import Any

from starlette.types import Receive


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
