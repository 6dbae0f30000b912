"""The access log without secrets: query strings are cut down before uvicorn's line is written.

A client may put a token in the URL (``?access_token=...``) although the service never reads one
there; uvicorn's access log writes the path with its query string, so the secret would be on disk
in full, for refused requests too. Only the parameters the service takes keep their names, and
only the numeric ones their values; anything else is replaced by ``[redacted]``.
"""

from __future__ import annotations

import json
import logging
import re
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote_plus

ACCESS_LOGGER = "uvicorn.access"
REDACTED = "[redacted]"
# Query parameters of the API and the review pages; values are kept only for the numeric ones
# (cursors and ids may be private, and any other name may be a secret itself).
_NUMERIC = frozenset(
    {"limit", "min_jaccard", "size", "saved", "top_k", "min_containment", "since", "timeout"}
)
_NAMED = _NUMERIC | frozenset({"after", "a", "b", "id", "next", "direction", "feed"})
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


# The attributes every LogRecord has; any other one was passed in ``extra`` and goes into the line.
_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "color_message"}


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time (UTC), level, logger, message, the record's extra fields, and
    the traceback of an error as one string."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as a line of JSON."""
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                line[key] = value
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def json_config(level: str) -> dict[str, Any]:
    """uvicorn's ``log_config`` for ``--log-format json``: every line of uvicorn and of neardup's
    service as JSON on stderr, uvicorn's access lines left out (``requests.RequestLog`` writes one
    line a request, with its id)."""
    handler = {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": f"{__name__}.JsonFormatter"}},
        "handlers": {"json": handler},
        "loggers": {
            "uvicorn": {"handlers": ["json"], "level": level.upper(), "propagate": False},
            "uvicorn.access": {"handlers": [], "level": "CRITICAL", "propagate": False},
            "neardup": {"handlers": ["json"], "level": level.upper(), "propagate": False},
        },
    }
