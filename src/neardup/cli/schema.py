"""The schema's migrations: neardup db upgrade | current | downgrade."""

from __future__ import annotations

import argparse
from contextlib import ExitStack

from neardup.cli.command import command
from neardup.cli.connect import open_database


def _db_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=("upgrade", "current", "downgrade"))
    p.add_argument(
        "--revision", default="base", help="downgrade target (default: base, which drops all data)"
    )


@command("db", _db_options, output=False)
def cmd_db(args: argparse.Namespace) -> int:
    """Migrate the schema: upgrade, current or downgrade.

    Example: neardup db upgrade
    """
    with ExitStack() as stack:
        db = open_database(args, stack)
        if args.action == "upgrade":
            db.upgrade()
        elif args.action == "downgrade":
            db.downgrade(args.revision)
        print(db.revision() or "none")
    return 0
