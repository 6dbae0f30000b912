"""Serving: the HTTP service (serve) and the embedded PostgreSQL server's state (server)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from neardup.cli.command import command
from neardup.cli.connect import database_url, url_given
from neardup.cli.options import PORT, POSITIVE
from neardup.cli.output import emit

LOG_LEVELS = ("critical", "error", "warning", "info", "debug")


def _serve_options(p: argparse.ArgumentParser) -> None:
    from neardup.service.context import DEFAULT_MAX_BODY
    from neardup.service.longpoll import DEFAULT_MAX_LONGPOLLS

    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=PORT, default=8080, help="port (default 8080)")
    p.add_argument("--workers", type=POSITIVE, default=1, help="worker processes (default 1)")
    p.add_argument(
        "--no-auth",
        action="store_true",
        help="no tokens needed (refused unless the host is a loopback address)",
    )
    p.add_argument(
        "--max-body-bytes",
        type=POSITIVE,
        default=DEFAULT_MAX_BODY,
        help=f"larger request bodies get 413 (default {DEFAULT_MAX_BODY // 2**20} MiB)",
    )
    p.add_argument(
        "--max-longpolls",
        type=POSITIVE,
        default=DEFAULT_MAX_LONGPOLLS,
        metavar="N",
        help="changes-feed longpolls waiting at once, per worker process; more get 503 with Retry-After "
        f"(default {DEFAULT_MAX_LONGPOLLS}; a waiting one holds no thread and no database connection)",
    )
    p.add_argument(
        "--log-level",
        default="info",
        choices=LOG_LEVELS,
        help="the least severe of the server's log lines written to standard error (default info: "
        "one line a request)",
    )
    p.add_argument(
        "--log-format",
        default="text",
        choices=("text", "json"),
        help="json: one JSON line a request (request id, route, status, milliseconds; the query "
        "string redacted) and every other line as JSON; text: uvicorn's access lines (default)",
    )


def _is_loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@command("serve", _serve_options)
def cmd_serve(args: argparse.Namespace) -> int:
    """Serve the HTTP API and the review pages for every collection of the database.

    Clients send `Authorization: Bearer <token>` (see `neardup token`). The OpenAPI document is
    at /openapi.json (documented at /docs), the review pages at /review/. Needs
    `pip install 'neardup[service]'`.

    Example: neardup --db postgresql://app@db/archive serve --host 0.0.0.0 --port 8080 --workers 2
    """
    from neardup.errors import NeardupError

    if args.no_auth and not _is_loopback(args.host):
        print(
            f"neardup: error: --no-auth is refused on {args.host}: without tokens the service may only "
            "listen on a loopback address (127.0.0.1, ::1, localhost)",
            file=sys.stderr,
        )
        return 2
    try:
        import uvicorn

        from neardup.service.app import create_app
        from neardup.service.context import Settings
    except ImportError as exc:
        raise NeardupError(
            f"neardup serve needs the service extra: pip install 'neardup[service]' ({exc})"
        ) from exc
    with database_url(args) as url:
        where = _check_schema(url, args.schema)
        print(
            f"neardup: serving {where} (schema {args.schema}) on http://{args.host}:{args.port}"
            + (" without tokens" if args.no_auth else ""),
            file=sys.stderr,
        )
        common: dict[str, Any] = {"host": args.host, "port": args.port, "log_level": args.log_level}
        if args.log_format == "json":
            from neardup.service.logs import json_config

            common.update(log_config=json_config(args.log_level), access_log=False)
        embedded = getattr(args, "data_directory", None)
        if args.workers > 1:
            os.environ.update(
                NEARDUP_SERVE_URL=url,
                NEARDUP_SERVE_SCHEMA=args.schema,
                NEARDUP_SERVE_AUTH="0" if args.no_auth else "1",
                NEARDUP_SERVE_MAX_BODY=str(args.max_body_bytes),
                NEARDUP_SERVE_MAX_LONGPOLLS=str(args.max_longpolls),
                NEARDUP_SERVE_LOG_FORMAT=args.log_format,
                NEARDUP_SERVE_EMBEDDED_DIR=embedded or "",
            )
            uvicorn.run(
                "neardup.service.app:app_from_environment", factory=True, workers=args.workers, **common
            )
        else:
            settings = Settings(
                url,
                args.schema,
                not args.no_auth,
                args.max_body_bytes,
                max_longpolls=args.max_longpolls,
                log_format=args.log_format,
                embedded_data_dir=embedded,
            )
            uvicorn.run(create_app(settings), **common)
    return 0


def _check_schema(url: str, schema: str) -> str:
    """Warn when the database does not answer or its schema is not at this neardup's revision
    (the service starts anyway, answering 503 until it is); returns the URL without its password."""
    from neardup.cli import hints
    from neardup.database import Database
    from neardup.errors import DatabaseConnectionError

    with Database(url, schema, pool_size=1) as db:
        try:
            current, head = db.revision(), db.head_revision()
        except DatabaseConnectionError as exc:
            warning = f"{hints.message(exc)} (/healthz says 503 until it answers)"
            print(f"neardup: warning: {warning}", file=sys.stderr)
            current = head = ""
        if current != head:
            print(
                f"neardup: warning: schema {schema!r} is at revision {current or 'none'}, this neardup "
                f"needs {head}: run `neardup db upgrade` (requests will get 503 until then)",
                file=sys.stderr,
            )
        return db.url_redacted


def _server_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=("status", "stop"), help="whether it runs and where, or stop it now")


@command("server", _server_options)
def cmd_server(args: argparse.Namespace) -> int:
    """Show or stop the embedded server (used when no database URL is given).

    The embedded server keeps running between commands and stops by itself once unused for
    $NEARDUP_SERVER_IDLE_TIMEOUT seconds (default 300; 0 stops it as each last command ends).
    status prints whether it runs, its pid, data directory, socket, idle timeout and how long it
    has been idle. stop shuts it down now; it refuses, with an error, while a command uses the
    server rather than wait behind a long import or cut it off: run it again when that ends.

    Example: neardup server status --format json
    """
    from neardup.embedded import default_server as server

    if url_given(args):
        print(
            "neardup: a database URL is set (--db or NEARDUP_DATABASE_URL), so commands do not use "
            "the embedded server; its state:",
            file=sys.stderr,
        )
    if args.action == "stop":
        pid = server.stop_server()
        print(
            "the embedded server is not running"
            if pid is None
            else f"stopped the embedded server (pid {pid})",
            file=sys.stderr,
        )
        return 0
    s = server.server_state()
    rows: list[tuple[str, Any]] = [
        ("running", s.running),
        ("pid", s.pid),
        ("data_directory", str(s.data_dir)),
        ("socket", s.socket_dir and str(s.socket_dir)),
        ("in_use", s.in_use),
        ("idle_timeout", s.idle_timeout),
        ("idle_seconds", None if s.idle_seconds is None else round(s.idle_seconds, 1)),
        ("watchdog_pid", s.watchdog_pid),
    ]
    emit(args.format, ["name", "value"], rows)
    return 0
