"""Reading records from files: JSONL, CSV, TSV, plain text, gzip, directories and standard input.

Every record carries where it came from (file and line), so a bad one can be named exactly. A
UTF-8 byte-order mark at the start of a file (what Windows tools write) is skipped; any other
problem (not UTF-8, not JSON, a missing field) raises InputError naming file, line and field.
"""

from __future__ import annotations

import csv
import gzip
import json
import os
import sys
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Literal, NamedTuple, cast

from neardup.errors import InputError
from neardup.records import Document, SeenIds, document_of

Format = Literal["jsonl", "csv", "tsv", "txt"]
FORMATS: tuple[Format, ...] = ("jsonl", "csv", "tsv", "txt")
# CSV fields can hold whole documents; the csv module's default limit (128 KiB) is too small.
csv.field_size_limit(2**31 - 1)
UTF8_BOM = b"\xef\xbb\xbf"
UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")

# A longer "document" is almost always a dump or a concatenation mistaken for one; its shingles
# alone take 4 bytes a character in memory. Real ones get through with --max-text-length.
DEFAULT_MAX_TEXT_LENGTH = 10_000_000


class SourceRecord(NamedTuple):
    """One input record: id, text, other fields, and its place (``file:line``). A named tuple: made
    once a record, in half the time of a frozen dataclass."""

    id: str
    text: str
    meta: dict[str, Any] | None
    where: str
    raw: str


@dataclass(frozen=True)
class BadRecord:
    """An input record that was refused: where it is, why, and its raw line."""

    where: str
    reason: str
    raw: str


OnBad = Callable[[BadRecord], None]


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


def _utf16_problem(name: str) -> InputError:
    return InputError(
        f"{name}: the file is UTF-16 (it starts with a UTF-16 byte-order mark); convert it to UTF-8"
    )


