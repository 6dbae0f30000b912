"""Following a table of the application's database: neardup follow [--install | --uninstall | --once]."""

from __future__ import annotations

import argparse
import sys
from contextlib import ExitStack
from typing import TYPE_CHECKING

from neardup.cli.command import command
from neardup.cli.connect import database_url
from neardup.cli.options import POSITIVE

if TYPE_CHECKING:
    from neardup.follower import Applied


def _follow_options(p: argparse.ArgumentParser) -> None:
    from neardup.follower import DEFAULT_FOLLOW_BATCH, RECONNECT_TRIES
    from neardup.text_limits import DEFAULT_MAX_TEXT_LENGTH

    p.add_argument("--source-db", required=True, metavar="URL", help="the database of the followed table")
    p.add_argument("--table", required=True, metavar="SCHEMA.TABLE", help="the followed table")
    p.add_argument("--id-column", default="id", help="the column of the documents' ids (default id)")
    p.add_argument("--text-column", default="text", help="the column of their texts (default text)")
    p.add_argument("--meta-columns", nargs="+", default=[], metavar="C", help="columns kept as metadata")
    what = p.add_mutually_exclusive_group()
    what.add_argument(
        "--install",
        action="store_true",
        help="create the queue and the table's triggers (in --schema of the source database), "
        "and queue every row for the first indexing",
    )
    what.add_argument("--uninstall", action="store_true", help="drop the table's triggers and queued changes")
    what.add_argument("--once", action="store_true", help="apply the changes queued so far, then exit")
    p.add_argument(
        "--batch-size",
        type=POSITIVE,
        default=DEFAULT_FOLLOW_BATCH,
        help=f"changes applied per transaction (default {DEFAULT_FOLLOW_BATCH:,})",
    )
    p.add_argument(
        "--poll",
        type=POSITIVE,
        default=60,
        metavar="SECONDS",
        help="without --once: look at the queue this often even if no notification came (default 60)",
    )
    p.add_argument(
        "--max-text-length",
        type=POSITIVE,
        default=DEFAULT_MAX_TEXT_LENGTH,
        metavar="CHARS",
        help=f"the longest text of a row (default {DEFAULT_MAX_TEXT_LENGTH:,} characters, as add); a longer "
        "one is skipped with a warning, as add refuses it",
    )
    p.add_argument(
        "--reconnect-tries",
        type=POSITIVE,
        default=RECONNECT_TRIES,
        metavar="N",
        help="without --once: after a database went away (a restart), try to connect again this many "
        f"times in a row, waiting 1 s and longer between tries, before giving up (default {RECONNECT_TRIES})",
    )


def _say(applied: Applied) -> None:
    a = applied.added
    print(
        f"applied {applied.changes} changes: added {a.added}, replaced {a.replaced}, "
        f"unchanged {a.unchanged}, removed {applied.removed}, new text pairs {a.new_pairs}"
        + (f", rows skipped {applied.skipped}" if applied.skipped else ""),
        file=sys.stderr,
        flush=True,
    )


def _warn(message: str) -> None:
    print(f"neardup: warning: {message}", file=sys.stderr, flush=True)


@command("follow", _follow_options, output=False)
def cmd_follow(args: argparse.Namespace) -> int:
    """Index a table of the application's database and keep up with its inserts, updates and deletes.

    Run it with --install once: statement triggers on the table queue the ids of the rows each
    write touches, in a queue in --schema of the table's database. Then `follow` applies the
    queued changes to --collection (created if missing), a batch a transaction, and waits for
    more (LISTEN/NOTIFY); with --once it applies what is queued and exits (for cron). A crash
    loses no change: the queue keeps each until it is applied. A row the index cannot hold (an id
    over 2,000 bytes, a text over --max-text-length, an id two rows share) is skipped with a
    warning naming it, and the rest applied; a write that fixes the row queues it again. After a
    database restart, follow connects again (--reconnect-tries). --uninstall removes the triggers.

    Example: neardup follow --source-db postgresql://app@localhost/app --table public.articles
    --text-column body --once
    """
    from neardup import follower as follow

    source = follow.Source(
        args.source_db, args.table, args.id_column, args.text_column, tuple(args.meta_columns), args.schema
    )
    if args.install:
        queued = follow.install(source)
        print(f"following {args.table}: {queued} rows queued for indexing", file=sys.stderr)
        return 0
    if args.uninstall:
        had = follow.uninstall(source)
        print(f"{args.table} {'is no longer followed' if had else 'was not followed'}", file=sys.stderr)
        return 0
    with ExitStack() as stack:
        url = stack.enter_context(database_url(args))
        follower = stack.enter_context(
            follow.Follower(
                source,
                url,
                args.collection,
                schema=args.schema,
                max_text_length=args.max_text_length,
                warn=_warn,
            )
        )
        if args.once:
            _say(follower.drain(args.batch_size))
            return 0
        follower.run(args.batch_size, args.poll, _say, reconnect_tries=args.reconnect_tries)
    return 0
