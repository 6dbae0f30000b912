"""The parser and ``main``: which command runs, with the options every command shares."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from neardup import __version__
from neardup.cli import (
    backup,
    changes,
    collections,
    evaluate,
    follow,
    ingest,
    labels,
    listing,
    schema,
    server,
    tokens,
)
from neardup.cli.command import COMMANDS, Command
from neardup.cli.options import output_format

# The order of the commands in ``neardup --help``: a new collection's life, then the rest.
ORDER = (
    "init",
    "rebuild",
    "add",
    "query",
    "pairs",
    "clusters",
    "check",
    "dedup",
    "remove",
    "follow",
    "stats",
    "changes",
    "changes-feed",
    "eval",
    "tune",
    "collections",
    "drop",
    "db",
    "backup",
    "restore",
    "serve",
    "token",
    "labels",
    "server",
)
# Each module registers its commands as it is imported; named here so that the import is used.
MODULES = (backup, changes, collections, evaluate, follow, ingest, labels, listing, schema, server, tokens)
# Options before the command that take a value (so the command's name can be found before parsing).
_GLOBAL_VALUES = ("--db", "--collection", "--schema")


def _global_options(parser: argparse.ArgumentParser) -> None:
    from neardup.cli.connect import URL_ENV

    parser.add_argument("--version", action="version", version=f"neardup {__version__}")
    parser.add_argument("--db", help=f"database URL (default: ${URL_ENV}, else the embedded server)")
    parser.add_argument("--collection", default="default", help="collection name (default: default)")
    # The library's default schema, without importing the storage side for it.
    parser.add_argument("--schema", default="neardup", help="PostgreSQL schema (default: neardup)")


def _add_command(sub: argparse._SubParsersAction[argparse.ArgumentParser], c: Command, full: bool) -> None:
    p = sub.add_parser(
        c.name,
        help=c.summary,
        description=c.summary + (f"\n\n{c.details}" if c.details else ""),
        epilog=f"example:\n  {c.example}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.set_defaults(func=c.handler)
    if not full:
        return
    if c.output:
        output_format(p, tables=c.tables)
    if c.options is not None:
        c.options(p)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The argument parser, with every command and its example; with ``only``, the options of that
    command alone (the others keep their name and help), so a command builds no other's options."""
    parser = argparse.ArgumentParser(
        prog="neardup", description="A near-duplicate document index in PostgreSQL."
    )
    _global_options(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in ORDER:
        _add_command(sub, COMMANDS[name], only is None or only == name)
    return parser


def command_named(argv: Sequence[str]) -> str | None:
    """The command ``argv`` runs, read as argparse will read it; None when there is none (as with
    ``--help`` or ``--version``), or when it is no command (then the full parser says so)."""
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            arg = argv[i + 1] if i + 1 < len(argv) else ""
        elif arg in _GLOBAL_VALUES:
            i += 2
            continue
        elif arg.startswith("-"):
            i += 1
            continue
        return arg if arg in COMMANDS else ""
    return None


class _StderrHandler(logging.Handler):
    """Writes log records to whatever ``sys.stderr`` is at the time (tests replace it)."""

    def emit(self, record: logging.LogRecord) -> None:
        print(self.format(record), file=sys.stderr)


def _quiet_logs() -> None:
    # The embedded server says what it does (as root: which user runs it, where its data is).
    server_log = logging.getLogger("neardup.server")
    if not server_log.handlers:
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("neardup: %(message)s"))
        server_log.addHandler(handler)
        server_log.setLevel(logging.INFO)
    # psycopg warns when the rollback after a lost connection fails too; the error itself is
    # reported once, by main, so its warnings must not reach stderr through logging's last resort.
    driver_log = logging.getLogger("psycopg")
    if not driver_log.handlers:
        driver_log.addHandler(logging.NullHandler())


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 on success, 1 on an error, 2 on bad usage)."""
    from neardup.errors import NeardupError

    arguments = sys.argv[1:] if argv is None else list(argv)
    name = command_named(arguments)
    # The named command's options only; none without a command (the top-level help needs none);
    # every command's for a word that names none (argparse then lists the commands).
    only = None if name == "" else name or ""
    try:
        args = build_parser(only).parse_args(arguments)
    except SystemExit as exc:  # bad usage (2), --help or --version (0), already printed
        return exc.code if isinstance(exc.code, int) else 2
    _quiet_logs()
    try:
        return int(args.func(args))
    except NeardupError as exc:
        print(f"neardup: error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        print("neardup: interrupted", file=sys.stderr)
        return 130
