"""One server and a million documents: where the ingest's time goes stage by stage, the bytes each
table costs a document, and the collection's answers at that size (query latency, batch check rate).

Reads a make_corpus.py corpus as `neardup add` reads a file (the readers' checks included), adds
it to a fresh collection on a durable local PostgreSQL in batches of 50,000 with a `StageClock`,
and reports each stage's wall seconds, its share of the ingest's wall time and how often it ran.
The worker threads' stages (reading and checking records a batch ahead, sketching, and in an ingest
into an empty collection the next batch's contents written ahead on a second connection and the
documents COPY while the writing thread verifies) overlap the writing thread's, so each thread's
stages add up to at most the wall time; "batch transaction, commit
included" minus the writing stages inside it is the commit and what no stage names. Then, on the
full collection: --queries edited copies of stored documents (about 3% of words replaced) queried
one at a time (p50, p99, after 20 untimed), and --check edited copies checked with `Index.check`
in one call (documents a second), and as many new texts (sampled ones with their words shuffled).
Those run right after the ingest, before autovacuum has finished its first pass over the freshly
loaded partitions (a minute or more at 1M documents, on the same cores); the queries are timed again
once it has (at most --settle seconds later): the latency a long-lived archive sees between loads.

    python bench/bench_profile.py [--n 1000000] [--corpus /tmp/synth1m.jsonl] [--db URL]
                                  [--queries 1000] [--check 100000] [--settle 900]
                                  [--out docs/benchmarks/profile.md]
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import sys
import time
from pathlib import Path

from _autovacuum import autovacuumed, due_tables
from _common import CpuMeter, Report, database, edited, header, latencies_ms, pct, synthetic_corpus
from _options import add_db, add_out, add_settle, add_synthetic, parser
from neardup.index import Index
from neardup.ingest import DEFAULT_BATCH_SIZE, StageClock
from neardup.readers import checked, read_records

WORKER = "worker: "
TRANSACTION = "batch transaction, commit included"
# Stages of their own transaction after the batches (not inside any batch transaction).
AFTER_BATCHES = ("build the deferred bucket index",)


def shuffled(text: str, rng: random.Random) -> str:
    """The text's words in a random order: a new document of the same length and vocabulary."""
    words = text.split()
    rng.shuffle(words)
    return " ".join(words)


def timed_check(index: Index, texts: list[str]) -> tuple[float, int]:
    """Seconds for ``Index.check`` of the texts in one call, and how many found a near-duplicate."""
    start = time.perf_counter()
    found = sum(1 for r in index.check((f"probe-{i}", t) for i, t in enumerate(texts)) if r.matches)
    return time.perf_counter() - start, found


def sample_texts(path: Path, n: int, k: int, seed: int = 1) -> list[str]:
    """Texts of ``k`` documents drawn at random from the first ``n`` lines of a JSONL corpus."""
    wanted = set(random.Random(seed).sample(range(n), k))
    with path.open("rb") as f:
        return [json.loads(line)["text"] for i, line in enumerate(f) if i in wanted]


def cpu_lines(cpu: CpuMeter, wall: float) -> list[str]:
    """What the ingest cost in CPU, against what the machine's cores could give in its wall time: the
    floor of the wall time, were every core busy throughout."""
    cores = os.cpu_count() or 1
    if cpu.machine_s is None:
        return [f"CPU: this process {cpu.process_s:.1f} s (user + system, all its threads).", ""]
    return [
        f"CPU during the ingest: this process **{cpu.process_s:.1f} s** (user + system, all its threads), "
        f"the rest of the machine (the PostgreSQL server, mostly) **{cpu.machine_s - cpu.process_s:.1f} s**: "
        f"{cpu.machine_s:.1f} s of the {cores} x {wall:.1f} s the {cores} cores could give "
        f"({100 * cpu.machine_s / (cores * wall):.0f}% busy). With every core busy throughout, the "
        f"ingest would take at least **{cpu.machine_s / cores:.1f} s**.",
        "",
    ]


