"""Commands that read records: add, check, dedup and remove."""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from neardup.cli.command import command
from neardup.cli.connect import open_index
from neardup.cli.options import (
    POSITIVE,
    inputs,
    library_default,
    min_jaccard,
    neighbour_arguments,
    neighbour_options,
)
from neardup.cli.output import check_writable, emit, output_file, rounded

if TYPE_CHECKING:
    from neardup.ingest import AddResult
    from neardup.readers import BadRecord, SourceRecord
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
                f"\r{done:,} documents, {rate:,.0f}/s, {total.new_pairs:,} new pairs", end="", file=sys.stderr
            )

    return show


def _add_options(p: argparse.ArgumentParser) -> None:
    from neardup.index import Index
    from neardup.ingest import DEFAULT_BATCH_SIZE

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


@command("add", _add_options, output=False)
def cmd_add(args: argparse.Namespace) -> int:
    """Add documents; each batch's verified pairs are stored before it commits.

    Example: neardup add stories.jsonl.gz --format jsonl --id-field id --text-field body
    """
    from neardup.errors import DatabaseConnectionError
    from neardup.readers import check_paths, checked, read_records

    rejected: list[BadRecord] = []
    check_paths(args.files)
    if args.skip_bad:
        check_writable(args.rejects, "--rejects")
    with ExitStack() as stack:
        index = open_index(args, stack)
        on_bad = rejected.append if args.skip_bad else None
        records = read_records(
            args.files, args.input_format, args.id_field, args.text_field, on_bad, args.max_text_length
        )
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
                f"{exc}; the batches before it are stored: run the same command again to finish the import"
            ) from exc
        finally:
            _write_rejects(args.rejects, rejected)
        if sys.stderr.isatty():
            print(file=sys.stderr)
        print(
            f"added {result.added}, replaced {result.replaced}, unchanged {result.unchanged}, "
            f"empty {result.empty}, rejected {len(rejected)}, new pairs {result.new_pairs} "
            f"in {time.monotonic() - start:.1f} s"
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


@command("check", _check_options)
def cmd_check(args: argparse.Namespace) -> int:
    """Each input record's stored near-duplicates, in input order; stores nothing.

    TSV and CSV give one row per match (id, match, jaccard), and one row with empty match
    columns for a record without any; JSONL and JSON give one object per record.

    Example: neardup check incoming.jsonl --min-jaccard 0.9 --format jsonl
    """
    from neardup.readers import check_paths, checked, read_records

    check_paths(args.files)
    with ExitStack() as stack:
        index = open_index(args, stack)
        records = read_records(
            args.files,
            args.input_format,
            args.id_field,
            args.text_field,
            max_text_length=args.max_text_length,
        )
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
        if args.format in ("jsonl", "json"):
            rows = (
                (r.id, [{"id": i, "jaccard": rounded(j)} for i, j in r.matches], len(r.matches))
                for r in results
            )
            emit(args.format, ["id", "matches", "count"], rows)
        else:  # one row per match; a record without any has one row with empty match columns

            def rows_of(r: CheckResult) -> list[tuple[str, str, float | str]]:
                return [(r.id, i, rounded(j)) for i, j in r.matches] or [(r.id, "", "")]

            emit(args.format, ["id", "match", "jaccard"], (row for r in results for row in rows_of(r)))
    return 0


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

    With --against-index, keep only the records that duplicate nothing stored in the collection
    and no earlier record of the input (the input itself is not stored).

    Records are written as they were read: JSONL and txt lines unchanged, CSV rows as CSV, and
    TSV rows as TSV when every input is TSV.

    Example: neardup dedup new.jsonl --against-index --out new.only.jsonl
    """
    from neardup.readers import check_paths, read_records

    check_paths(args.files)
    check_writable(args.out, "--out")
    with ExitStack() as stack:
        index = open_index(args, stack)
        records: Iterable[SourceRecord] = read_records(
            args.files,
            args.input_format,
            args.id_field,
            args.text_field,
            max_text_length=args.max_text_length,
        )
        if args.against_index:
            from neardup.dedup import new_only

            records, drop = new_only(index, records, args.batch_size)
        else:
            drop = {doc_id for ids in index.clusters() for doc_id in ids[1:]}
        # Written beside --out and moved over it at the end: an input that fails half-way leaves
        # no half-written output, and --out may name one of the inputs.
        with output_file(args.out, "--out", whole=True) as out:
            kept, removed = _write_kept(records, drop, out, args)
        why = (
            "duplicates of stored documents or of earlier records"
            if args.against_index
            else "not the representative of their cluster"
        )
        print(f"kept {kept}, dropped {removed} ({why})", file=sys.stderr)
    return 0


def _kind(path: str, fmt: str | None) -> str:
    """How ``read_records`` reads ``path``: a directory, or a file (``-``: stdin) in its format."""
    from neardup.readers import guess_format

    if path != "-" and Path(path).is_dir():
        return "directory"
    return fmt or (guess_format(path) if path != "-" else "jsonl")


def _write_kept(
    records: Iterable[SourceRecord], drop: set[str], out: Any, args: argparse.Namespace
) -> tuple[int, int]:
    """Write the records whose id is not in ``drop`` as they were read (CSV rows again as CSV,
    and TSV rows as TSV when every input is TSV); returns how many were kept and how many dropped."""
    kinds = {_kind(path, args.input_format) for path in args.files}
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
    p.add_argument("ids", nargs="+", metavar="ID")


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
