"""Where the time of a large ingest goes, stage by stage (the profile issue 14 starts from).

Reads a make_corpus.py corpus as `neardup add` reads a file (the readers' checks included), adds
it to a fresh collection on a durable local PostgreSQL in batches of 50,000 with a `StageClock`,
and reports each stage's wall seconds, its share of the ingest's wall time and how often it ran.
The worker thread's stages (reading and checking records, sketching) overlap the writing
thread's, so each thread's stages add up to at most the wall time; "batch transaction, commit
included" minus the writing stages inside it is the commit and what no stage names.

    python bench/bench_profile.py [--n 1000000] [--corpus /tmp/synth1m.jsonl] [--db URL]
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path

from _common import REPO, Report, bench_schema, header, local_server
from bench_scaling import corpus_file, first_lines
from neardup.index import Index
from neardup.ingest import DEFAULT_BATCH_SIZE, StageClock
from neardup.readers import checked, read_records

WORKER = "worker: "
TRANSACTION = "batch transaction, commit included"


def main() -> None:
    """Run the ingest with a stage clock and write the report."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=1_000_000, help="documents (default 1,000,000)")
    parser.add_argument(
        "--corpus", type=Path, help="make_corpus.py JSONL: used if present, else written there"
    )
    parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE)
    parser.add_argument("--db", help="PostgreSQL URL (default: a durable local server made for the run)")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "benchmarks" / "profile.md")
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        path, made = stack.enter_context(corpus_file(args.corpus, args.n))
        source = stack.enter_context(first_lines(path, args.n))
        url = args.db or stack.enter_context(local_server())
        schema = stack.enter_context(bench_schema(url, "nd_profile"))
        index = stack.enter_context(Index.create(url, "profile", schema=schema))
        clock = StageClock()
        print(f"adding {args.n:,} documents ...", file=sys.stderr)
        t0 = time.perf_counter()
        result = index.add(checked(read_records([str(source)])), batch_size=args.batch_size, clock=clock)
        wall = time.perf_counter() - t0
        stats = index.stats()
        report = Report()
        report.say(*header("Where a large ingest's time goes", url, args.db is not None, [f"Corpus: {made}"]))
        report.say(
            f"{args.n:,} documents added in batches of {args.batch_size:,} to an empty collection "
            f"(threshold 0.8, 16 x 8) in **{wall:.1f} s** ({args.n / wall:,.0f} docs/s): {result.added:,} "
            f"added, {result.new_pairs:,} pairs; {stats.bytes_on_disk / args.n:,.0f} bytes a document on "
            "disk. The first batch goes into the empty collection as a bulk load; the others insert "
            "into the bucket index and probe it.",
            "",
        )
        writing = {k: v for k, v in clock.seconds.items() if not k.startswith(WORKER) and k != TRANSACTION}
        inside = sum(v for k, v in writing.items() if k != "wait for the next batch")
        rows = []
        for name, seconds in sorted(writing.items(), key=lambda kv: -kv[1]):
            rows.append((name, f"{seconds:.2f}", f"{100 * seconds / wall:.1f}%", str(clock.entries[name])))
        rest = clock.seconds.get(TRANSACTION, 0.0) - inside
        rows.append(
            ("commit and the rest of the transactions", f"{rest:.2f}", f"{100 * rest / wall:.1f}%", "")
        )
        report.say("The writing thread (the database work and the numpy between it):", "")
        report.table(["stage", "seconds", "of the wall time", "times"], "lrrr", rows)
        report.say("", "The worker thread (overlapping the writing thread):", "")
        report.table(
            ["stage", "seconds", "of the wall time", "times"],
            "lrrr",
            [
                (name, f"{s:.2f}", f"{100 * s / wall:.1f}%", str(clock.entries[name]))
                for name, s in sorted(clock.seconds.items(), key=lambda kv: -kv[1])
                if name.startswith(WORKER)
            ],
        )
        report.write(args.out)


if __name__ == "__main__":
    main()
