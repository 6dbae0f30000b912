"""Errors' hints in the command line's words: options as ``--exist-ok``, remedies as commands."""

from __future__ import annotations

from neardup.errors import Hint, NeardupError

REMEDIES: dict[str, str] = {
    "upgrade": "`neardup db upgrade`",
    "rebuild_neighbours": "`neardup rebuild --neighbours`",
    "changes_feed": "`neardup changes-feed on --collection {name}`",
    "follow_install": "`neardup follow --install` with the same options",
    "carry_across": (
        "with PostgreSQL {made} installed run `neardup backup --out FILE` (once per --schema), move "
        "{data_dir} aside, then with PostgreSQL {have} run `neardup restore FILE` and `neardup db upgrade`"
    ),
}


def option(hint: Hint) -> str:
    """The option a hint's keyword is on the command line: a flag alone, else with its value."""
    name = f"--{(hint.keyword or '').replace('_', '-')}"
    return name if hint.value is True else f"{name} {hint.value}"


def words(hint: Hint) -> str:
    """``hint`` as a command-line user reads it."""
    if hint.remedy is not None:
        return f"{hint.advice} {REMEDIES[hint.remedy].format(**dict(hint.fields))}"
    return f"{hint.advice} {option(hint)}"


def message(exc: NeardupError) -> str:
    """The error as the command line prints it."""
    return exc.worded(words)
