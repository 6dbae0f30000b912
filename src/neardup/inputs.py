"""Which reader reads each input the command line is given: the text formats (``readers``) or
Parquet and Arrow (``neardup.arrow.reading``, imported, with pyarrow, only when one is given).

A file's format is its ``--format``, else its name's: ``.parquet`` and ``.pq`` are Parquet,
``.arrow``, ``.feather``, ``.ipc`` and ``.arrows`` Arrow IPC, the rest as ``readers.guess_format``
says (``.jsonl``, ``.ndjson`` and ``.json`` JSONL, ``.csv``, ``.tsv``, each gzip or not; else
txt, one document a line).

A directory is read file by file, recursively and in sorted order, leaving out the files whose
name (or a folder's) starts with ``.`` or ``_`` (what datasets leave beside their data: Spark's
``_SUCCESS``, ``.crc`` files). Each file is read by its name as if it were given alone, except
that a text file (``.txt``, ``.md``, ``.html`` and the like, or a name without a suffix such as
``README``) is one document, its id the file's path inside the directory (``DOCUMENT``). A file
of any other name (``.py``, ``.png``, ``.pdf``) is none of these: it is named, as a bad input, not
read as text. With ``--format``, every file of the directory is read in that format. So a
directory of JSONL gives its records, one of Parquet its rows, one of notes a document a note, and
a mix of them each file's own.

    >>> kind_of("crawl/part-0.parquet", None), kind_of("news.jsonl.gz", None), kind_of("x.txt", "arrow")
    ('parquet', 'jsonl', 'arrow')
    >>> file_kind("notes/README", None), file_kind("notes/day.csv", None), file_kind("a/b.py", None)
    ('document', 'csv', 'unknown')
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from neardup import validate
from neardup.errors import InputError
from neardup.readers import (
    FORMATS,
    BadRecord,
    OnBad,
    SourceRecord,
    guess_format,
    read_document,
    read_records,
)
from neardup.text_limits import DEFAULT_MAX_TEXT_LENGTH

ARROW_KINDS = ("parquet", "arrow")
INPUT_FORMATS = (*FORMATS, *ARROW_KINDS)
# A text file of a directory: one document, the whole file; and a file of no format read here.
DOCUMENT, UNKNOWN = "document", "unknown"
# The names of text files a directory gives as one document each (gzip or not), besides names
# without a suffix (README, LICENSE).
TEXT_SUFFIXES = (
    ".txt",
    ".text",
    ".md",
    ".markdown",
    ".rst",
    ".adoc",
    ".org",
    ".tex",
    ".html",
    ".htm",
    ".xml",
)
_ARROW_SUFFIXES = {".parquet": "parquet", ".pq": "parquet"} | dict.fromkeys(
    (".arrow", ".feather", ".ipc", ".arrows"), "arrow"
)
# Compressions, by name: gzip is read; the others' files are refused saying what they are.
_COMPRESSED_SUFFIXES = (".gz", ".bz2", ".xz", ".zst", ".zip", ".7z")
# Files and folders a directory is read without (as pyarrow.dataset's own default leaves them out).
IGNORED_PREFIXES = (".", "_")
# How a directory is read, for the help of the commands that read records and for errors.
DIRECTORY_HELP = (
    "a directory is read file by file (recursively, in sorted order, leaving out names starting "
    "with . or _): .jsonl/.ndjson/.json, .csv, .tsv (gzip or not), .parquet/.pq and "
    ".arrow/.feather/.ipc/.arrows files give their records; text files (.txt, .md, .html and the "
    "like, or a name without a suffix such as README) are one document each, whose id is its path "
    "in the directory; any other file is a bad input (--skip-bad leaves it out); with --format "
    "every file is read in that format"
)


# Why a file of a directory is not read.
_NO_FORMAT = (
    "no format neardup reads (in a directory, .jsonl, .csv, .tsv, .parquet and .arrow files give "
    "records, and text files such as .txt, .md or README one document each)"
)


@dataclass(frozen=True)
class Input:
    """One file to read: its path, how it is read (a format of ``INPUT_FORMATS`` or ``DOCUMENT``),
    and the directory it was found in (None for a file given itself), which a document's id is
    relative to."""

    path: str
    kind: str
    root: str | None = None


def kind_of(path: str, fmt: str | None) -> str:
    """How ``path`` is read: ``directory`` (file by file, ``expand``), or a format of ``INPUT_FORMATS``."""
    if path != "-" and Path(path).is_dir():
        return "directory"
    if fmt is not None:
        return fmt
    if path == "-":
        return "jsonl"
    return _ARROW_SUFFIXES.get(Path(path).suffix.lower()) or guess_format(path)


def file_kind(path: str, fmt: str | None) -> str:
    """How a file found in a directory is read: in ``fmt`` when given, else by its name, a name
    that names no format of records being one document (``DOCUMENT``)."""
    if fmt is not None:
        return fmt
    name = Path(path.lower()).name
    for compressed in _COMPRESSED_SUFFIXES:  # read as gzip, or named as what they are
        name = name.removesuffix(compressed)
    if arrow := _ARROW_SUFFIXES.get(Path(name).suffix):
        return arrow
    records = guess_format(name)
    if records != "txt":
        return records
    return DOCUMENT if name.endswith(TEXT_SUFFIXES) or not Path(name).suffix else UNKNOWN


def expand(paths: Sequence[str], fmt: str | None = None) -> list[Input]:
    """Every file the inputs name, in the order they are read: a file itself, a directory's files
    (``file_kind``); InputError for a directory with no file to read."""
    found: list[Input] = []
    for path in paths:
        if kind_of(path, fmt) != "directory":
            found.append(Input(path, kind_of(path, fmt)))
            continue
        root = Path(path)
        files = sorted(
            p
            for p in root.rglob("*")
            if p.is_file()
            and not any(part.startswith(IGNORED_PREFIXES) for part in p.relative_to(root).parts)
        )
        if not files:
            raise InputError(
                f"{path}: a directory with no file to read (names starting with . or _ are left out)"
            )
        found += [Input(str(p), file_kind(str(p), fmt), path) for p in files]
    return found


def read_inputs(
    paths: Sequence[str],
    fmt: str | None = None,
    id_field: str = "id",
    text_field: str = "text",
    meta_fields: Sequence[str] | None = None,
    on_bad: OnBad | None = None,
    max_text_length: int = DEFAULT_MAX_TEXT_LENGTH,
) -> Iterator[SourceRecord]:
    """The records of every input in turn, each file read by its format's reader (a directory's
    files each by its own, ``expand``); ``meta_fields`` (None: every other field) are the fields
    kept as metadata. Without pyarrow, an Arrow input raises NeardupError saying how to install it
    now, before any input is read."""
    max_text_length = validate.max_text_length(max_text_length)
    inputs = expand(paths, fmt)
    unknown = [i.path for i in inputs if i.kind == UNKNOWN]
    if unknown and on_bad is None:
        shown = ", ".join(unknown[:5]) + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
        them = "them" if len(unknown) > 1 else "it"
        raise InputError(
            f"{shown}: {_NO_FORMAT}: move {them} out of the directory, or leave {them} out with --skip-bad"
        )
    if any(i.kind in ARROW_KINDS for i in inputs):
        from neardup.arrow import require

        require()
    return _read(inputs, id_field, text_field, meta_fields, on_bad, max_text_length)


def _read(
    inputs: Sequence[Input],
    id_field: str,
    text_field: str,
    meta_fields: Sequence[str] | None,
    on_bad: OnBad | None,
    max_text_length: int,
) -> Iterator[SourceRecord]:
    for item in inputs:
        if item.kind == UNKNOWN:
            if on_bad is not None:
                on_bad(BadRecord(item.path, f"{item.path}: {_NO_FORMAT}", ""))
            continue
        if item.kind in ARROW_KINDS:
            from neardup.arrow.reading import read_arrow

            yield from read_arrow(item.path, item.kind, id_field, text_field, meta_fields, on_bad)  # type: ignore[arg-type]
            continue
        if item.kind == DOCUMENT:
            yield from read_document(Path(item.path), Path(item.root or "."), on_bad, max_text_length)
            continue
        records = read_records([item.path], item.kind, id_field, text_field, on_bad, max_text_length)  # type: ignore[arg-type]
        yield from (records if meta_fields is None else (_only(r, meta_fields) for r in records))


def _only(record: SourceRecord, fields: Sequence[str]) -> SourceRecord:
    """``record`` with only the metadata ``fields`` it has (JSONL objects need not all have each)."""
    meta = record.meta or {}
    return record._replace(meta={k: meta[k] for k in fields if k in meta} or None)
