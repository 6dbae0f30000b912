"""Commands that read a collection: query, pairs, clusters, stats."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

from neardup.cli.command import command
from neardup.cli.connect import open_index
from neardup.cli.options import POSITIVE, max_text_length, min_jaccard, neighbour_arguments, neighbour_options
from neardup.cli.output import emit, emit_record, rounded

if TYPE_CHECKING:
    from neardup.core.recall_check import RecallCheck


def _query_options(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--text", help="the text to look up, as one argument (quote it)")
    g.add_argument("--file", help="a file with the text, or - for stdin")
    g.add_argument("stdin", nargs="?", choices=["-"], metavar="-", help="- reads the text from stdin")
    min_jaccard(p)
    p.add_argument("--limit", type=POSITIVE, help="at most this many (default: all)")
    neighbour_options(p)
    max_text_length(p, "refuse a longer text from --file or stdin")


def _read_text(args: argparse.Namespace) -> str:
    from neardup.readers import read_text  # the input readers, loaded only when a file is read

    return str(read_text(args.file or "-", args.max_text_length))


@command("query", _query_options)
def cmd_query(args: argparse.Namespace) -> int:
    """Stored documents similar to a text, best first.

    Only documents sharing a bucket are found, so matches far below the threshold never are. A
    collection made with --neighbours also answers --top N (the N nearest, down to its
    neighbour_floor) and --min-containment C [--within] (id, containment, jaccard), both exact.

    Example: neardup query --text "Storms cut power to 40,000 homes" --limit 5
    """
    asked = neighbour_arguments(args)
    text = args.text if args.text is not None else _read_text(args)
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
        dense_note(index, [i for i, _ in hits])
    return 0


def dense_note(index: Any, ids: list[str], what: str = "") -> None:
    """A line on standard error for each dense cluster the matches ``ids`` belong to (``what``:
    the input records whose best matches they are, counted; else one text's matches)."""
    if not ids:
        return
    bound = index.params.dense_cluster_size
    found = index.clusters_of(sorted(set(ids)))
    records: dict[int, int] = {}
    size: dict[int, int] = {}
    for doc_id in ids:
        if doc_id in found and found[doc_id][1] >= bound:
            cluster, size[found[doc_id][0]] = found[doc_id]
            records[cluster] = records.get(cluster, 0) + 1
    for cluster, count in records.items():
        who = f"{count:,} {what} belong" if what else "the text belongs"
        print(
            f"neardup: {who} to dense cluster {cluster} with {size[cluster]:,} members (distinct "
            f"texts); `neardup clusters` lists them, `neardup pairs --cluster {cluster} --complete` "
            "their pairs",
            file=sys.stderr,
        )


def _pairs_options(p: argparse.ArgumentParser) -> None:
    min_jaccard(p)
    p.add_argument("--cluster", type=int, metavar="ID", help="the pairs of this cluster only")
    p.add_argument(
        "--complete",
        action="store_true",
        help="with --cluster: every pair of the cluster, verified now (quadratic in its size), "
        "where a dense cluster stores only a connecting subset",
    )


@command("pairs", _pairs_options, tables=True)
def cmd_pairs(args: argparse.Namespace) -> int:
    """Every near-duplicate pair of documents: id_a, id_b, jaccard.

    One row per pair of documents (`stats` document_pairs at the threshold): a stored pair of two
    texts gives a row for every document of one with every document of the other, and documents
    with the same text are pairs of their own at jaccard 1 (`stats` identical_pairs). A dense
    cluster (of the collection's dense_cluster_size distinct texts or more) stores a verified
    subset of its pairs that connects it, not every pair: a line on standard error says so, and
    --cluster ID --complete lists every pair of one cluster, verified now (quadratic in its size).

    Example: neardup pairs --min-jaccard 0.9 --format parquet --out pairs.parquet
    """
    if args.complete and args.cluster is None:
        print("neardup: error: --complete needs --cluster ID", file=sys.stderr)
        return 2
    with ExitStack() as stack:
        index = open_index(args, stack)
        if args.complete:
            found = index.cluster_pairs(args.cluster, args.min_jaccard)
        else:
            found = index.pairs(args.min_jaccard, cluster=args.cluster)
            dense = index.dense_clusters()
            if dense and args.cluster is None:
                print(
                    f"neardup: {len(dense):,} dense clusters ({sum(m for _, _, m in dense):,} documents) "
                    "list a verified subset of their pairs that connects each; "
                    "--cluster ID --complete lists all of one's",
                    file=sys.stderr,
                )
            elif args.cluster in {c for c, _, _ in dense}:
                print(
                    f"neardup: cluster {args.cluster} is dense: these are a verified subset of its "
                    "pairs that connects it; --complete lists them all",
                    file=sys.stderr,
                )
        emit(
            args.format,
            ["id_a", "id_b", "jaccard"],
            ((a, b, rounded(j)) for a, b, j in found),
            out=args.out,
            types=["string", "string", "double"],
        )
    return 0


@command("clusters", tables=True)
def cmd_clusters(args: argparse.Namespace) -> int:
    """Clusters of near-duplicates: cluster, id, representative, dense.

    The cluster is its stored id, the one the API, the SQL views and the review pages show; it
    lasts across writes (README, "Cluster ids"). The representative is the document the
    collection's keep policy chooses (init --keep, rebuild --keep). Dense: the cluster holds the
    collection's dense_cluster_size distinct texts or more, and stores a verified subset of its
    pairs that connects it (`pairs --cluster ID --complete` lists them all).

    Example: neardup clusters --format jsonl
    """
    with ExitStack() as stack:
        index = open_index(args, stack)

        def rows() -> Iterator[tuple[int, str, bool, bool]]:
            for cluster in index.clusters():
                for doc_id in cluster:
                    yield cluster.id, doc_id, doc_id == cluster.representative, cluster.dense

        emit(
            args.format,
            ["cluster", "id", "representative", "dense"],
            rows(),
            out=args.out,
            types=["int64", "string", "bool", "bool"],
        )
    return 0


@command("stats")
def cmd_stats(args: argparse.Namespace) -> int:
    """Counts, settings, size on disk, fullest buckets and parameters of the collection.

    documents; contents: distinct texts (copies of one text are one content); text_pairs: stored
    near-duplicate pairs of distinct texts (what `add` reports as new text pairs);
    identical_pairs: pairs of documents with the same text; document_pairs: the rows `neardup
    pairs` lists, every pair of documents whose texts are a stored pair plus the identical pairs;
    clusters: those of two or more documents, as `neardup clusters` lists them; dense_clusters:
    those of dense_cluster_size distinct texts or more (dense_contents, dense_documents: theirs),
    which store a verified subset of their pairs that connects them; counts: exact, or estimated
    from a sample of the contents on a distributed collection of more than 50,000 contents (where
    an exact count scans every shard). Then what the collection keeps
    (keep, neighbours, changes_feed), its bytes and its parameters.

    expected_threshold_bin_recall: the expected recall of the pairs in [threshold, threshold +
    0.05) under the tuner's prior (pairs bunched towards the threshold). threshold_bin_pairs and
    threshold_bin_recall_own: the stored pairs in that bin and the expected recall they give
    (each found pair weighted by 1 / P(candidate) of its similarity: an estimate, trusted from
    100 pairs). When it falls under the collection's recall target, threshold_bin_recall_short is
    true, threshold_bin_rebuild names the rebuild that would restore it and standard error warns,
    with that rebuild's bands, bucket rows and candidates (a model). JSON and JSONL give one object
    (`neardup stats --format json | jq .documents`); TSV and CSV a row a value, nested names
    joined by dots.

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
            **s.counts(),
            "dense_clusters": s.dense_clusters,
            "dense_contents": s.dense_contents,
            "dense_documents": s.dense_documents,
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
            **_recall_check(s.recall_check),
            "params": s.params.to_dict(),
            "largest_buckets": [
                {"band": band, "bucket": key, "contents": n} for band, key, n in s.largest_buckets
            ],
        }
        emit_record(args.format, record)
    if s.recall_check is not None and s.recall_check.short:
        print(f"neardup: warning: {s.recall_check.summary()}", file=sys.stderr)
    return 0


def _recall_check(check: RecallCheck | None) -> dict[str, Any]:
    """The threshold bin's check from the collection's own pairs, as fields of the stats record."""
    if check is None:
        return {}
    fix = check.restoration
    return {
        "threshold_bin_pairs": check.pairs,
        "threshold_bin_recall_own": rounded(check.own_recall) if check.own_recall is not None else None,
        "threshold_bin_recall_short": check.short,
        "threshold_bin_rebuild": f"neardup rebuild {fix.option}" if fix is not None else None,
        "threshold_bin_check": check.summary(),
    }
