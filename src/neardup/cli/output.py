"""Writing results: rows in tsv, csv, jsonl or json on stdout, and files named by an option (Parquet
too, for the listings that give their columns' types)."""

from __future__ import annotations

import csv
import glob
import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, nullcontext, suppress
from pathlib import Path
from typing import Any, TextIO

OUTPUT_FORMATS = ("tsv", "csv", "jsonl", "json")
# Where a command's columns have types: a listing's rows as a Parquet file (needs pyarrow).
TABLE_FORMATS = (*OUTPUT_FORMATS, "parquet")
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


def emit(
    fmt: str,
    columns: Sequence[str],
    rows: Iterable[Row],
    *,
    out: str | None = None,
    types: Sequence[str] | None = None,
) -> None:
    """Write ``rows`` under ``columns`` in ``fmt`` to stdout, or with ``out`` to that file (whole or
    not at all). Parquet needs ``out`` and the columns' ``types`` (as pyarrow names them)."""
    if fmt == "parquet":
        _emit_parquet(columns, rows, out, types)
        return
    if out is None:
        _write_rows(fmt, columns, rows, sys.stdout)
        return
    check_writable(out, "--out")
    with output_file(out, "--out", whole=True) as f:
        _write_rows(fmt, columns, rows, f)


def emit_record(fmt: str, record: dict[str, Any]) -> None:
    """One record (a command's report, not a listing) to stdout: as one JSON object with typed
    values in ``json`` and ``jsonl`` (nested objects and lists kept), else as name and value rows,
    nested names joined by dots (``params.bands``) and list items numbered from 1."""
    if fmt in ("json", "jsonl"):
        json.dump(record, sys.stdout, ensure_ascii=False, indent=2 if fmt == "json" else None)
        sys.stdout.write("\n")
        return
    _write_rows(fmt, ["name", "value"], _flattened(record, ""), sys.stdout)


def _flattened(value: Any, name: str) -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _flattened(inner, f"{name}.{key}" if name else str(key))
    elif isinstance(value, list):
        for n, inner in enumerate(value, 1):
            if isinstance(inner, dict):  # a list item on one row: its fields as name value pairs
                yield f"{name}.{n}", " ".join(f"{k} {v}" for k, v in inner.items())
            else:
                yield from _flattened(inner, f"{name}.{n}")
    else:
        yield name, value


def _write_rows(fmt: str, columns: Sequence[str], rows: Iterable[Row], out: TextIO) -> None:
    write = writer(fmt, columns, out)
    for row in rows:
        write(row)
    write(None)


def _emit_parquet(
    columns: Sequence[str], rows: Iterable[Row], out: str | None, types: Sequence[str] | None
) -> None:
    from neardup.arrow import require
    from neardup.errors import OutputError

    if out is None or types is None:
        raise OutputError("--format parquet writes a file: give it with --out FILE")
    check_writable(out, "--out")
    require()
    from neardup.arrow.writing import write_parquet

    with staged(out, "--out") as path:
        write_parquet(str(path), columns, types, rows)


def counted(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless there is one: ``1 cluster``, ``12 documents``."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


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


# The name of the file a write of ``NAME`` goes to before it is moved over ``NAME``: ``.NAME`` and
# this, then the writing process's id.
_STAGED = ".neardup-"


def _remove_stale(target: Path) -> None:
    """Delete the files that writes of ``target`` by processes that are gone left beside it (a
    process killed with SIGKILL cannot delete its own)."""
    for left in target.parent.glob(f".{glob.escape(target.name)}{_STAGED}*"):
        pid = left.name.rsplit(_STAGED, 1)[1]
        if not (pid.isascii() and pid.isdigit()) or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            left.unlink(missing_ok=True)
        except (PermissionError, OverflowError):  # alive as someone else, or no process id at all
            continue


@contextmanager
def staged(path: str, option: str) -> Iterator[Path]:
    """Where to write ``path``: for a regular file (or a new one), a file beside it, moved over it
    only when the block ends without an error, so nobody sees it half-written; else ``path``
    itself (a pipe, a device). Files such writes left beside ``path`` when their process was
    killed are deleted first. An OSError becomes an OutputError naming ``path``."""
    target = Path(path)
    beside = target.is_file() or not target.exists()
    if beside:
        with suppress(OSError):  # a folder that cannot be listed is found out by the write
            _remove_stale(target)
    temporary = target.with_name(f".{target.name}{_STAGED}{os.getpid()}") if beside else target
    try:
        with written(path, option):
            yield temporary
            if beside:
                os.replace(temporary, target)
    finally:
        if beside:
            temporary.unlink(missing_ok=True)


@contextmanager
def output_file(path: str, option: str, *, whole: bool = False) -> Iterator[TextIO]:
    """``path`` opened for writing text; with ``whole``, written as ``staged`` writes it."""
    with (
        staged(path, option) if whole else nullcontext(Path(path)) as target,
        written(path, option),
        target.open("w", encoding="utf-8", newline="") as f,
    ):
        yield f
