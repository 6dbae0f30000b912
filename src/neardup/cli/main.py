"""The parser and ``main``: which command runs, with the options every command shares."""

from __future__ import annotations

import argparse
import importlib
import logging
import re
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from neardup import __version__
from neardup.cli.command import COMMANDS, Command
from neardup.cli.options import output_format

# The modules of commands, in the order ``neardup --help`` lists them (each module's commands in
# the order it declares them): a collection's life first, then the rest. Importing a module
# registers its commands.
COMMAND_MODULES = (
    "collections",
    "ingest",
    "listing",
    "follow",
    "changes",
    "evaluate",
    "schema",
    "backup",
    "server",
    "tokens",
    "labels",
)
for _module in COMMAND_MODULES:
    importlib.import_module(f"neardup.cli.{_module}")
# The options every command takes, before or after its name, that take a value (so the command's
# name can be found before parsing).
_GLOBAL_VALUES = ("--db", "--collection", "--schema")
# The global options' defaults: given before the command, or else these.
_GLOBAL_DEFAULTS = {"collection": "default", "schema": "neardup"}


def _global_options(parser: argparse.ArgumentParser, *, after: bool = False, own: Sequence[str] = ()) -> None:
    """--db, --collection and --schema: on the top-level parser with their defaults, or (``after``)
    on a command's parser without any, so that given after the command they override what was
    given before it, and left out they change nothing; ``own`` are those the command uses for
    something of its own (``token create --collection``)."""
    from neardup.cli.connect import URL_ENV

    target: Any = parser
    keywords: dict[str, Any] = {}
    if after:
        target = parser.add_argument_group("options every command takes (before or after its name)")
        keywords["default"] = argparse.SUPPRESS
    else:
        parser.add_argument("--version", action="version", version=f"neardup {__version__}")
    helps = {
        "db": f"database URL (default: ${URL_ENV}, else the embedded server)",
        "collection": "collection name (default: default)",
        # The library's default schema, without importing the storage side for it.
        "schema": "PostgreSQL schema (default: neardup)",
    }
    for name, help_text in helps.items():
        if f"--{name}" in own:
            continue
        default = keywords.get("default", _GLOBAL_DEFAULTS.get(name))
        target.add_argument(f"--{name}", default=default, metavar=name.upper(), help=help_text)


def _long_options(parser: argparse.ArgumentParser) -> list[str]:
    return [o for action in parser._actions for o in action.option_strings if o.startswith("--")]


def suggestion(word: str, options: Sequence[str]) -> str:
    """The option of ``options`` closest to a mistyped ``word`` (``--batchsize``: ``--batch-size``),
    or "" when none is close enough, as git suggests a command."""
    import difflib  # only a mistyped option needs it

    name = word.split("=", 1)[0]
    close = difflib.get_close_matches(name, options, n=1, cutoff=0.6)
    if not close:  # a word dropped or added: --max-length for --max-text-length
        close = [o for o in options if name.strip("-") and name.strip("-") in o][:1]
    return close[0] if close else ""


class _CommandParser(argparse.ArgumentParser):
    """A command's parser: an option it does not know is refused first, with its own usage and the
    closest option it does know, before any other complaint (a required option missing)."""

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        words = list(sys.argv[1:] if args is None else args)
        known = _long_options(self)
        for word in words:
            if word == "--":
                break
            if not word.startswith("--") or " " in word:  # values with spaces are never options
                continue
            name = word.split("=", 1)[0]
            matching = [o for o in known if o.startswith(name)]
            if name in known or len(matching) == 1:
                continue
            if len(matching) > 1:
                continue  # ambiguous: argparse names the candidates itself
            close = suggestion(name, known)
            self.error(f"unrecognized option {name}" + (f" (did you mean {close}?)" if close else ""))
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        """Exit with the usage and ``message``, argparse's lists of arguments said as a person would."""
        if found := re.fullmatch(r"one of the arguments (.+) is required", message):
            *first, last = found.group(1).split()
            message = f"give one of {', '.join(first)} or {last}"
        super().error(message)


class _Parser(argparse.ArgumentParser):
    """The top-level parser: words left over after a command are named with that command's usage."""

    def parse_args(self, args: Any = None, namespace: Any = None) -> Any:
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            sub = _subparsers(self).get(getattr(parsed, "command", None) or "")
            (sub or self).error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _add_command(sub: argparse._SubParsersAction[_CommandParser], c: Command, full: bool) -> None:
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
    _global_options(p, after=True, own=_long_options(p))


def _place_in_help(c: Command) -> int:
    return COMMAND_MODULES.index(c.handler.__module__.rsplit(".", 1)[-1])


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The argument parser, with every command and its example; with ``only`` a command's name,
    that command alone, and with ``only=""`` every command without its options (for the list of
    commands), so that running a command builds no other's parser: each costs argparse a lookup of
    its translations. The global options (--db, --collection, --schema) are taken before the
    command or after it."""
    parser = _Parser(prog="neardup", description="A near-duplicate document index in PostgreSQL.")
    _global_options(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_CommandParser)
    if only:
        _add_command(sub, COMMANDS[only], True)
        return parser
    for c in sorted(COMMANDS.values(), key=_place_in_help):
        _add_command(sub, c, only is None)
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
    from neardup.cli import hints
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
        print(f"neardup: error: {hints.message(exc)}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        print("neardup: interrupted", file=sys.stderr)
        return 130
