"""The schema's migrations: neardup db upgrade | current | downgrade."""

from __future__ import annotations

import argparse
import sys
from contextlib import ExitStack
from typing import TYPE_CHECKING

from neardup.cli.command import command
from neardup.cli.connect import open_database
from neardup.cli.output import counted

if TYPE_CHECKING:
    from neardup.database import DowngradePlan


def _db_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "action",
        choices=("upgrade", "current", "downgrade"),
        help="upgrade to this neardup's revision, print the current one, or go down to --revision",
    )
    p.add_argument(
        "--revision",
        default="base",
        help="downgrade: the revision to go down to, or -N for N steps (default: base, which drops "
        "every table and all data)",
    )
    p.add_argument(
        "--yes",
        action="store_true",
        help="downgrade: do it; without this, nothing changes and what it would undo is listed",
    )


def _described(plan: DowngradePlan, schema: str) -> str:
    """What a downgrade would undo, as the lines it is refused or done with."""
    if plan.target == "base":
        listed = ", ".join(f"{name!r} ({counted(count, 'document')})" for name, count in plan.dropped)
        held = (
            f"its {counted(len(plan.dropped), 'collection')}, {listed}," if plan.dropped else "no collection,"
        )
        return (
            f"downgrading schema {schema!r} to base drops every neardup table: {held} with their "
            "pairs, clusters, labels, tokens and changes"
        )
    steps = "; ".join(f"{revision}, {what}" for revision, what in plan.steps)
    return (
        f"downgrading schema {schema!r} from {plan.current} to {plan.target} undoes "
        f"{counted(len(plan.steps), 'migration')}, dropping what each "
        f"added with its data ({steps})"
    )


@command("db", _db_options, output=False)
def cmd_db(args: argparse.Namespace) -> int:
    """Migrate the schema: upgrade, current or downgrade.

    downgrade needs --yes: without it, it lists what it would undo (to base: every collection,
    with its documents) and changes nothing.

    Example: neardup db upgrade
    """
    from neardup.errors import ParamsError

    with ExitStack() as stack:
        db = open_database(args, stack)
        if args.action == "upgrade":
            db.upgrade()
        elif args.action == "downgrade":
            plan = db.downgrade_plan(args.revision)
            if plan.steps:
                what = _described(plan, args.schema)
                if not args.yes:
                    raise ParamsError(f"{what}: add --yes to do it")
                print(f"neardup: {what}", file=sys.stderr)
                db.downgrade(args.revision)
        print(db.revision() or "none")
    return 0
