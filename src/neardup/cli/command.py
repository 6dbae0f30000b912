"""How a command is declared: a handler, its options right above it, and its docstring as its help.

    def _options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--limit", type=POSITIVE)

    @command("pairs", _options)
    def cmd_pairs(args: argparse.Namespace) -> int:
        \"\"\"Every verified near-duplicate pair: id_a, id_b, jaccard.

        Example: neardup pairs --min-jaccard 0.9 --format csv > pairs.csv
        \"\"\"

The docstring's first paragraph is the command's one-line help, the paragraphs after it (line
breaks kept) its description, and its last paragraph, ``Example: ...``, the example under its help.
An options function runs only when its command's parser is built, so a module of commands imports
nothing of the library until one of them runs.
"""

from __future__ import annotations

import argparse
import inspect
from collections.abc import Callable
from dataclasses import dataclass

Handler = Callable[[argparse.Namespace], int]
Options = Callable[[argparse.ArgumentParser], None]

_EXAMPLE = "Example:"


@dataclass(frozen=True)
class Command:
    """A command as the parser shows it and main runs it."""

    name: str
    handler: Handler
    options: Options | None
    output: bool
    """Whether it writes rows to stdout (and so takes ``--format``)."""
    tables: bool
    """Whether its columns have types, so that it can write Parquet (and takes ``--out``)."""
    summary: str
    details: str
    example: str


# Every command, by name, as its module registers it (cli.main imports the modules).
COMMANDS: dict[str, Command] = {}


def command(
    name: str, options: Options | None = None, *, output: bool = True, tables: bool = False
) -> Callable[[Handler], Handler]:
    """Register the decorated handler as command ``name`` with its ``options``."""

    def register(handler: Handler) -> Handler:
        summary, details, example = help_of(handler)
        COMMANDS[name] = Command(name, handler, options, output, tables, summary, details, example)
        return handler

    return register


def help_of(handler: Handler) -> tuple[str, str, str]:
    """A handler's docstring as (summary, details, example); ValueError without an example."""
    paragraphs = inspect.cleandoc(handler.__doc__ or "").split("\n\n")
    if len(paragraphs) < 2 or not paragraphs[-1].startswith(_EXAMPLE):
        raise ValueError(f"{handler.__name__}: the docstring must end with a paragraph '{_EXAMPLE} ...'")
    summary = " ".join(paragraphs[0].split())
    example = " ".join(paragraphs[-1][len(_EXAMPLE) :].split())
    return summary, "\n\n".join(paragraphs[1:-1]), example
