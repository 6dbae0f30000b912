"""People's labels of pairs from the review pages: neardup labels."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

from neardup.cli.command import command
from neardup.cli.connect import open_database
from neardup.cli.options import TARGET
from neardup.cli.output import emit, rounded

if TYPE_CHECKING:
    from neardup.core.advice import Advice

LABEL_COLUMNS = (
    "collection",
    "id_a",
    "id_b",
    "label",
    "note",
    "labelled_by",
    "labelled_at",
    "similarity",
    "method",
)


ADVICE_COLUMNS = ("low", "high", "labels", "duplicates", "precision", "interval_low", "interval_high")


def _labels_options(p: argparse.ArgumentParser) -> None:
    from neardup.core.advice import DEFAULT_TARGET

    p.add_argument("--all", action="store_true", help="labels of every collection")
    p.add_argument(
        "--advise",
        action="store_true",
        help="instead of the labels, their precision per similarity bin and the threshold they support",
    )
    p.add_argument(
        "--target",
        type=TARGET,
        default=DEFAULT_TARGET,
        help=f"with --advise: the labelled precision to reach, in (0, 1] (default {DEFAULT_TARGET})",
    )


@command("labels", _labels_options)
def cmd_labels(args: argparse.Namespace) -> int:
    """Export the labels people gave pairs on the review pages (of --collection).

    With --advise: what the labels of the collection's stored pairs say instead, one row per
    similarity bin (labels, how many say duplicate, the precision and its 95% Wilson interval),
    and on standard error the lowest threshold whose labelled pairs reach --target with 95%
    confidence, and how many labels that rests on: `neardup --collection news labels --advise
    --target 0.95`. A rebuild at that threshold (`neardup rebuild --threshold T`) keeps only the
    pairs at or above it.

    Example: neardup --collection news labels --format jsonl > labels.jsonl
    """
    if args.advise and args.all:
        from neardup.errors import ParamsError

        raise ParamsError("--advise reads one collection's labels: give --collection, not --all")
    with ExitStack() as stack:
        db = open_database(args, stack)
        if args.advise:
            advice = db.labels.advise(args.collection, args.target)
            print(advice.summary(), file=sys.stderr)
            emit(args.format, ADVICE_COLUMNS, advice_rows(advice))
            return 0
        rows = db.labels.export(None if args.all else args.collection)
        emit(args.format, LABEL_COLUMNS, (_label_row(r.to_dict()) for r in rows))
    return 0


def _label_row(label: dict[str, Any]) -> list[Any]:
    """A label's columns (``LABEL_COLUMNS``), its similarity rounded as every listing rounds one."""
    similarity = label["similarity"]
    return [
        rounded(similarity) if c == "similarity" and similarity is not None else label[c]
        for c in LABEL_COLUMNS
    ]


def advice_rows(advice: Advice) -> Iterator[list[Any]]:
    """One row per similarity bin with labels (``ADVICE_COLUMNS``)."""
    for b in advice.bins:
        low, high = b.interval
        yield [
            b.low,
            b.high,
            b.labels,
            b.duplicates,
            rounded(b.duplicates / b.labels),
            rounded(low),
            rounded(high),
        ]