def _decoded(data: bytes, where: str) -> str:
    """``data`` as UTF-8 text, or InputError naming ``where`` and the byte at fault."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{where}: not valid UTF-8 ({exc.reason} at byte {exc.start} of the line)") from exc


class _Lines:
    """The lines of one input, decoded as UTF-8 one line at a time; remembers the last line read."""

    def __init__(self, name: str, on_bad: OnBad | None) -> None:
        self.name, self.on_bad, self.last = name, on_bad, 0

    def read(self, stream: BinaryIO) -> Iterator[tuple[int, str]]:
        """(line number, text) of each line; a line that is not UTF-8 raises or goes to ``on_bad``.
        A UTF-8 byte-order mark opening the first line is dropped; a UTF-16 one refuses the file."""
        for n, data in enumerate(stream, 1):
            self.last = n
            if n == 1:
                if data.startswith(UTF16_BOMS):
                    raise _utf16_problem(self.name)
                data = data.removeprefix(UTF8_BOM)
            try:
                yield n, _decoded(data, f"{self.name}:{n}")
            except InputError as problem:
                if self.on_bad is None:
                    raise
                self.on_bad(BadRecord(f"{self.name}:{n}", str(problem), data.decode("utf-8", "replace")))


def check_paths(paths: Sequence[str]) -> None:
    """Refuse, before anything is read, a path that does not exist or cannot be read."""
    for path in paths:
        if path != "-" and not Path(path).exists():
            raise InputError(f"{path}: no such file or directory")
        if path != "-" and not os.access(path, os.R_OK):
            raise InputError(f"{path}: permission denied")


def read_text(path: str) -> str:
    """The whole of one file (gzip detected by content) or of standard input (``-``) as one
    text, without a leading UTF-8 byte-order mark; InputError naming the file if it cannot be."""
    name = "<stdin>" if path == "-" else path
    if path != "-" and Path(path).is_dir():
        raise InputError(f"{name}: is a directory, not a file")
    try:
        with _open_binary(path) as stream:
            data = stream.read()
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise InputError(f"{name}: compressed data is damaged or cut short ({exc})") from exc
    except OSError as exc:
        raise InputError(f"{name}: {exc.strerror or exc}") from exc
    if data.startswith(UTF16_BOMS):
        raise _utf16_problem(name)
    data = data.removeprefix(UTF8_BOM)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(f"{name}:{line}: not valid UTF-8 ({exc.reason} at byte {exc.start})") from exc


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
            yield from _read_directory(Path(path), on_bad)
            continue
        kind = fmt or (guess_format(path) if path != "-" else "jsonl")
        name = "<stdin>" if path == "-" else path
        lines = _Lines(name, on_bad)
        count = 0
        try:
            with _open_binary(path) as stream:
                for record in _parse(kind, lines.read(stream), name, id_field, text_field, on_bad):
                    count += 1
                    yield record
        except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
            problem = InputError(
                f"{name}: compressed data is damaged or cut short after line {lines.last} ({exc})"
            )
            if on_bad is None:
                raise problem from exc
            on_bad(BadRecord(f"{name}:{lines.last + 1}", str(problem), ""))
            continue
        except OSError as exc:
            raise InputError(f"{name}: {exc.strerror or exc}") from exc
        if count == 0 and lines.last == 0:
            problem = InputError(f"{name}: the file is empty")
            if on_bad is None:
                raise problem
            on_bad(BadRecord(name, str(problem), ""))


def _parse(
    kind: str,
    lines: Iterator[tuple[int, str]],
    name: str,
    id_field: str,
    text_field: str,
    on_bad: OnBad | None,
) -> Iterator[SourceRecord]:
    if kind == "jsonl":
        return _read_jsonl(lines, name, id_field, text_field, on_bad)
    if kind in ("csv", "tsv"):
        return _read_table(lines, name, id_field, text_field, "," if kind == "csv" else "\t", on_bad)
    return (
        SourceRecord(f"{name}:{n}", line.rstrip("\n").rstrip("\r"), None, f"{name}:{n}", line)
        for n, line in lines
    )


def _field(rec: dict[str, Any], key: str, where: str) -> str:
    if key not in rec:
        raise InputError(f"{where}: field {key!r} is missing")
    value = rec[key]
    if isinstance(value, int) and not isinstance(value, bool) and key != "text":
        return str(value)  # numeric ids are common in JSONL; they become their decimal text
    if not isinstance(value, str):
        raise InputError(f"{where}: field {key!r} must be a string, got {type(value).__name__}")
    return value


def _json_line(line: str, where: str) -> Any:
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise InputError(f"{where}: not valid JSON ({exc.msg}, column {exc.colno})") from exc
    except RecursionError as exc:
        raise InputError(f"{where}: JSON nested too deeply to read") from exc
    except ValueError as exc:  # an integer of more than 4,300 digits
        raise InputError(f"{where}: not readable JSON ({exc})") from exc


def _read_jsonl(
    lines: Iterator[tuple[int, str]], name: str, id_field: str, text_field: str, bad: OnBad | None
) -> Iterator[SourceRecord]:
    for n, line in lines:
        if not line.strip():
            continue
        where = f"{name}:{n}"
        try:
            rec = _json_line(line, where)
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
    try:
        header = next(reader, None) or []
    except csv.Error as exc:
        raise InputError(f"{name}:{numbers[0]}: not a readable header row ({exc})") from exc
    for key in (id_field, text_field):
        if key not in header:
            raise InputError(f"{name}:1: column {key!r} is missing (columns: {', '.join(header) or 'none'})")
    while True:
        try:
            row = next(reader, None)
        except csv.Error as exc:  # a NUL byte, or a quoted field the file ends inside of
            problem = InputError(f"{name}:{numbers[0]}: not a readable row ({exc})")
            if bad is None:
                raise problem from exc
            bad(BadRecord(f"{name}:{numbers[0]}", str(problem), ""))
            continue
        if row is None:
            return
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


def _read_directory(root: Path, on_bad: OnBad | None) -> Iterator[SourceRecord]:
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        try:
            text = _file_text(path)
        except InputError as problem:
            if on_bad is None:
                raise
            on_bad(BadRecord(str(path), str(problem), ""))
            continue
        yield SourceRecord(rel, text, None, str(path), "")


def _file_text(path: Path) -> str:
    """One file of a directory as text: gzip detected by content, a UTF-8 byte-order mark dropped."""
    try:
        data = path.read_bytes()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise InputError(f"{path}: compressed data is damaged or cut short ({exc})") from exc
    except OSError as exc:
        raise InputError(f"{path}: {exc.strerror or exc}") from exc
    if data.startswith(UTF16_BOMS):
        raise _utf16_problem(str(path))
    try:
        return data.removeprefix(UTF8_BOM).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not valid UTF-8 ({exc.reason} at byte {exc.start})") from exc


def checked(
    records: Iterable[SourceRecord], on_bad: OnBad | None = None, max_text_length: int | None = None
) -> Iterator[Document]:
    """Records as the index takes them, each checked where it was read (file:line): a bad record,
    a text over ``max_text_length`` characters or an id repeated anywhere in the input raises
    InputError, or with ``on_bad`` is reported there and left out. An empty or whitespace-only
    text is a document like any other (stored, nobody's duplicate)."""
    seen = SeenIds()
    for r in records:
        try:
            document = document_of(r.id, r.text, r.meta, r.where)
            doc_id, text = document.id, document.text
            if max_text_length is not None and len(text) > max_text_length:
                raise InputError(
                    f"{r.where} (id {doc_id!r:.80}): field 'text' has {len(text):,} characters, over the "
                    f"limit of {max_text_length:,} (--max-text-length)"
                )
            if (earlier := seen.place_of(doc_id)) is not None:
                raise InputError(f"{r.where}: id {doc_id!r:.80} repeats {earlier}")
        except InputError as exc:
            if on_bad is None:
                raise
            on_bad(BadRecord(r.where, str(exc), r.raw))
            continue
        seen.add(doc_id, r.where)
        yield document
