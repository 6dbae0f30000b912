"""Commands that read records: add, check, dedup and remove."""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any, Literal, cast

from neardup.cli.command import command
from neardup.cli.connect import open_index
from neardup.cli.listing import dense_note
from neardup.cli.options import (
    POSITIVE,
    inputs,
    library_default,
    min_jaccard,
    neighbour_arguments,
    neighbour_options,
)
from neardup.cli.output import check_writable, emit, output_file, rounded, staged

if TYPE_CHECKING:
    from neardup.readers import BadRecord, SourceRecord
    from neardup.result import AddResult
    from neardup.search import CheckResult

# Redraw the progress line at most this often: a terminal cannot show more, and it costs a syscall.
_PROGRESS_SECONDS = 0.5


def _progress(start: float) -> Callable[[AddResult], None]:
    last = [0.0]
    tty = sys.stderr.isatty()

    def show(total: AddResult) -> None:
        now = time.monotonic()
        if tty and now - last[0] >= _PROGRESS_SECONDS:
            last[0] = now
            done = total.added + total.replaced + total.unchanged
            rate = done / max(now - start, 1e-9)
            print(
                f"\r{done:,} documents, {rate:,.0f}/s, {total.new_pairs:,} new text pairs",
                end="",
                file=sys.stderr,
            )

    return show


def _add_options(p: argparse.ArgumentParser) -> None:
    from neardup.config import DEFAULT_BATCH_SIZE
    from neardup.index import Index

    jobs = library_default(Index.add, "jobs")
    inputs(p)
    p.add_argument(
        "--batch-size",
        type=POSITIVE,
        default=DEFAULT_BATCH_SIZE,
        help=f"documents per transaction (default {DEFAULT_BATCH_SIZE:,})",
    )
    p.add_argument(
        "--jobs",
        type=POSITIVE,
        default=jobs,
        metavar="N",
        help=f"writer processes, the input split among them by id (default {jobs}); the result is the same",
    )
    p.add_argument(
        "--skip-bad", action="store_true", help="leave bad records out (counted) instead of stopping"
    )
    p.add_argument("--rejects", default="rejected.jsonl", help="with --skip-bad: where to write them")
    p.add_argument(
        "--meta-fields",
        type=_names,
        metavar="A,B",
        help="the fields (columns) stored as each document's metadata, comma-separated; '' for none "
        "(default: every field but the id and the text)",
    )


def _names(text: str) -> list[str]:
    return [name for name in text.split(",") if name]


@command("add", _add_options, output=False)
def cmd_add(args: argparse.Namespace) -> int:
    """Add documents; each batch's verified pairs are stored before it commits.

    "new text pairs" counts the stored pairs of distinct texts the input added (`stats` and
    `collections` text_pairs); copies of one text are no text pair. The rows `neardup pairs`
    lists, every pair of documents, are `stats` and `collections` document_pairs.

    Example: neardup add crawl.parquet --id-field doc_id --text-field body --meta-fields url,lang
    """
    from neardup.cli import hints
    from neardup.errors import DatabaseConnectionError
    from neardup.inputs import read_inputs
    from neardup.readers import check_paths, checked

    rejected: list[BadRecord] = []
    check_paths(args.files)
    if args.skip_bad:
        check_writable(args.rejects, "--rejects")
    on_bad = rejected.append if args.skip_bad else None
    records = read_inputs(
        args.files,
        args.input_format,
        args.id_field,
        args.text_field,
        args.meta_fields,
        on_bad,
        args.max_text_length,
    )
    with ExitStack() as stack:
        index = open_index(args, stack)
        start = time.monotonic()
        try:
            result = index.add(
                checked(records, on_bad, max_text_length=args.max_text_length),
                batch_size=args.batch_size,
                progress=_progress(start),
                jobs=args.jobs,
            )
        except DatabaseConnectionError as exc:
            raise DatabaseConnectionError(
                f"{hints.message(exc)}; the batches before it are stored: run the same command again to "
                "finish the import"
            ) from exc
        finally:
            _write_rejects(args.rejects, rejected)
        if sys.stderr.isatty():
            print(file=sys.stderr)
        print(
            f"added {result.added}, replaced {result.replaced}, unchanged {result.unchanged}, "
            f"empty {result.empty}, rejected {len(rejected)}, "
            f"new text pairs {result.new_pairs} in {time.monotonic() - start:.1f} s"
            + (f"; rejected records are in {args.rejects}" if rejected else ""),
            file=sys.stderr,
        )
    return 0


def _write_rejects(path: str, rejected: list[BadRecord]) -> None:
    if rejected:
        with output_file(path, "--rejects") as f:
            for bad in rejected:
                f.write(json.dumps({"where": bad.where, "reason": bad.reason, "line": bad.raw}) + "\n")


