"""Commands on the changes feed: changes (read or follow it) and changes-feed (turn it on or off)."""

from __future__ import annotations

import argparse
import sys
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

from neardup.cli.command import command
from neardup.cli.connect import open_database
from neardup.cli.options import NON_NEGATIVE, POSITIVE
from neardup.cli.output import rounded, writer

if TYPE_CHECKING:
    from neardup.database import Change

COLUMNS = ("seq", "at", "kind", "id", "id_a", "id_b", "jaccard", "cluster", "clusters", "dense")
# Seconds each wait of --follow lasts before it asks again (the database is asked, not polled:
# the wait ends as soon as a write commits).
FOLLOW_WAIT = 30.0


def _row(change: Change, fmt: str) -> list[Any]:
    values = change.to_dict()
    values["at"] = change.at.isoformat()
    if change.jaccard is not None:
        values["jaccard"] = rounded(change.jaccard)
    if fmt in ("tsv", "csv") and change.clusters is not None:
        values["clusters"] = " ".join(map(str, change.clusters))
    return [values.get(column) for column in COLUMNS]


def _options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--since",
        type=NON_NEGATIVE,
        default=0,
        help="print the changes numbered after SEQ (default 0: every change kept)",
        metavar="SEQ",
    )
    p.add_argument("--follow", action="store_true", help="keep waiting for new changes and print them")
    p.add_argument("--limit", type=POSITIVE, default=1000, help="changes read at a time (default 1000)")


@command("changes", _options)
def cmd_changes(args: argparse.Namespace) -> int:
    """The collection's writes numbered after --since, in the order they committed.

    Documents added, replaced or removed, pairs added (or re-measured) or removed, clusters merged
    or split, and rebuilds, one a row. The sequence number to resume from is printed on stderr at
    the end: a consumer that passes it as --since next time misses nothing and sees nothing twice.
    --follow waits for new writes (LISTEN/NOTIFY) and prints each as it commits, until
    interrupted. A --since older than the feed keeps is refused (exit status 1): list the
    collection again and follow from the sequence number the error names. The collection must
    keep a feed (`neardup changes-feed on`, or `init --changes-feed`).

    Example: neardup changes --since 1200 --follow --format jsonl
    """
    from neardup.errors import ParamsError

    if args.follow and args.format == "json":
        raise ParamsError("--follow writes rows as they come: use --format jsonl, tsv or csv, not json")
    with ExitStack() as stack:
        db = open_database(args, stack)
        write = writer(args.format, COLUMNS, sys.stdout)
        since = args.since
        try:
            while True:
                page = db.changes(
                    args.collection, since, limit=args.limit, timeout=FOLLOW_WAIT if args.follow else 0
                )
                for change in page.changes:
                    write(_row(change, args.format))
                since = page.last_seq
                sys.stdout.flush()
                if not args.follow and len(page.changes) < args.limit:
                    break
        finally:
            write(None)
            print(f"neardup: next --since {since}", file=sys.stderr)
    return 0


def _feed_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "state",
        choices=("on", "off"),
        help="on: number every write from now; off: stop, deleting the kept changes",
    )
    p.add_argument(
        "--retention-hours",
        type=POSITIVE,
        default=None,
        help="with on: hours each change is kept (default: every change)",
    )


@command("changes-feed", _feed_options, output=False)
def cmd_changes_feed(args: argparse.Namespace) -> int:
    """Turn the collection's changes feed on or off (or change how long it keeps changes).

    Taken in turn with the collection's writers: every write that commits after it is numbered
    (on) or none is (off). A feed turned on again answers only from then: a consumer of the old
    one is told it missed writes.

    Example: neardup changes-feed on --retention-hours 168
    """
    with ExitStack() as stack:
        open_database(args, stack).changes_feed(args.collection, args.state == "on", args.retention_hours)
    print(f"changes feed of {args.collection!r} {args.state}", file=sys.stderr)
    return 0
