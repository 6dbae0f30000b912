"""Reading records from files: JSONL, CSV, TSV, plain text, gzip, directories and standard input.

Every record carries where it came from (file and line), so a bad one can be named exactly.
"""

from __future__ import annotations

import csv
import gzip
import json
import os
import sys
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Literal, NamedTuple, cast

import numpy as np

from neardup.errors import InputError

Format = Literal["jsonl", "csv", "tsv", "txt"]
FORMATS: tuple[Format, ...] = ("jsonl", "csv", "tsv", "txt")
# CSV fields can hold whole documents; the csv module's default limit (128 KiB) is too small.
csv.field_size_limit(2**31 - 1)


Record = tuple[str, str] | tuple[str, str, Mapping[str, Any] | None] | Mapping[str, Any]
# Ids are keys of a btree index, whose entries must fit in a third of an 8 KiB page (2,704 bytes);
# 2,000 leaves room for the rest of the entry and refuses a too-long id before it reaches SQL.
ID_MAX_BYTES = 2000


class CheckedRecord(NamedTuple):
    """A record ``check_record`` accepted (meta as jsonb will store it); not checked again."""

    id: str
    text: str
    meta: dict[str, Any] | None


def check_record(record: Record, where: str) -> CheckedRecord:
    """(id, text, meta) of one record, or InputError naming ``where`` and the field that is wrong.
    A CheckedRecord is returned as it is: the command line checks where it reads (file:line), and
    ``Index.add`` does not repeat the work."""
    if type(record) is CheckedRecord:
        return record
    if isinstance(record, Mapping):
        if "id" not in record or "text" not in record:
            missing = "id" if "id" not in record else "text"
            raise InputError(f"{where}: field {missing!r} is missing")
        doc_id, text, meta = record["id"], record["text"], record.get("meta")
    elif isinstance(record, tuple) and len(record) in (2, 3):
        doc_id, text = record[0], record[1]
        meta = record[2] if len(record) == 3 else None
    else:
        raise InputError(
            f"{where}: expected (id, text), (id, text, meta) or a dict, got {type(record).__name__}"
        )
    if not isinstance(doc_id, str) or not doc_id:
        raise InputError(f"{where}: field 'id' must be a non-empty string, got {doc_id!r:.80}")
    if len(doc_id) > ID_MAX_BYTES // 4 and len(doc_id.encode("utf-8", "replace")) > ID_MAX_BYTES:
        raise InputError(f"{where}: field 'id' is longer than {ID_MAX_BYTES} bytes ({doc_id!r:.80}...)")
    if not isinstance(text, str):
        raise InputError(
            f"{where} (id {doc_id!r:.80}): field 'text' must be a string, got {type(text).__name__}"
        )
    for field_name, value in (("id", doc_id), ("text", text)):
        if "\x00" in value:
            raise InputError(f"{where} (id {doc_id!r:.80}): field {field_name!r} contains a NUL character")
        if not value.isascii() and not _encodable(value):
            raise InputError(
                f"{where} (id {doc_id!r:.80}): field {field_name!r} is not valid Unicode (a lone surrogate)"
            )
    if meta is None:
        return CheckedRecord(doc_id, text, None)
    if not isinstance(meta, Mapping):
        raise InputError(
            f"{where} (id {doc_id!r:.80}): field 'meta' must be a mapping, got {type(meta).__name__}"
        )
    return CheckedRecord(doc_id, text, _json_object(meta, f"{where} (id {doc_id!r:.80}): field 'meta'"))


def _encodable(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _json_object(meta: Mapping[str, Any], where: str) -> dict[str, Any]:
    """``meta`` as PostgreSQL's jsonb will store it (a JSON round trip), or InputError saying why not."""
    try:
        dumped = json.dumps(meta, ensure_ascii=False, allow_nan=False)
        dumped.encode("utf-8")
    except (TypeError, ValueError) as exc:  # UnicodeEncodeError is a ValueError
        raise InputError(f"{where} is not storable as JSON ({exc})") from exc
    loaded: dict[str, Any] = json.loads(dumped)
    if _has_nul(loaded):
        raise InputError(f"{where} contains a NUL character, which jsonb cannot store")
    return loaded


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_nul(v) for v in value)
    return False


# A longer "document" is almost always a dump or a concatenation mistaken for one; its shingles
# alone take 4 bytes a character in memory. Real ones get through with --max-text-length.
DEFAULT_MAX_TEXT_LENGTH = 10_000_000


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


