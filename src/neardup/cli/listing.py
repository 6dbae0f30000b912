"""Commands that read a collection: query, pairs, clusters, stats."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

from neardup.cli.command import command
from neardup.cli.connect import open_index
from neardup.cli.options import POSITIVE, max_text_length, min_jaccard, neighbour_arguments, neighbour_options
from neardup.cli.output import emit, emit_record, rounded


def _query_options(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--text", help="the text to look up, as one argument (quote it)")
    g.add_argument("--file", help="a file with the text, or - for stdin")
    g.add_argument("stdin", nargs="?", choices=["-"], metavar="-", help="- reads the text from stdin")
    min_jaccard(p)
    p.add_argument("--limit", type=POSITIVE, help="at most this many (default: all)")
    neighbour_options(p)
    max_text_length(p, "refuse a longer text from --file or stdin")


@command("query", _query_options)
def cmd_query(args: argparse.Namespace) -> int:
    """Stored documents similar to a text, best first.

    Only documents sharing a bucket are found, so matches far below the threshold never are. A
    collection made with --neighbours also answers --top N (the N nearest, down to its
    neighbour_floor) and --min-containment C [--within] (id, containment, jaccard), both exact.

    Example: neardup query --text "Storms cut power to 40,000 homes" --limit 5
    """
    from neardup.readers import read_text

    asked = neighbour_arguments(args)
    text = args.text if args.text is not None else read_text(args.file or "-", args.max_text_length)
    with ExitStack() as stack:
        index = open_index(args, stack)
        if "min_containment" in asked:
            found = index.query(
                text,
                limit=args.limit,
                min_containment=asked["min_containment"],
                direction=asked["direction"],
            )
            rows = ((c.id, rounded(c.containment), rounded(c.jaccard)) for c in found)
            emit(args.format, ["id", "containment", "jaccard"], rows)
            return 0
        hits = index.query(text, min_jaccard=args.min_jaccard, limit=args.limit, k=asked.get("k"))
        emit(args.format, ["id", "jaccard"], ((i, rounded(j)) for i, j in hits))
    return 0


@command("pairs", min_jaccard, tables=True)
def cmd_pairs(args: argparse.Namespace) -> int:
    """Every near-duplicate pair of documents: id_a, id_b, jaccard.

    One row per pair of documents (`stats` document_pairs at the threshold): a stored pair of two
    texts gives a row for every document of one with every document of the other, and documents
    with the same text are pairs of their own at jaccard 1 (`stats` identical_pairs).

    Example: neardup pairs --min-jaccard 0.9 --format parquet --out pairs.parquet
    """
    with ExitStack() as stack:
        index = open_index(args, stack)
        emit(
            args.format,
            ["id_a", "id_b", "jaccard"],
            ((a, b, rounded(j)) for a, b, j in index.pairs(args.min_jaccard)),
            out=args.out,
            types=["string", "string", "double"],
        )
    return 0


@command("clusters", tables=True)
def cmd_clusters(args: argparse.Namespace) -> int:
    """Clusters of near-duplicates: cluster, id, representative.

    The cluster is its stored id, the one the API, the SQL views and the review pages show; it
    lasts across writes (README, "Cluster ids"). The representative is the document the
    collection's keep policy chooses (init --keep, rebuild --keep).

    Example: neardup clusters --format jsonl
    """
    with ExitStack() as stack:
        index = open_index(args, stack)

        def rows() -> Iterator[tuple[int, str, bool]]:
            for cluster in index.clusters():
                for doc_id in cluster:
                    yield cluster.id, doc_id, doc_id == cluster.representative

        emit(
            args.format,
            ["cluster", "id", "representative"],
            rows(),
            out=args.out,
            types=["int64", "string", "bool"],
        )
    return 0


@command("stats")
def cmd_stats(args: argparse.Namespace) -> int:
    """Counts, settings, size on disk, fullest buckets and parameters of the collection.

    documents; contents: distinct texts (copies of one text are one content); text_pairs: stored
    near-duplicate pairs of distinct texts (what `add` reports as new text pairs);
    identical_pairs: pairs of documents with the same text; document_pairs: the rows `neardup
    pairs` lists, every pair of documents whose texts are a stored pair plus the identical pairs;
    clusters: those of two or more documents, as `neardup clusters` lists them. Then what the
    collection keeps (keep, neighbours, changes_feed), its bytes and its parameters. JSON and
    JSONL give one object (`neardup stats --format json | jq .documents`); TSV and CSV a row a
    value, nested names joined by dots.

    Example: neardup stats --format json
    """
    from neardup.database import Database

    with ExitStack() as stack:
        index = open_index(args, stack)
        s = index.stats()
        record: dict[str, Any] = {
            "database": Database(args.url, args.schema).url_redacted,
            **({"data_directory": args.data_directory} if getattr(args, "data_directory", None) else {}),
            "collection": s.name,
            "documents": s.documents,
            "contents": s.contents,
            "text_pairs": s.pairs,
            "identical_pairs": s.identical_pairs,
            "document_pairs": s.document_pairs,
            "clusters": s.clusters,
            "threshold": s.threshold,
            "keep": s.keep,
            "store_text": s.store_text,
            "neighbours": s.params.neighbours,
            "changes_feed": s.changes_feed,
            **({"changes_retention_hours": s.changes_retention_hours} if s.changes_feed else {}),
            "distributed": index.distributed,
            "bucket_rows": s.bucket_rows,
            **(
                {
                    "neighbour_rows": s.neighbour_rows,
                    "neighbour_bytes_per_document": s.neighbour_bytes // max(s.documents, 1),
                }
                if s.params.neighbours
                else {}
            ),
            "bytes_on_disk": s.bytes_on_disk,
            "bytes": {
                table: {"rows": rows, "indexes": indexes}
                for table, (rows, indexes) in s.bytes_by_table.items()
            },
            "expected_fp_rate": rounded(s.expected_fp_rate),
            "expected_fn_rate": rounded(s.expected_fn_rate),
            "candidate_probability_at_threshold": rounded(s.candidate_probability_at_threshold),
            "expected_threshold_bin_recall": rounded(s.expected_threshold_bin_recall),
            "params": s.params.to_dict(),
            "largest_buckets": [
                {"band": band, "bucket": key, "contents": n} for band, key, n in s.largest_buckets
            ],
        }
        emit_record(args.format, record)
    return 0
