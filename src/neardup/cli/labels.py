"""People's labels of pairs from the review pages: neardup labels."""

from __future__ import annotations

import argparse
from contextlib import ExitStack

from neardup.cli.command import command
from neardup.cli.connect import open_database
from neardup.cli.output import emit

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


def _labels_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--all", action="store_true", help="labels of every collection")


@command("labels", _labels_options)
def cmd_labels(args: argparse.Namespace) -> int:
    """Export the labels people gave pairs on the review pages (of --collection).

    Example: neardup --collection news labels --format jsonl > labels.jsonl
    """
    with ExitStack() as stack:
        rows = open_database(args, stack).labels.export(None if args.all else args.collection)
        emit(args.format, LABEL_COLUMNS, ([r.to_dict()[c] for c in LABEL_COLUMNS] for r in rows))
    return 0