def _check_options(p: argparse.ArgumentParser) -> None:
    inputs(p, "--input-format")
    min_jaccard(p, "lowest similarity reported (default: the threshold)")
    p.add_argument("--limit", type=POSITIVE, help="at most this many matches per record")
    neighbour_options(p)


@command("check", _check_options, tables=True)
def cmd_check(args: argparse.Namespace) -> int:
    """Each input record's stored near-duplicates, in input order; stores nothing.

    TSV, CSV and Parquet give one row per match (id, match, jaccard), and one row with empty
    (null) match columns for a record without any; JSONL and JSON give one object per record.

    Example: neardup check incoming.jsonl --min-jaccard 0.9 --format jsonl
    """
    from neardup.inputs import read_inputs
    from neardup.readers import check_paths, checked

    check_paths(args.files)
    records = read_inputs(
        args.files,
        args.input_format,
        args.id_field,
        args.text_field,
        meta_fields=[],
        max_text_length=args.max_text_length,
    )
    with ExitStack() as stack:
        index = open_index(args, stack)
        asked = neighbour_arguments(args)
        results = index.check(
            checked(records, max_text_length=args.max_text_length),
            min_jaccard=args.min_jaccard,
            limit=args.limit,
            **asked,
        )
        if "min_containment" in asked:
            _emit_contained(args.format, results)
            return 0
        best: list[str] = []
        results = _noting(results, best)
        if args.format in ("jsonl", "json"):
            rows = (
                (r.id, [{"id": i, "jaccard": rounded(j)} for i, j in r.matches], len(r.matches))
                for r in results
            )
            emit(args.format, ["id", "matches", "count"], rows, out=args.out)
        else:  # one row per match; a record without any has one row with empty match columns
            empty = None if args.format == "parquet" else ""

            def rows_of(r: CheckResult) -> list[tuple[str, str | None, float | str | None]]:
                return [(r.id, i, rounded(j)) for i, j in r.matches] or [(r.id, empty, empty)]

            emit(
                args.format,
                ["id", "match", "jaccard"],
                (row for r in results for row in rows_of(r)),
                out=args.out,
                types=["string", "string", "double"],
            )
        dense_note(index, best, "records")
    return 0


def _noting(results: Iterator[CheckResult], best: list[str]) -> Iterator[CheckResult]:
    """``results`` as they come, the best match of each (if any) noted in ``best``."""
    for r in results:
        if r.matches:
            best.append(r.matches[0][0])
        yield r


def _emit_contained(output: str, results: Iterator[CheckResult]) -> None:
    """Each record's containment answers: id, match, containment, jaccard."""
    from neardup.neighbours import Contained

    def answers(r: CheckResult) -> list[Contained]:
        return cast("list[Contained]", r.matches)

    if output in ("jsonl", "json"):
        rows = (
            (
                r.id,
                [
                    {"id": c.id, "containment": rounded(c.containment), "jaccard": rounded(c.jaccard)}
                    for c in answers(r)
                ],
                len(r.matches),
            )
            for r in results
        )
        emit(output, ["id", "matches", "count"], rows)
        return

    def rows_of(r: CheckResult) -> list[tuple[str, str, float | str, float | str]]:
        found: list[tuple[str, str, float | str, float | str]] = [
            (r.id, c.id, rounded(c.containment), rounded(c.jaccard)) for c in answers(r)
        ]
        return found or [(r.id, "", "", "")]

    emit(output, ["id", "match", "containment", "jaccard"], (row for r in results for row in rows_of(r)))


def _dedup_options(p: argparse.ArgumentParser) -> None:
    from neardup.index import CHECK_BATCH_SIZE

    inputs(p)
    p.add_argument("--out", required=True, help="output file")
    p.add_argument(
        "--against-index",
        action="store_true",
        help="drop records that duplicate a stored document or an earlier input record",
    )
    p.add_argument(
        "--batch-size",
        type=POSITIVE,
        default=CHECK_BATCH_SIZE,
        help=f"records checked per round trip (default {CHECK_BATCH_SIZE:,})",
    )