class _Lines:
    """The lines of one input, decoded as UTF-8 one line at a time; remembers the last line read."""

    def __init__(self, name: str, on_bad: OnBad | None) -> None:
        self.name, self.on_bad, self.last = name, on_bad, 0

    def read(self, stream: BinaryIO) -> Iterator[tuple[int, str]]:
        """(line number, text) of each line; a line that is not UTF-8 raises or goes to ``on_bad``."""
        for n, data in enumerate(stream, 1):
            self.last = n
            try:
                yield n, data.decode("utf-8")
            except UnicodeDecodeError as exc:
                problem = InputError(
                    f"{self.name}:{n}: not valid UTF-8 ({exc.reason} at byte {exc.start} of the line)"
                )
                if self.on_bad is None:
                    raise problem from exc
                self.on_bad(BadRecord(f"{self.name}:{n}", str(problem), data.decode("utf-8", "replace")))


def check_paths(paths: Sequence[str]) -> None:
    """Refuse, before anything is read, a path that does not exist or cannot be read."""
    for path in paths:
        if path != "-" and not Path(path).exists():
            raise InputError(f"{path}: no such file or directory")
        if path != "-" and not os.access(path, os.R_OK):
            raise InputError(f"{path}: permission denied")


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


def checked_records(
    records: Iterable[SourceRecord], on_bad: OnBad | None = None, max_text_length: int | None = None
) -> Iterator[CheckedRecord]:
    """Records as the index takes them, each checked where it was read (file:line): a bad record, an
    empty or whitespace-only text, a text over ``max_text_length`` characters or an id repeated in
    the input raises InputError, or with ``on_bad`` is reported there and left out."""
    seen = _SeenIds()
    for r in records:
        try:
            checked = check_record({"id": r.id, "text": r.text, "meta": r.meta}, r.where)
            doc_id, text = checked.id, checked.text
            if not text.strip():
                raise InputError(f"{r.where} (id {doc_id!r:.80}): field 'text' is empty or only whitespace")
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
        yield checked


# Ids seen are moved from a dict into sorted numpy arrays this often: a dict entry costs ~170 bytes
# an id with its place (measured with tracemalloc: 167 MB for 1M), the arrays 16.
_MERGE_EVERY = 50_000


class _SeenIds:
    """The ids read so far and where each was read, in about 16 bytes an id, so reading stays flat
    in memory: 64-bit hashes of the ids with their places in sorted arrays, the newest in a dict.
    Two different ids with equal 64-bit hashes would be taken for a repeat (odds ~n²/2⁶⁵)."""

    def __init__(self) -> None:
        self._hashes = np.empty(0, np.int64)
        self._places = np.empty(0, np.int64)
        self._recent: dict[int, int] = {}
        self._sources: dict[str, int] = {}
        self._names: list[str] = []

    def place_of(self, doc_id: str) -> str | None:
        """Where ``doc_id`` was read before (``file:line``), or None."""
        key = hash(doc_id)
        place = self._recent.get(key)
        if place is None and self._hashes.size:
            i = int(np.searchsorted(self._hashes, key))
            if i < self._hashes.size and self._hashes[i] == key:
                place = int(self._places[i])
        if place is None:
            return None
        name, line = self._names[place >> 40], place & ((1 << 40) - 1)
        return f"{name}:{line}" if line else name

    def add(self, doc_id: str, where: str) -> None:
        """Remember that ``doc_id`` was read at ``where`` (``file:line``, or a file of a directory)."""
        name, _, line = where.rpartition(":")
        if not name or not line.isdigit():
            name, line = where, "0"
        source = self._sources.get(name)
        if source is None:
            source = self._sources[name] = len(self._names)
            self._names.append(name)
        self._recent[hash(doc_id)] = (source << 40) | int(line)
        if len(self._recent) >= _MERGE_EVERY:
            hashes = np.concatenate([self._hashes, np.fromiter(self._recent.keys(), np.int64)])
            places = np.concatenate([self._places, np.fromiter(self._recent.values(), np.int64)])
            order = np.argsort(hashes, kind="stable")
            self._hashes, self._places, self._recent = hashes[order], places[order], {}


# The names the rest of the package uses (records.py is being split from its readers).
Document = CheckedRecord
to_document = check_record


def documents(records: Iterable[Record], start: int = 0) -> Iterator[Document]:
    """Each record checked (``record N`` naming its place), refusing an id repeated anywhere in
    ``records`` with InputError naming both places."""
    seen = _SeenIds()
    for n, record in enumerate(records, start):
        where = f"record {n}"
        document = to_document(record, where)
        if (earlier := seen.place_of(document.id)) is not None:
            raise InputError(f"{where}: id {document.id!r:.80} repeats {earlier}")
        seen.add(document.id, where)
        yield document