def main() -> None:
    """Run the ingest with a stage clock and write the report."""
    ap = parser(__doc__)
    add_synthetic(ap, 1_000_000)
    ap.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE)
    add_db(ap)
    ap.add_argument("--queries", type=int, default=1000, help="queries timed one by one")
    ap.add_argument("--check", type=int, default=100_000, help="documents in the batch check")
    add_settle(ap, 900)
    add_out(ap, "profile.md")
    args = ap.parse_args()
    with contextlib.ExitStack() as stack:
        source, made = stack.enter_context(synthetic_corpus(args.corpus, args.n))
        url, schema = stack.enter_context(database(args.db, "nd_profile"))
        index = stack.enter_context(Index.create(url, "profile", schema=schema))
        clock = StageClock()
        print(f"adding {args.n:,} documents ...", file=sys.stderr)
        t0 = time.perf_counter()
        with CpuMeter() as cpu:
            result = index.add(checked(read_records([str(source)])), batch_size=args.batch_size, clock=clock)
        wall = time.perf_counter() - t0
        loaded = time.time()
        due = due_tables(url, schema)
        stats = index.stats()
        rng = random.Random(2)
        sampled = sample_texts(source, args.n, max(args.queries, args.check))
        probes = [edited(t, rng) for t in sampled]
        print(f"querying {args.queries:,} and checking {2 * args.check:,} documents ...", file=sys.stderr)
        query_ms = latencies_ms(index.query, probes[: args.queries])
        copies = timed_check(index, probes[: args.check])
        fresh = timed_check(index, [shuffled(t, rng) for t in sampled[: args.check]])
        print(
            f"waiting for autovacuum's first pass, up to {args.settle:.0f} s after the ingest ...",
            file=sys.stderr,
        )
        settled = autovacuumed(url, due, loaded, args.settle)
        settled_ms = latencies_ms(index.query, probes[: args.queries])
        report = Report()
        report.say(*header("One server, a million documents", url, args.db is not None, [f"Corpus: {made}"]))
        report.say(
            f"{args.n:,} documents added in batches of {args.batch_size:,} to an empty collection "
            f"(threshold 0.8, 16 x 8) in **{wall:.1f} s** ({args.n / wall:,.0f} docs/s): {result.added:,} "
            f"added, {result.new_pairs:,} pairs. An ingest into an empty collection writes the bucket rows "
            "unindexed, finds candidates among its own rows in memory, and builds the bucket index once "
            "at the end.",
            "",
            *cpu_lines(cpu, wall),
            f"On the full collection: query p50 **{pct(query_ms, 50):.2f} ms**, "
            f"p99 **{pct(query_ms, 99):.2f} "
            f"ms** ({len(query_ms):,} edited copies of stored documents, one at a time) right after "
            "the ingest, before autovacuum had finished its first pass over the new partitions; "
            + (
                f"once it had finished, {settled:.0f} s after the ingest, "
                if settled is not None
                else f"it had not finished {args.settle:.0f} s after the ingest; then "
            )
            + f"p50 **{pct(settled_ms, 50):.2f} ms**, p99 **{pct(settled_ms, 99):.2f} ms** "
            "(the same queries).",
            "",
            f"`Index.check` of {args.check:,} edited copies of stored documents in **{copies[0]:.1f} s** "
            f"(**{args.check / copies[0]:,.0f} docs/s**; {copies[1]:,} found a stored near-duplicate, "
            f"each verified exactly), and of {args.check:,} new texts (stored texts with their words "
            f"shuffled) in **{fresh[0]:.1f} s** (**{args.check / fresh[0]:,.0f} docs/s**; {fresh[1]:,} "
            "found one).",
            "",
            f"**{stats.bytes_on_disk / args.n:,.0f} bytes a document** on disk:",
            "",
        )
        report.table(
            ["table", "rows (with TOAST), bytes a document", "indexes, bytes a document"],
            "lrr",
            [
                (table, f"{rows / args.n:,.0f}", f"{indexes / args.n:,.0f}")
                for table, (rows, indexes) in stats.bytes_by_table.items()
            ],
        )
        report.say("")
        writing = {
            k: v
            for k, v in clock.seconds.items()
            if not k.startswith(WORKER) and k != TRANSACTION and k not in AFTER_BATCHES
        }
        inside = sum(v for k, v in writing.items() if k != "wait for the next batch")
        rows = []
        for name, seconds in sorted(writing.items(), key=lambda kv: -kv[1]):
            rows.append((name, f"{seconds:.2f}", f"{100 * seconds / wall:.1f}%", str(clock.entries[name])))
        rest = clock.seconds.get(TRANSACTION, 0.0) - inside
        rows.append(
            ("commit and the rest of the transactions", f"{rest:.2f}", f"{100 * rest / wall:.1f}%", "")
        )
        for name in AFTER_BATCHES:
            if name in clock.seconds:
                seconds = clock.seconds[name]
                rows.append(
                    (f"{name} (after the batches)", f"{seconds:.2f}", f"{100 * seconds / wall:.1f}%", "1")
                )
        report.say("The writing thread (the database work and the numpy between it):", "")
        report.table(["stage", "seconds", "of the wall time", "times"], "lrrr", rows)
        report.say(
            "",
            "The worker threads (reading, sketching, the next batch's contents written ahead on a second "
            "connection, and the documents COPY alongside verification, each overlapping the others and "
            "the writer):",
            "",
        )
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
