"""Which reader reads each input the command line is given: the text formats (``readers``) or
Parquet and Arrow (``neardup.arrow.reading``, imported, with pyarrow, only when one is given).

A file's format is its ``--format``, else its name's: ``.parquet`` and ``.pq`` are Parquet,
``.arrow``, ``.feather``, ``.ipc`` and ``.arrows`` Arrow IPC, the rest as ``readers.guess_format``
says. A directory is a directory of Parquet (Arrow) files when ``--format`` says so, or when every
file in it that is not hidden (``.`` or ``_`` first) is named as Parquet; else one document a file.

    >>> kind_of("crawl/part-0.parquet", None), kind_of("news.jsonl.gz", None), kind_of("x.txt", "arrow")
    ('parquet', 'jsonl', 'arrow')
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from neardup.readers import (
    DEFAULT_MAX_TEXT_LENGTH,
    FORMATS,
    OnBad,
    SourceRecord,
    guess_format,
    read_records,
)

ARROW_KINDS = ("parquet", "arrow")
INPUT_FORMATS = (*FORMATS, *ARROW_KINDS)
_ARROW_SUFFIXES = {".parquet": "parquet", ".pq": "parquet"} | dict.fromkeys(
    (".arrow", ".feather", ".ipc", ".arrows"), "arrow"
)


def _parquet_directory(root: Path) -> bool:
    files = [
        p
        for p in root.rglob("*")
        if p.is_file() and not any(part.startswith((".", "_")) for part in p.relative_to(root).parts)
    ]
    return bool(files) and all(_ARROW_SUFFIXES.get(p.suffix) == "parquet" for p in files)


def kind_of(path: str, fmt: str | None) -> str:
    """How ``path`` is read: ``directory`` (one document a file), or a format of ``INPUT_FORMATS``."""
    if path != "-" and Path(path).is_dir():
        if fmt in ARROW_KINDS:
            return fmt
        return "parquet" if _parquet_directory(Path(path)) else "directory"
    if fmt is not None:
        return fmt
    if path == "-":
        return "jsonl"
    return _ARROW_SUFFIXES.get(Path(path).suffix.lower()) or guess_format(path)


def read_inputs(
    paths: Sequence[str],
    fmt: str | None = None,
    id_field: str = "id",
    text_field: str = "text",
    meta_fields: Sequence[str] | None = None,
    on_bad: OnBad | None = None,
    max_text_length: int = DEFAULT_MAX_TEXT_LENGTH,
) -> Iterator[SourceRecord]:
    """The records of every input in turn, each read by its format's reader; ``meta_fields`` (None:
    every other field) are the fields kept as metadata. Without pyarrow, an Arrow input raises
    NeardupError saying how to install it now, before any input is read."""
    kinds = [kind_of(path, fmt) for path in paths]
    if any(kind in ARROW_KINDS for kind in kinds):
        from neardup.arrow import require

        require()
    return _read(paths, kinds, fmt, id_field, text_field, meta_fields, on_bad, max_text_length)


def _read(
    paths: Sequence[str],
    kinds: Sequence[str],
    fmt: str | None,
    id_field: str,
    text_field: str,
    meta_fields: Sequence[str] | None,
    on_bad: OnBad | None,
    max_text_length: int,
) -> Iterator[SourceRecord]:
    for path, kind in zip(paths, kinds, strict=True):
        if kind in ARROW_KINDS:
            from neardup.arrow.reading import read_arrow

            yield from read_arrow(path, kind, id_field, text_field, meta_fields, on_bad)  # type: ignore[arg-type]
            continue
        text_format = None if kind == "directory" else kind
        records = read_records([path], text_format, id_field, text_field, on_bad, max_text_length)  # type: ignore[arg-type]
        yield from (records if meta_fields is None else (_only(r, meta_fields) for r in records))


def _only(record: SourceRecord, fields: Sequence[str]) -> SourceRecord:
    """``record`` with only the metadata ``fields`` it has (JSONL objects need not all have each)."""
    meta = record.meta or {}
    return record._replace(meta={k: meta[k] for k in fields if k in meta} or None)
