"""API tokens of the service: neardup token create | list | revoke."""

from __future__ import annotations

import argparse
import sys
from contextlib import ExitStack

from neardup.cli.command import command
from neardup.cli.connect import open_database
from neardup.cli.output import emit

TOKEN_COLUMNS = ("id", "prefix", "scope", "collection", "name", "created_at", "last_used_at", "revoked_at")


def _token_options(p: argparse.ArgumentParser) -> None:
    from neardup.credentials import ACCESS_LEVELS

    p.add_argument(
        "action", choices=("create", "list", "revoke"), help="create a token, list them, or revoke one"
    )
    p.add_argument("token", nargs="?", default="", help="revoke: the token's id or prefix")
    p.add_argument("--scope", choices=ACCESS_LEVELS, help="create: what it may do (required)")
    p.add_argument(
        "--collection",
        dest="only_collection",
        metavar="NAME",
        help="create: limit the token to this collection (default: every collection)",
    )
    p.add_argument("--name", default="", help="create: a label to recognise it by")


@command("token", _token_options)
def cmd_token(args: argparse.Namespace) -> int:
    """Create, list or revoke API tokens.

    create prints the token once, on the last line of standard output; only its SHA-256 is stored.
    read: query, check, pairs, clusters, documents, review pages; write: also add, delete and
    label; admin: also create and drop collections. revoke takes the id or the prefix `list` shows.

    Example: neardup token create --scope write --collection news --name ingest-bot
    """
    from neardup.credentials import shown_prefix
    from neardup.errors import ParamsError

    if args.action == "create" and args.scope is None:
        raise ParamsError("token create needs --scope read, write or admin")
    with ExitStack() as stack:
        db = open_database(args, stack)
        if args.action == "create":
            token_id, secret = db.tokens.create(args.scope, args.only_collection, args.name)
            where = f"collection {args.only_collection!r}" if args.only_collection else "every collection"
            print(
                f"token {token_id} ({shown_prefix(secret)}...): {args.scope} on {where}; "
                "it is shown once, only its hash is stored",
                file=sys.stderr,
            )
            print(secret)
        elif args.action == "list":
            rows = (
                (
                    t.token_id,
                    t.prefix,
                    t.scope,
                    t.collection or "",
                    t.name,
                    t.created_at.isoformat(),
                    t.last_used_at.isoformat() if t.last_used_at else "",
                    t.revoked_at.isoformat() if t.revoked_at else "",
                )
                for t in db.tokens.list()
            )
            emit(args.format, TOKEN_COLUMNS, rows)
        else:
            print(f"token {db.tokens.revoke(args.token)} revoked", file=sys.stderr)
    return 0
