"""Reading records from files: JSONL, CSV, TSV, plain text, gzip, directories and standard input.

Every record carries where it came from (file and line), so a bad one can be named exactly. A
UTF-8 byte-order mark at the start of a file (what Windows tools write) is skipped; any other
problem (not UTF-8, not JSON, a missing field) raises InputError naming file, line and field.

The formats, each as its standard has it:

- JSONL: one JSON object a line. Lines end at ``\\n`` (or ``\\r\\n``) only: U+2028, U+0085 and the
  other characters ``str.splitlines`` breaks at are ordinary characters inside a JSON string. An
  object naming a key twice is refused (JSON leaves open which one counts), and so is a JSON array.
- CSV: RFC 4180. A quoted field may hold commas, line breaks and doubled quotes (``""``); text after
  a closing quote, or a quoted field the file ends inside of, is refused naming the line the quote
  opened on.
- TSV: tab-separated values with no quoting and no escapes: a field is everything between two
  tabs, and a ``"`` is an ordinary character. A field cannot hold a tab or a line break.
- txt: one document a line; its id is ``file:line``.

Reading is bounded in memory: a line (a CSV record) longer than ``record_limit(max_text_length)``
bytes is refused when reading reaches that bound, so ``neardup add /dev/zero`` stops with an error.
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
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO, Literal, NamedTuple, cast

from neardup.errors import InputError
from neardup.records import Checked, Document, SeenIds, document_of
from neardup.strict_json import DuplicateKeyError, unique_keys
from neardup.text_limits import DEFAULT_MAX_TEXT_LENGTH, UTF8_BOM, record_limit, text_limit

Format = Literal["jsonl", "csv", "tsv", "txt"]
FORMATS: tuple[Format, ...] = ("jsonl", "csv", "tsv", "txt")
# CSV fields can hold whole documents; the csv module's default field limit is too small for them. The
# bound that holds is ours, on a whole record (record_limit), and it does not depend on this one.
csv.field_size_limit(2**31 - 1)
UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
GZIP_MAGIC = b"\x1f\x8b"
# Other compressed formats, by their magic bytes: read as text they would be "not UTF-8" at best.
OTHER_COMPRESSIONS = (
    (b"BZh", "bzip2"),  # and a block size, "1" to "9"
    (b"\xfd7zXZ\x00", "xz"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"PK\x03\x04", "zip"),
    (b"7z\xbc\xaf\x27\x1c", "7z"),
)


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


def _compression_problem(name: str, head: bytes) -> InputError | None:
    """Why a file starting with ``head`` (not gzip's magic) cannot be read: another compression,
    or a name ending in ``.gz``; None for a file that may be text."""
    for magic, kind in OTHER_COMPRESSIONS:
        if head.startswith(magic) and (kind != "bzip2" or head[3:4] in b"123456789"):
            return InputError(
                f"{name}: {kind}-compressed, not gzip: neardup reads gzip only; decompress it first"
            )
    if name.endswith(".gz"):
        return InputError(
            f"{name}: not gzip (named .gz, but it does not start with gzip's magic bytes 1f 8b)"
        )
    return None


@contextmanager
def _open_binary(path: str) -> Iterator[BinaryIO]:
    """The file (or standard input) as bytes, decompressed when it starts with gzip's magic; a file
    in another compressed format, or named ``.gz`` without being gzip, raises InputError."""
    if path == "-":
        yield sys.stdin.buffer
        return
    with Path(path).open("rb") as raw:
        head = raw.peek(16)[:16]
        if head.startswith(GZIP_MAGIC):
            with gzip.GzipFile(fileobj=raw) as unzipped:
                yield cast(BinaryIO, unzipped)
            return
        if problem := _compression_problem(path, head):
            raise problem
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


def _too_long(where: str, what: str, limit: int, max_text_length: int) -> InputError:
    """The error of a line, a record or a file that reading stopped in at ``limit`` bytes."""
    return InputError(
        f"{where}: {what} is longer than {limit:,} bytes, more than a record with a text of "
        f"{max_text_length:,} characters (--max-text-length) can take; reading stopped there"
    )


class _Lines:
    """The lines of one input, decoded as UTF-8 one line at a time; remembers the last line read.
    A line ends at ``\\n`` only (``\\r\\n`` too, its ``\\r`` left for the format to drop): never at
    U+2028, U+0085 or the other characters ``str.splitlines`` takes for line breaks."""

    def __init__(self, name: str, on_bad: OnBad | None, max_text_length: int) -> None:
        self.name, self.on_bad, self.last = name, on_bad, 0
        self.max_text_length, self.limit = max_text_length, record_limit(max_text_length)

    def read(self, stream: BinaryIO) -> Iterator[tuple[int, str]]:
        """(line number, text) of each line; a line that is not UTF-8 raises or goes to ``on_bad``.
        A UTF-8 byte-order mark opening the first line is dropped; a UTF-16 one refuses the file.
        A line longer than ``limit`` bytes raises InputError, even with ``on_bad``: its end, where
        the next record starts, is further than reading may go (``/dev/zero`` has none)."""
        limit = self.limit
        for n, data in enumerate(iter(partial(stream.readline, limit + 1), b""), 1):
            self.last = n
            if len(data) > limit:
                raise _too_long(f"{self.name}:{n}", "the line", limit, self.max_text_length)
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


def _whole(path: str, name: str, limit: int, max_text_length: int) -> bytes:
    """The bytes of one file (gzip detected by content) or of standard input, at most ``limit`` of
    them: InputError naming the file when there are more, or when it cannot be read."""
    try:
        with _open_binary(path) as stream:
            data = stream.read(limit + 1)
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise InputError(f"{name}: compressed data is damaged or cut short ({exc})") from exc
    except OSError as exc:
        raise InputError(f"{name}: {exc.strerror or exc}") from exc
    if len(data) > limit:
        raise _too_long(name, "the text", limit, max_text_length)
    if data.startswith(UTF16_BOMS):
        raise _utf16_problem(name)
    return data.removeprefix(UTF8_BOM)


def read_text(path: str, max_text_length: int = DEFAULT_MAX_TEXT_LENGTH) -> str:
    """The whole of one file (gzip detected by content) or of standard input (``-``) as one
    text, without a leading UTF-8 byte-order mark; InputError naming the file if it cannot be, or
    if the text has more than ``max_text_length`` characters (reading stops at that bound)."""
    name = "<stdin>" if path == "-" else path
    if path != "-" and Path(path).is_dir():
        raise InputError(f"{name}: is a directory, not a file")
    data = _whole(path, name, text_limit(max_text_length), max_text_length)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(f"{name}:{line}: not valid UTF-8 ({exc.reason} at byte {exc.start})") from exc
    if len(text) > max_text_length:
        raise InputError(
            f"{name}: the text has {len(text):,} characters, over the limit of {max_text_length:,} "
            "(--max-text-length)"
        )
    return text


def read_records(
    paths: Sequence[str],
    fmt: Format | None = None,
    id_field: str = "id",
    text_field: str = "text",
    on_bad: OnBad | None = None,
    max_text_length: int = DEFAULT_MAX_TEXT_LENGTH,
) -> Iterator[SourceRecord]:
    """Records from files (gzip detected by content) and ``-`` (standard input); a directory is
    read by ``neardup.inputs.read_inputs``, file by file. A bad record raises InputError naming
    file, line and field; with ``on_bad`` it is reported there instead and reading goes on.
    ``max_text_length`` bounds what one record may take to read (``record_limit``); the texts
    themselves are held to it by ``checked``."""
    for path in paths:
        if path != "-" and Path(path).is_dir():
            raise InputError(f"{path}: a directory: read it with neardup.inputs.read_inputs, file by file")
        kind = fmt or (guess_format(path) if path != "-" else "jsonl")
        name = "<stdin>" if path == "-" else path
        lines = _Lines(name, on_bad, max_text_length)
        count = 0
        try:
            with _open_binary(path) as stream:
                for record in _parse(kind, lines, stream, name, id_field, text_field):
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
    kind: str, lines: _Lines, stream: BinaryIO, name: str, id_field: str, text_field: str
) -> Iterator[SourceRecord]:
    read, on_bad = lines.read(stream), lines.on_bad
    if kind == "jsonl":
        return _read_jsonl(read, name, id_field, text_field, on_bad)
    if kind in ("csv", "tsv"):
        rows = _csv_rows(read, name, on_bad, lines) if kind == "csv" else _tsv_rows(read)
        return _read_table(rows, name, id_field, text_field, on_bad)
    return (
        SourceRecord(f"{name}:{n}", line.rstrip("\n").rstrip("\r"), None, f"{name}:{n}", line)
        for n, line in read
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


_DECODER = json.JSONDecoder(object_pairs_hook=unique_keys)
_ARRAY_HINT = "neardup reads JSON Lines, one object a line (jq -c '.[]' turns an array into those)"


def _json_line(line: str, where: str) -> Any:
    try:
        return _DECODER.decode(line)
    except json.JSONDecodeError as exc:
        if line.lstrip().startswith("["):
            raise InputError(
                f"{where}: expected a JSON object, got the start of a JSON array: {_ARRAY_HINT}"
            ) from exc
        raise InputError(f"{where}: not valid JSON ({exc.msg}, column {exc.colno})") from exc
    except DuplicateKeyError as exc:
        raise InputError(
            f"{where}: key {exc.key!r:.80} appears twice in one JSON object (which one counts is not defined)"
        ) from exc
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
            if isinstance(rec, list):
                raise InputError(f"{where}: expected a JSON object, got a JSON array: {_ARRAY_HINT}")
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


# A row of a table: its first line's number, its fields, and its text for a rejected record.
Row = tuple[int, list[str], str]


def _tsv_rows(lines: Iterator[tuple[int, str]]) -> Iterator[Row]:
    """The rows of tab-separated values: each line split at its tabs, nothing else special (no
    quoting, no escapes: a ``"`` is an ordinary character). An empty line is a row of no fields."""
    for n, line in lines:
        text = line.removesuffix("\n").removesuffix("\r")
        yield n, text.split("\t") if text else [], line


class _Record:
    """Where the CSV record being read is: its first line, the line a quoted field in it opened on
    (0: none seen), the last line fed to the parser, and its length so far."""

    def __init__(self) -> None:
        self.first = self.opened = self.last = self.chars = 0
        self.quoted = False

    def start(self) -> None:
        self.first, self.opened, self.chars, self.quoted = 0, 0, 0, False

    def feed(self, n: int, line: str) -> None:
        """Follow one more line of the record: an odd count of quotes opens or closes a quoted
        field (a doubled quote counts twice, so it changes nothing)."""
        self.first = self.first or n
        self.last, self.chars = n, self.chars + len(line)
        if line.count('"') & 1:
            if not self.quoted:
                self.opened = n
            self.quoted = not self.quoted


def _csv_rows(lines: Iterator[tuple[int, str]], name: str, bad: OnBad | None, bound: _Lines) -> Iterator[Row]:
    """The records of RFC 4180 CSV as rows. A record longer than ``record_limit`` raises
    InputError (a quote left open would otherwise read the rest of the file into one field); an
    unreadable record (text after a closing quote, a file ending inside a quoted field) raises, or
    goes to ``bad``, naming the line its quoted field opened on. The header row is never skipped."""
    record = _Record()

    def texts() -> Iterator[str]:
        for n, line in lines:
            record.feed(n, line)
            if record.chars > bound.limit:
                what = "the record" + (
                    f", in a quoted field opened on line {record.opened}," if record.quoted else ""
                )
                raise _too_long(f"{name}:{record.first}", what, bound.limit, bound.max_text_length)
            yield line

    reader = csv.reader(texts(), strict=True)
    header = True
    while True:
        record.start()
        try:
            row = next(reader, None)
        except csv.Error as exc:
            problem = _csv_problem(name, record, exc)
            if bad is None or header:
                raise problem from exc
            bad(BadRecord(f"{name}:{record.opened or record.last}", str(problem), ""))
            continue
        if row is None:
            return
        header = False
        yield record.first, row, ",".join(row)


def _csv_problem(name: str, record: _Record, exc: csv.Error) -> InputError:
    """The error of a CSV record the parser refused, naming the line its quoted field opened on."""
    why = str(exc)
    pairs = 'a quote inside a quoted field is written twice ("")'
    if why == "unexpected end of data" and record.opened:
        return InputError(
            f"{name}:{record.opened}: a quoted field opens on this line and is never closed (the file "
            f"ends inside it, on line {record.last}); in CSV {pairs}"
        )
    if record.opened and record.opened < record.last:
        return InputError(
            f"{name}:{record.opened}: a quoted field opens on this line and runs on to line "
            f"{record.last}, where the record cannot be read ({why}); in CSV {pairs}"
        )
    return InputError(f"{name}:{record.last}: not a readable row ({why}); in CSV {pairs}")


def _read_table(
    rows: Iterator[Row], name: str, id_field: str, text_field: str, bad: OnBad | None
) -> Iterator[SourceRecord]:
    first = next(rows, None)
    header = first[1] if first else []
    for key in (id_field, text_field):
        if key not in header:
            raise InputError(f"{name}:1: column {key!r} is missing (columns: {', '.join(header) or 'none'})")
    for n, row, raw in rows:
        where = f"{name}:{n}"
        if len(row) != len(header):
            problem = InputError(f"{where}: expected {len(header)} columns, got {len(row)}")
            if bad is None:
                raise problem
            bad(BadRecord(where, str(problem), raw))
            continue
        rec = dict(zip(header, row, strict=True))
        meta = {k: v for k, v in rec.items() if k not in (id_field, text_field)} or None
        yield SourceRecord(rec[id_field], rec[text_field], meta, where, "")


def read_document(
    path: Path, root: Path, on_bad: OnBad | None, max_text_length: int
) -> Iterator[SourceRecord]:
    """One file of a directory as one document, its id the file's path inside ``root``; a file
    that is not UTF-8 text (an image, a file of an unknown format) raises InputError naming it, or
    with ``on_bad`` is reported there and left out."""
    rel = path.relative_to(root).as_posix()
    try:
        text = _file_text(path, max_text_length)
    except InputError as problem:
        if on_bad is None:
            raise
        on_bad(BadRecord(str(path), str(problem), ""))
        return
    yield SourceRecord(rel, text, None, str(path), "")


def _file_text(path: Path, max_text_length: int) -> str:
    """One file of a directory as text: gzip detected by content, a UTF-8 byte-order mark dropped,
    read up to the bytes a text of ``max_text_length`` characters can take."""
    data = _whole(str(path), str(path), text_limit(max_text_length), max_text_length)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{path}: not a text file (not valid UTF-8: {exc.reason} at byte {exc.start}), though "
            "its name says one: move it out of the directory, or leave it out with --skip-bad"
        ) from exc


def checked(
    records: Iterable[SourceRecord], on_bad: OnBad | None = None, max_text_length: int | None = None
) -> Checked:
    """Records as the index takes them, each checked where it was read (file:line): a bad record,
    a text over ``max_text_length`` characters or an id repeated anywhere in the input raises
    InputError, or with ``on_bad`` is reported there and left out. An empty or whitespace-only
    text is a document like any other (stored, nobody's duplicate)."""
    return Checked(_checked(records, on_bad, max_text_length))


def _checked(
    records: Iterable[SourceRecord], on_bad: OnBad | None, max_text_length: int | None
) -> Iterator[Document]:
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
