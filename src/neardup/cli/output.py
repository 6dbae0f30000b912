"""Writing results: rows in tsv, csv, jsonl or json on stdout, and files named by an option."""

from __future__ import annotations

import csv
import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

OUTPUT_FORMATS = ("tsv", "csv", "jsonl", "json")
Row = Sequence[Any]


def writer(fmt: str, columns: Sequence[str], out: TextIO) -> Callable[[Row | None], None]:
    """A function that writes one row in ``fmt``; call it with None at the end."""
    rows: list[dict[str, Any]] = []
    if fmt in ("tsv", "csv"):
        w = csv.writer(out, delimiter="\t" if fmt == "tsv" else ",", lineterminator="\n")
        w.writerow(columns)

        def write(row: Row | None) -> None:
            if row is not None:
                w.writerow(["true" if v is True else "false" if v is False else v for v in row])

        return write

    def write_json(row: Row | None) -> None:
        if row is None:
            if fmt == "json":
                json.dump(rows, out, ensure_ascii=False)
                out.write("\n")
            return
        record = dict(zip(columns, row, strict=True))
        if fmt == "jsonl":
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
        else:
            rows.append(record)

    return write_json


def emit(fmt: str, columns: Sequence[str], rows: Iterable[Row]) -> None:
    """Write ``rows`` under ``columns`` to stdout in ``fmt``."""
    write = writer(fmt, columns, sys.stdout)
    for row in rows:
        write(row)
    write(None)


def rounded(x: float) -> float:
    """A similarity or rate as printed: six decimals are more than a signature can resolve."""
    return round(float(x), 6)


def check_writable(path: str, option: str) -> None:
    """Refuse, before any work, an output path that cannot be written (OutputError naming it)."""
    from neardup.errors import OutputError

    target = Path(path)
    if target.is_dir():
        raise OutputError(f"{option} {path}: is a directory, not a file")
    folder = target.parent
    if not folder.is_dir():
        raise OutputError(f"{option} {path}: no such directory {str(folder)!r}")
    if not os.access(target if target.exists() else folder, os.W_OK):
        raise OutputError(f"{option} {path}: permission denied")


@contextmanager
def written(path: str, option: str) -> Iterator[None]:
    """Turns an OSError while writing ``path`` into one OutputError line naming it."""
    from neardup.errors import OutputError

    try:
        yield
    except OSError as exc:
        raise OutputError(f"{option} {path}: {exc.strerror or exc}") from exc


@contextmanager
def output_file(path: str, option: str, *, whole: bool = False) -> Iterator[TextIO]:
    """``path`` opened for writing text. With ``whole``, a regular file is written beside it and
    moved over it only when the block ends without an error, so nobody sees it half-written."""
    target = Path(path)
    staged = whole and (target.is_file() or not target.exists())
    temporary = target.with_name(f".{target.name}.neardup-{os.getpid()}") if staged else target
    try:
        with written(path, option), temporary.open("w", encoding="utf-8", newline="") as f:
            yield f
        if staged:
            with written(path, option):
                os.replace(temporary, target)
    finally:
        if staged:
            temporary.unlink(missing_ok=True)