@command("dedup", _dedup_options, output=False)
def cmd_dedup(args: argparse.Namespace) -> int:
    """Write the input back out, keeping one record per cluster (its representative).

    The records must be stored in the collection (`add` them first): a record is dropped when its
    id is a stored document that is not its cluster's representative (as the collection's keep
    policy chooses it). Records whose id is not stored are kept, and counted in a warning.

    With --against-index, keep only the records that duplicate nothing stored in the collection
    and no earlier record of the input (the input itself is not stored).

    Records are written as they were read: JSONL and txt lines unchanged, CSV rows as CSV, and
    TSV rows as TSV when every input is TSV. Parquet (Arrow) inputs give a Parquet (Arrow) file of
    the kept rows with all their columns, under the inputs' schema (one for all of them).

    Example: neardup dedup new.jsonl --against-index --out new.only.jsonl
    """
    from neardup.inputs import expand, read_inputs
    from neardup.readers import check_paths

    check_paths(args.files)
    check_writable(args.out, "--out")
    files = expand(args.files, args.input_format)
    kinds = [f.kind for f in files]
    arrow = _arrow_kind([f.path for f in files], kinds)
    records: Iterable[SourceRecord] = read_inputs(
        args.files,
        args.input_format,
        args.id_field,
        args.text_field,
        meta_fields=[] if arrow else None,
        max_text_length=args.max_text_length,
    )
    with ExitStack() as stack:
        index = open_index(args, stack)
        unstored = None
        if args.against_index:
            from neardup.dedup import new_only

            records, drop = new_only(index, records, args.batch_size)
        else:
            from neardup.dedup import representatives_only

            records, drop, unstored = representatives_only(index, records, args.batch_size)
        # Written beside --out and moved over it at the end: an input that fails half-way leaves
        # no half-written output, and --out may name one of the inputs.
        if arrow:
            from neardup.arrow.writing import write_kept

            # A first pass reads the ids and texts, the second every column of the kept rows.
            for _ in records:
                pass
            with staged(args.out, "--out") as path:
                kept, removed = write_kept(args.files, arrow, args.id_field, args.text_field, drop, str(path))
        else:
            with output_file(args.out, "--out", whole=True) as out:
                kept, removed = _write_kept(records, drop, out, args, set(kinds))
        why = (
            "duplicates of stored documents or of earlier records"
            if args.against_index
            else "not the representative of their cluster"
        )
        print(f"kept {kept}, dropped {removed} ({why})", file=sys.stderr)
        if unstored is not None and unstored.count:
            print(
                f"neardup: warning: {unstored.count:,} of {kept + removed:,} input records are not in "
                f"collection {index.name!r} (no stored document has their id), so they were kept "
                "unexamined; to drop records that duplicate stored documents or each other without "
                "storing them, use --against-index",
                file=sys.stderr,
            )
    return 0


def _arrow_kind(files: list[str], kinds: list[str]) -> Literal["parquet", "arrow"] | None:
    """The Arrow format ``dedup`` writes (its inputs'), None for text inputs; InputError when an
    Arrow input is given with inputs of another format (one output file has one format)."""
    from neardup.errors import InputError
    from neardup.inputs import ARROW_KINDS

    arrow = [kind for kind in kinds if kind in ARROW_KINDS]
    if not arrow:
        return None
    for path, kind in zip(files, kinds, strict=True):
        if path == "-":
            raise InputError("<stdin>: dedup reads Arrow inputs twice (ids, then the kept rows): give a file")
        if kind != arrow[0]:
            raise InputError(
                f"{path}: {kind}, where {files[kinds.index(arrow[0])]} is {arrow[0]}: dedup writes one "
                f"file in its inputs' format, so give it inputs of one format"
            )
    return arrow[0]  # type: ignore[return-value]


def _write_kept(
    records: Iterable[SourceRecord], drop: set[str], out: Any, args: argparse.Namespace, kinds: set[str]
) -> tuple[int, int]:
    """Write the records whose id is not in ``drop`` as they were read (CSV rows again as CSV,
    and TSV rows as TSV when every input is TSV); returns how many were kept and how many dropped."""
    # TSV has no quoting: its fields hold no tab or line break, so they are written as they were read.
    dialect: dict[str, Any] = (
        {"delimiter": "\t", "quoting": csv.QUOTE_NONE, "quotechar": None} if kinds == {"tsv"} else {}
    )
    kept = removed = 0
    writer = None
    for rec in records:
        if rec.id in drop:
            removed += 1
            continue
        kept += 1
        if rec.raw:
            out.write(rec.raw if rec.raw.endswith("\n") else rec.raw + "\n")
        else:
            row = {args.id_field: rec.id, args.text_field: rec.text, **(rec.meta or {})}
            if writer is None:
                writer = csv.DictWriter(out, fieldnames=list(row), lineterminator="\n", **dialect)
                writer.writeheader()
            writer.writerow(row)
    return kept, removed


def _remove_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("ids", nargs="+", metavar="ID", help="the ids of the documents to remove")


@command("remove", _remove_options, output=False)
def cmd_remove(args: argparse.Namespace) -> int:
    """Remove documents by id.

    Example: neardup remove ap-001 rt-017
    """
    from neardup.records import check_id

    for n, doc_id in enumerate(args.ids, 1):
        check_id(doc_id, f"ID {n}")
    with ExitStack() as stack:
        index = open_index(args, stack)
        found = index.remove(args.ids)
        print(f"removed {found} of {len(set(args.ids))}", file=sys.stderr)
    return 0
