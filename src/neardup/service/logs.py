"""The access log without secrets: query strings are cut down before uvicorn's line is written.

A client may put a token in the URL (``?access_token=...``) although the service never reads one
there; uvicorn's access log writes the path with its query string, so the secret would be on disk
in full, for refused requests too. Only the parameters the service takes keep their names, and
only the numeric ones their values; anything else is replaced by ``[redacted]``.
"""

from __future__ import annotations

import logging
import re
from urllib.parse import unquote_plus

ACCESS_LOGGER = "uvicorn.access"
REDACTED = "[redacted]"
# Query parameters of the API and the review pages; values are kept only for the numeric ones
# (cursors and ids may be private, and any other name may be a secret itself).
_NUMERIC = frozenset({"limit", "min_jaccard", "size", "saved", "top_k", "min_containment"})
_NAMED = _NUMERIC | frozenset({"after", "a", "b", "id", "next", "direction"})
_NUMBER = re.compile(r"[0-9][0-9.eE+-]{0,24}|true|false")


def redact_query(target: str) -> str:
    """``target`` (a path with an optional query string) with the query's secrets replaced."""
    path, mark, query = target.partition("?")
    if not mark:
        return target
    parts = []
    for part in query.split("&"):
        name, eq, value = part.partition("=")
        key = unquote_plus(name)
        if key not in _NAMED:
            parts.append(REDACTED)
        elif not eq or (key in _NUMERIC and _NUMBER.fullmatch(value)):
            parts.append(part)
        else:
            parts.append(f"{name}={REDACTED}")
    return f"{path}?{'&'.join(parts)}"


class RedactQuery(logging.Filter):
    """Rewrites every string argument of a log record holding a query string (uvicorn passes the
    request's path with its query as one argument of '%s - "%s %s HTTP/%s" %d')."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Keep the record, redacted."""
        if isinstance(record.args, tuple) and any(isinstance(a, str) and "?" in a for a in record.args):
            record.args = tuple(redact_query(a) if isinstance(a, str) else a for a in record.args)
        return True


def install() -> None:
    """Redact the access log of this process (once; uvicorn has configured its logging by the time
    the application starts, in every worker)."""
    logger = logging.getLogger(ACCESS_LOGGER)
    if not any(isinstance(f, RedactQuery) for f in logger.filters):
        logger.addFilter(RedactQuery())
