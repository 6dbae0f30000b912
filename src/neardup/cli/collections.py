"""Commands on collections as a whole: init, rebuild, collections, drop."""

from __future__ import annotations

import argparse
import sys
import time
from contextlib import ExitStack
from typing import TYPE_CHECKING

from neardup.cli.command import command
from neardup.cli.connect import open_database, open_index
from neardup.cli.options import POSITIVE, parameters
from neardup.cli.output import counted, emit

if TYPE_CHECKING:
    from neardup.index import Index


def _emit_params(fmt: str, index: Index) -> None:
    """The collection's parameters, threshold and text storage, one row each."""
    emit(
        fmt,
        ["parameter", "value"],
        [
            *index.params.to_dict().items(),
            ("threshold", index.threshold),
            ("store_text", index.store_text),
            ("keep", index.keep),
        ],
    )


def _init_options(p: argparse.ArgumentParser) -> None:
    parameters(p, new=True)
    p.add_argument(
        "--exist-ok", action="store_true", help="reuse an existing collection with these parameters"
    )


@command("init", _init_options)
def cmd_init(args: argparse.Namespace) -> int:
    """Create the collection (migrating the schema if needed) and print its parameters.

    Example: neardup init --threshold 0.8
    """
    from neardup.config import CREATE_PARAMETERS

    given = {p.name: getattr(args, p.name) for p in CREATE_PARAMETERS}
    with ExitStack() as stack:
        db = open_database(args, stack)
        index = stack.enter_context(db.create(args.collection, exist_ok=args.exist_ok, **given))
        where = " (distributed on Citus)" if index.distributed else ""
        banding = index.params.banding(index.threshold)
        print(f"collection {index.name!r} ready{where}: {banding}", file=sys.stderr)
        _emit_params(args.format, index)
    return 0


def _rebuild_options(p: argparse.ArgumentParser) -> None:
    from neardup.config import DEFAULT_BATCH_SIZE

    parameters(p, new=False)
    p.add_argument(
        "--batch-size",
        type=POSITIVE,
        default=DEFAULT_BATCH_SIZE,
        help=f"texts re-sketched at a time (default {DEFAULT_BATCH_SIZE:,})",
    )


@command("rebuild", _rebuild_options)
def cmd_rebuild(args: argparse.Namespace) -> int:
    """Change the collection's parameters and recompute its buckets, pairs and clusters.

    Only the options given change. A new threshold, bands or rows re-band the stored signatures
    without reading any text; any other change re-sketches every stored text (the collection
    must store its texts). Bands and rows are re-tuned for the threshold unless both are given.
    --keep changes which document each cluster keeps (stored first, on its own, recomputing
    nothing): `neardup rebuild --keep meta:date`. The rest is one transaction: on an error
    nothing changes. Clusters keep their ids where they stay whole.

    Example: neardup rebuild --threshold 0.9 --k 7
    """
    from neardup.config import PARAM_FIELDS

    changed = {name: value for name in PARAM_FIELDS if (value := getattr(args, name)) is not None}
    with ExitStack() as stack:
        index = open_index(args, stack)
        before = (index.params, index.threshold, index.keep)
        start = time.monotonic()
        differences = []
        if args.keep is not None:
            index.set_keep(args.keep)
            if before[2] != index.keep:
                differences.append(f"keep: {before[2]!r} != {index.keep!r}")
        if args.keep is None or changed or args.threshold is not None or args.bands or args.rows:
            index.rebuild(
                args.threshold, bands=args.bands, rows=args.rows, batch_size=args.batch_size, **changed
            )
        differences[:0] = before[0].differences(index.params)
        if before[1] != index.threshold:
            differences.insert(0, f"threshold: {before[1]!r} != {index.threshold!r}")
        what = "; ".join(d.replace(" != ", " -> ") for d in differences) or "no parameter changed"
        print(
            f"collection {index.name!r} rebuilt in {time.monotonic() - start:.1f} s ({what}): "
            f"{index.params.banding(index.threshold)}",
            file=sys.stderr,
        )
        _emit_params(args.format, index)
    return 0


@command("collections")
def cmd_collections(args: argparse.Namespace) -> int:
    """The schema's collections with their threshold and counts of documents, pairs and clusters.

    The counts are named as `stats` names them: text_pairs are the stored pairs of distinct texts
    (what `add` reports as new text pairs), document_pairs the rows `neardup pairs` lists (copies
    of one text included). counts says how they were found: exact, or estimated from a sample of
    the contents (a distributed collection of more than 50,000 contents, whose exact counts would
    scan every shard). --collection is not used: every collection of --schema is listed.

    Example: neardup collections --format json
    """
    columns = {
        "name": "name",
        "threshold": "threshold",
        "store_text": "store_text",
        "distributed": "distributed",
        "documents": "documents",
        "text_pairs": "pairs",
        "document_pairs": "document_pairs",
        "clusters": "clusters",
        "counts": "counted",
    }
    with ExitStack() as stack:
        found = open_database(args, stack).collections()
        emit(args.format, list(columns), ([getattr(c, field) for field in columns.values()] for c in found))
    return 0


def _drop_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", metavar="NAME", help="the collection to drop")
    p.add_argument("--yes", action="store_true", help="drop it: without this, nothing is dropped")


@command("drop", _drop_options, output=False)
def cmd_drop(args: argparse.Namespace) -> int:
    """Drop a collection with its documents, pairs, clusters and labels (needs --yes).

    Without --yes it says what the collection holds and drops nothing. The collection's writers
    finish first; there is no undo.

    Example: neardup drop old-news --yes
    """
    from neardup.errors import CollectionNotFoundError, ParamsError

    with ExitStack() as stack:
        db = open_database(args, stack)
        found = db.info(args.name)
        held = (
            f"collection {found.name!r} with its {counted(found.documents or 0, 'document')}, "
            f"{counted(found.clusters or 0, 'cluster')} and their pairs and labels"
        )
        if not args.yes:
            raise ParamsError(f"dropping {held} deletes all of it: add --yes to drop it")
        print(f"neardup: dropping {held}", file=sys.stderr)
        if not db.drop(args.name):
            raise CollectionNotFoundError(f"no collection named {args.name!r} in schema {args.schema!r}")
    print(f"dropped collection {args.name!r}", file=sys.stderr)
    return 0
