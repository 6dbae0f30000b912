"""Reading records from files: JSONL, CSV, TSV, plain text, gzip, directories and standard input.

Every record carries where it came from (file and line), so a bad one can be named exactly.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

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
def _open_text(path: str) -> Iterator[io.TextIOWrapper]:
    """The file (or standard input) as UTF-8 text, decompressed when it starts with gzip's magic."""
    if path == "-":
        wrapper = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="strict", newline="")
        try:
            yield wrapper
        finally:
            wrapper.detach()  # leave standard input open for the caller
        return
    with Path(path).open("rb") as raw:
        stream: Any = gzip.GzipFile(fileobj=raw) if raw.peek(2)[:2] == b"\x1f\x8b" else raw
        with io.TextIOWrapper(stream, encoding="utf-8", errors="strict", newline="") as text:
            yield text


def read_records(
    paths: Sequence[str], fmt: Format | None = None, id_field: str = "id", text_field: str = "text"
) -> Iterator[SourceRecord]:
    """Records from files (gzip detected by content), directories (one document per file, id = the
    relative path) and ``-`` (standard input); bad input raises InputError naming file, line, field."""
    for path in paths:
        if path != "-" and Path(path).is_dir():
            yield from _read_directory(Path(path))
            continue
        kind = fmt or (guess_format(path) if path != "-" else "jsonl")
        name = "<stdin>" if path == "-" else path
        try:
            with _open_text(path) as f:
                if kind == "jsonl":
                    yield from _read_jsonl(f, name, id_field, text_field)
                elif kind in ("csv", "tsv"):
                    yield from _read_table(f, name, id_field, text_field, "," if kind == "csv" else "\t")
                else:
                    for n, line in enumerate(f, 1):
                        text = line.rstrip("\n").rstrip("\r")
                        yield SourceRecord(f"{name}:{n}", text, None, f"{name}:{n}", line)
        except UnicodeDecodeError as exc:
            raise InputError(f"{name}: not valid UTF-8 ({exc.reason} at byte {exc.start})") from exc
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


def _read_jsonl(f: io.TextIOWrapper, name: str, id_field: str, text_field: str) -> Iterator[SourceRecord]:
    for n, line in enumerate(f, 1):
        if not line.strip():
            continue
        where = f"{name}:{n}"
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{where}: not valid JSON ({exc.msg}, column {exc.colno})") from exc
        if not isinstance(rec, dict):
            raise InputError(f"{where}: expected a JSON object, got {type(rec).__name__}")
        doc_id, text = _field(rec, id_field, where), _field(rec, text_field, where)
        meta = {k: v for k, v in rec.items() if k not in (id_field, text_field)} or None
        yield SourceRecord(doc_id, text, meta, where, line)


def _read_table(
    f: io.TextIOWrapper, name: str, id_field: str, text_field: str, delimiter: str
) -> Iterator[SourceRecord]:
    reader = csv.DictReader(f, delimiter=delimiter)
    header = reader.fieldnames or []
    for key in (id_field, text_field):
        if key not in header:
            raise InputError(f"{name}:1: column {key!r} is missing (columns: {', '.join(header) or 'none'})")
    for rec in reader:
        where = f"{name}:{reader.line_num}"
        if None in rec or any(v is None for v in rec.values()):
            raise InputError(f"{where}: expected {len(header)} columns")
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
