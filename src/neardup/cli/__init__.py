"""The ``neardup`` command line: parse, call the library, format. Data on stdout, messages on stderr.

One module per group of commands (``collections``, ``ingest``, ``listing``, ``evaluate``,
``follow``, ``schema``, ``server``, ``tokens``, ``labels``); in each, a command's options sit right above its
handler and its docstring is its help (``command``). Shared option groups are in ``options``,
output formats in ``output``, where the database is in ``connect``, the parser and ``main`` in
``main``. The library is imported inside the handlers, so ``neardup --help`` starts at once.
"""

from __future__ import annotations

from typing import Any

from neardup.cli.command import COMMANDS
from neardup.cli.evaluate import EVAL_COLUMNS
from neardup.cli.main import build_parser, main
from neardup.cli.output import OUTPUT_FORMATS

# Each command's example, as its help shows it.
EXAMPLES = {name: c.example for name, c in COMMANDS.items()}


def __getattr__(name: str) -> Any:
    if name == "PARAM_OPTIONS":  # built from the library's parameters: imported when asked for
        from neardup.cli.options import parameter_options
        from neardup.config import PARAM_FIELDS

        options = parameter_options(new=True)
        return {field: options[field] for field in PARAM_FIELDS}
    raise AttributeError(f"module 'neardup.cli' has no attribute {name!r}")


__all__ = ["EVAL_COLUMNS", "EXAMPLES", "OUTPUT_FORMATS", "build_parser", "main"]
