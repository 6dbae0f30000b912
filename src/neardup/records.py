"""Reading records from files: JSONL, CSV, TSV, plain text, gzip, directories and standard input.

Every record carries where it came from (file and line), so a bad one can be named exactly.
"""

from __future__ import annotations

import csv
import gzip
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Literal, cast

from neardup.errors import InputError

Format = Literal["jsonl", "csv", "tsv", "txt"]
FORMATS: tuple[Format, ...] = ("jsonl", "csv", "tsv", "txt")
# CSV fields can hold whole documents; the csv module's default limit (128 KiB) is too small.
csv.field_size_limit(2**31 - 1)


@dataclass(frozen=True)
class SourceRecord:
    """One input record: id, text, other fields, and its place (``file:line``)."""

    id: str
    text: str
    meta: dict[str, Any] | None
    where: str
    raw: str


def guess_format(path: str) -> Format:
    """The format a file name suggests (``.jsonl``, ``.csv``, ``.tsv``, else ``txt``), gzip or not."""
    name = path[:-3] if path.endswith(".gz") else path
    for fmt, suffixes in (("jsonl", (".jsonl", ".ndjson", ".json")), ("csv", (".csv",)), ("tsv", (".tsv",))):
        if name.endswith(suffixes):
            return fmt  # type: ignore[return-value]
    return "txt"


@contextmanager
def _open_binary(path: str) -> Iterator[BinaryIO]:
    """The file (or standard input) as bytes, decompressed when it starts with gzip's magic."""
    if path == "-":
        yield sys.stdin.buffer
        return
    with Path(path).open("rb") as raw:
        if raw.peek(2)[:2] == b"\x1f\x8b":
            with gzip.GzipFile(fileobj=raw) as unzipped:
                yield cast(BinaryIO, unzipped)
        else:
            yield raw


@dataclass(frozen=True)
class BadRecord:
    """An input record that was refused: where it is, why, and its raw line."""

    where: str
    reason: str
    raw: str


OnBad = Callable[[BadRecord], None]


def _lines(stream: BinaryIO, name: str, bad: OnBad | None) -> Iterator[tuple[int, str]]:
    """(line number, text) of each line, decoded as UTF-8 one line at a time."""
    for n, data in enumerate(stream, 1):
        try:
            yield n, data.decode("utf-8")
        except UnicodeDecodeError as exc:
            problem = InputError(
                f"{name}:{n}: not valid UTF-8 ({exc.reason} at byte {exc.start} of the line)"
            )
            if bad is None:
                raise problem from exc
            bad(BadRecord(f"{name}:{n}", str(problem), data.decode("utf-8", "replace")))


def read_records(
    paths: Sequence[str],
    fmt: Format | None = None,
    id_field: str = "id",
    text_field: str = "text",
    on_bad: OnBad | None = None,
) -> Iterator[SourceRecord]:
    """Records from files (gzip detected by content), directories (one document per file, id = the
    relative path) and ``-`` (standard input). A bad record raises InputError naming file, line and
    field; with ``on_bad`` it is reported there instead and reading goes on."""
    for path in paths:
        if path != "-" and Path(path).is_dir():
            yield from _read_directory(Path(path))
            continue
        kind = fmt or (guess_format(path) if path != "-" else "jsonl")
        name = "<stdin>" if path == "-" else path
        try:
            with _open_binary(path) as stream:
                lines = _lines(stream, name, on_bad)
                if kind == "jsonl":
                    yield from _read_jsonl(lines, name, id_field, text_field, on_bad)
                elif kind in ("csv", "tsv"):
                    yield from _read_table(
                        lines, name, id_field, text_field, "," if kind == "csv" else "\t", on_bad
                    )
                else:
                    for n, line in lines:
                        yield SourceRecord(
                            f"{name}:{n}", line.rstrip("\n").rstrip("\r"), None, f"{name}:{n}", line
                        )
        except (EOFError, gzip.BadGzipFile) as exc:
            raise InputError(f"{name}: compressed file is damaged or cut short ({exc})") from exc
        except OSError as exc:
            raise InputError(f"{name}: {exc.strerror or exc}") from exc


def _field(rec: dict[str, Any], key: str, where: str) -> str:
    if key not in rec:
        raise InputError(f"{where}: field {key!r} is missing")
    value = rec[key]
    if isinstance(value, int) and not isinstance(value, bool) and key != "text":
        return str(value)  # numeric ids are common in JSONL; they become their decimal text
    if not isinstance(value, str):
        raise InputError(f"{where}: field {key!r} must be a string, got {type(value).__name__}")
    return value


def _read_jsonl(
    lines: Iterator[tuple[int, str]], name: str, id_field: str, text_field: str, bad: OnBad | None
) -> Iterator[SourceRecord]:
    for n, line in lines:
        if not line.strip():
            continue
        where = f"{name}:{n}"
        try:
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"{where}: not valid JSON ({exc.msg}, column {exc.colno})") from exc
            if not isinstance(rec, dict):
                raise InputError(f"{where}: expected a JSON object, got {type(rec).__name__}")
            doc_id, text = _field(rec, id_field, where), _field(rec, text_field, where)
        except InputError as exc:
            if bad is None:
                raise
            bad(BadRecord(where, str(exc), line))
            continue
        meta = {k: v for k, v in rec.items() if k not in (id_field, text_field)} or None
        yield SourceRecord(doc_id, text, meta, where, line)


def _read_table(
    lines: Iterator[tuple[int, str]],
    name: str,
    id_field: str,
    text_field: str,
    delimiter: str,
    bad: OnBad | None,
) -> Iterator[SourceRecord]:
    numbers: list[int] = [0]

    def texts() -> Iterator[str]:
        for n, line in lines:
            numbers[0] = n
            yield line

    reader = csv.reader(texts(), delimiter=delimiter)
    header = next(reader, None) or []
    for key in (id_field, text_field):
        if key not in header:
            raise InputError(f"{name}:1: column {key!r} is missing (columns: {', '.join(header) or 'none'})")
    for row in reader:
        where = f"{name}:{numbers[0]}"
        if len(row) != len(header):
            problem = InputError(f"{where}: expected {len(header)} columns, got {len(row)}")
            if bad is None:
                raise problem
            bad(BadRecord(where, str(problem), delimiter.join(row)))
            continue
        rec = dict(zip(header, row, strict=True))
        meta = {k: v for k, v in rec.items() if k not in (id_field, text_field)} or None
        yield SourceRecord(rec[id_field], rec[text_field], meta, where, "")


def _read_directory(root: Path) -> Iterator[SourceRecord]:
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        try:
            data = path.read_bytes()
            text = (gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(f"{path}: not valid UTF-8 ({exc.reason} at byte {exc.start})") from exc
        yield SourceRecord(rel, text, None, str(path), "")
