"""Scaling on a synthetic corpus: daily batches into a growing index.

    python bench/bench_scaling.py [--corpus PATH] [--more PATH ...] [--n 1000000] [--batch 10000]
                                  [--queries 100] [--edited 20] [--db URL] [--max-wal-size SIZE]
                                  [--set NAME=VALUE ...] [--out-dir docs/benchmarks]

The corpus is ../shared/data/make_corpus.py's (``--n N --seed 1``, ~1.5 KB documents, ~10%
near-copies): --corpus PATH uses that file when it exists (its first N documents) and writes it
there when it does not; without --corpus it is generated in a temporary directory and removed.
make_corpus.py keeps every original's words in memory (about 4 GB a million documents), so ten
million are made as ten files of a million with seeds 1 to 10 and given as --corpus for the first
and --more for each of the others, read in that order; a document of the k-th --more file has the
id ``k:ID``. Near-copies are planted within each file only. For 10M on this machine:

    python bench/bench_scaling.py --n 10000000 --batch 50000 \
        --corpus /tmp/synth1m-s1.jsonl --more /tmp/synth1m-s2.jsonl ... --more /tmp/synth1m-s10.jsonl

N/--batch batches (100 of 10,000 by default) go into one collection at threshold 0.8 with
neardup's defaults, each by its own ``Index.add`` call (one transaction, as a daily import would
be), verified pairs included; each batch's time is measured from records in memory to committed
rows, and this process's resident memory read after it. When the collection reaches 10k, 20k, 50k,
100k, 200k, 500k and 1M documents (and N), query latency is measured over --queries stored
documents sampled uniformly from everything added so far plus --edited sampled documents with ~3%
of words replaced: p50 and p99 of one query each (text in, verified (id, jaccard) out), after 10
untimed ones. bench_memory.py measures the memory of `neardup add` of such a corpus.

Writes the section of N documents of scaling.md in --out-dir (the page keeps the other sizes'
sections) and its plot, scaling-1m.png for a million (scaling-10m.png for ten million).
"""

from __future__ import annotations

import contextlib
import random
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import psycopg

from _common import (
    SERVER_SETTINGS,
    Report,
    bench_schema,
    corpus_file,
    count_formatter,
    edited,
    header,
    latencies_ms,
    mib,
    pct,
    pyplot,
    read_jsonl,
    server,
    warm_up,
)
from _options import add_db, add_out_dir, add_synthetic, parser
from neardup.index import Index
from neardup.storage.connect import libpq_url

CHECKPOINTS = (10_000, 20_000, 50_000, 100_000, 200_000, 500_000, 1_000_000, 2_000_000, 5_000_000, 10_000_000)
WINDOW = 1_000_000  # the ingest rate over the first and over the last million documents are compared
THRESHOLD = 0.8
RESERVOIR = 5_000  # stored documents kept (uniformly over everything added) to draw queries from


@dataclass
class Batch:
    size_after: int
    seconds: float
    added: int
    new_pairs: int
    rss: int  # resident memory of this (the ingesting) process after the batch, bytes

    @property
    def rate(self) -> float:
        return self.added / self.seconds


@dataclass
class Checkpoint:
    size: int
    stored_ms: list[float]
    edited_ms: list[float]
    hits: int  # edited queries that found their source

    @property
    def all_ms(self) -> list[float]:
        return self.stored_ms + self.edited_ms


# -- daily batches ------------------------------------------------------------------------------


def corpus_records(first: Path, more: list[Path], n: int) -> Iterator[tuple[str, str]]:
    """The first n (id, text) of the files in order; ids of the k-th further file prefixed 'k:'."""
    files = [(first, ""), *((path, f"{k}:") for k, path in enumerate(more, 1))]
    records = ((prefix + doc_id, text) for path, prefix in files for doc_id, text in read_jsonl(path))
    return islice(records, n)


def daily(
    url: str,
    schema: str,
    records: Iterator[tuple[str, str]],
    n: int,
    batch_size: int,
    queries: int,
    n_edited: int,
) -> tuple[list[Batch], list[Checkpoint], Any]:
    index = Index.create(url, "daily", THRESHOLD, schema=schema)
    rng = random.Random(1)
    reservoir: list[tuple[str, str]] = []
    seen = 0
    batches: list[Batch] = []
    checkpoints: list[Checkpoint] = []
    wanted = sorted({c for c in CHECKPOINTS if c <= n} | {n})
    me = psutil.Process()
    with index:
        while batch := list(islice(records, batch_size)):
            t0 = time.perf_counter()
            result = index.add(batch)
            seconds = time.perf_counter() - t0
            before = batches[-1].size_after if batches else 0
            rss = me.memory_info().rss
            batches.append(Batch(before + len(batch), seconds, result.added, result.new_pairs, rss))
            for rec in batch:  # reservoir sampling: a uniform sample of every document stored so far
                seen += 1
                if len(reservoir) < RESERVOIR:
                    reservoir.append(rec)
                elif (j := rng.randrange(seen)) < RESERVOIR:
                    reservoir[j] = rec
            size = batches[-1].size_after
            print(f"  {size:,} documents: batch {seconds:.2f} s, RSS {mib(rss)} MiB", file=sys.stderr)
            if any(before < c <= size for c in wanted):
                stored = [text for _, text in rng.sample(reservoir, min(queries, len(reservoir)))]
                sources = rng.sample(reservoir, min(n_edited, len(reservoir)))
                near = [edited(text, rng) for _, text in sources]
                stored_ms = latencies_ms(index.query, stored, warmup=10)
                edited_ms = latencies_ms(index.query, near, warmup=0)
                hits = sum(
                    any(hit == doc_id for hit, _ in index.query(text))
                    for (doc_id, _), text in zip(sources, near, strict=True)
                )
                checkpoints.append(Checkpoint(size, stored_ms, edited_ms, hits))
        stats = index.stats()
    return batches, checkpoints, stats


def wal_written(url: str) -> tuple[int, int] | None:
    """(bytes, full-page images) of WAL the server wrote since its statistics began (PG 14+)."""
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        if conn.info.server_version < 140000:
            return None
        row = conn.execute("SELECT wal_bytes::bigint, wal_fpi FROM pg_stat_wal").fetchone()
    return None if row is None else (int(row[0]), int(row[1]))


# -- report -------------------------------------------------------------------------------------


def window_rates(batches: list[Batch]) -> list[str]:
    """The ingest rate (documents over batch seconds) of the first and the last WINDOW documents."""
    n = batches[-1].size_after
    if n < 2 * WINDOW:
        return []
    first = [b for b in batches if b.size_after <= WINDOW]
    last = [b for b in batches if b.size_after > n - WINDOW]
    rate = [sum(b.added for b in w) / sum(b.seconds for b in w) for w in (first, last)]
    return [
        f"Ingest rate over the first million documents **{rate[0]:,.0f} docs/s** ({len(first)} batches), "
        f"over the last million **{rate[1]:,.0f} docs/s** ({len(last)} batches): the last is "
        f"**{rate[1] / rate[0]:.0%}** of the first."
    ]


def rss_by_tenth(batches: list[Batch]) -> tuple[list[str], str, list[list[str]]]:
    """Table: the resident memory after the batches of each tenth of the documents (min and max)."""
    n = batches[-1].size_after
    rows = []
    for k in range(10):
        lo, hi = n * k / 10, n * (k + 1) / 10
        rss = [b.rss for b in batches if lo < b.size_after <= hi]
        if rss:
            rows.append([f"{lo:,.0f} to {hi:,.0f}", str(len(rss)), mib(min(rss)), mib(max(rss))])
    return ["documents in the collection", "batches", "RSS min MiB", "RSS max MiB"], "lrrr", rows


def plot_scaling(batches: list[Batch], checkpoints: list[Checkpoint], batch_size: int, path: Path) -> None:
    plt = pyplot()
    from matplotlib import ticker

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.4))
    sizes = np.array([b.size_after for b in batches])
    rates = np.array([b.rate for b in batches])
    left.plot(sizes, rates, marker="o", markersize=3, linewidth=1, color="#1f6fb4")
    left.xaxis.set_major_formatter(count_formatter())
    left.set_xlim(0, sizes.max() * 1.02)
    left.set_xlabel("documents in the collection after the batch")
    left.set_ylabel("documents/s of the batch")
    left.set_title(f"Daily-batch pattern: {len(batches)} batches of {batch_size:,}", fontsize=10)
    left.set_ylim(0, rates.max() * 1.15)
    left.grid(alpha=0.3)
    cs = [c.size for c in checkpoints]
    for q, style, label in ((50, "o-", "p50"), (99, "s--", "p99")):
        right.plot(cs, [pct(c.all_ms, q) for c in checkpoints], style, label=label, color="#e8842a")
    right.set_xscale("log")
    right.set_xticks(cs)
    right.xaxis.set_major_formatter(count_formatter())
    right.xaxis.set_minor_formatter(ticker.NullFormatter())
    right.set_xlabel("documents in the collection")
    right.set_ylabel("ms per query")
    right.set_ylim(0, None)
    right.set_title("One query (text in, verified pairs out)", fontsize=10)
    right.legend()
    right.grid(alpha=0.3, which="both")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def short(n: int) -> str:
    """1m for a million, 10m, 20k: a size in a file name."""
    return f"{n // 10**6}m" if n % 10**6 == 0 else f"{n // 1000}k" if n % 1000 == 0 else str(n)


def main() -> None:
    ap = parser(__doc__)
    add_synthetic(ap, 1_000_000)
    ap.add_argument(
        "--more", type=Path, action="append", default=[], help="a further make_corpus.py file (repeatable)"
    )
    ap.add_argument("--batch", type=int, default=10_000, help="documents per daily batch")
    ap.add_argument("--queries", type=int, default=100, help="stored documents queried at each checkpoint")
    ap.add_argument("--edited", type=int, default=20, help="edited copies queried at each checkpoint")
    add_db(ap)
    ap.add_argument(
        "--max-wal-size",
        help=f"the local server's max_wal_size (default {SERVER_SETTINGS['max_wal_size']}; less for room)",
    )
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="another setting of the local server (repeatable), e.g. wal_compression=pglz",
    )
    add_out_dir(ap)
    args = ap.parse_args()
    if args.more and (args.corpus is None or not args.corpus.exists()):
        ap.error("--more needs an existing --corpus file")
    if bad := [item for item in args.set if "=" not in item]:
        ap.error(f"--set takes NAME=VALUE, got {bad[0]!r}")
    if args.db and (args.set or args.max_wal_size):
        ap.error("--set and --max-wal-size configure the local server; with --db use the server's own")
    extra = dict(item.split("=", 1) for item in args.set)
    if args.max_wal_size:
        extra["max_wal_size"] = args.max_wal_size
    if missing := [str(p) for p in args.more if not p.exists()]:
        ap.error(f"--more file not found: {', '.join(missing)}")

    report = Report()
    plot = f"scaling-{short(args.n)}.png"
    with contextlib.ExitStack() as stack:
        corpus, made = stack.enter_context(corpus_file(args.corpus, args.n if not args.more else 1))
        if args.more:
            made = (
                f"`{corpus}` then "
                + ", ".join(f"`{p}`" for p in args.more)
                + " (existing files; ids of the k-th further file prefixed `k:`)"
            )
        url = stack.enter_context(server(args.db, {**SERVER_SETTINGS, **extra}))
        schema = stack.enter_context(bench_schema(url, "nd_daily"))
        warm_up(url, schema)
        print(f"daily batches of {args.batch:,} ...", file=sys.stderr)
        wal_before = wal_written(url)
        batches, checkpoints, stats = daily(
            url,
            schema,
            corpus_records(corpus, args.more, args.n),
            args.n,
            args.batch,
            args.queries,
            args.edited,
        )
        wal_after = wal_written(url)
        report.say(
            *header(
                f"{args.n:,} documents",
                url,
                args.db is not None,
                [
                    f"Corpus: synthetic, {args.n:,} documents of ~1.5 KB, {made}",
                    *(
                        [
                            "This run's server, instead of or besides the settings above: "
                            + ", ".join(f"`{name}={value}`" for name, value in extra.items())
                        ]
                        if extra
                        else []
                    ),
                    f"Threshold {THRESHOLD}, neardup's defaults otherwise (128 permutations, 16x8, "
                    "character 5-shingles, NFKC + case folding + collapsed whitespace)",
                ],
                level=2,
            )
        )

    total = sum(b.seconds for b in batches)
    n_docs = batches[-1].size_after
    last = batches[-max(1, len(batches) // 10) :]
    report.say(
        f"{len(batches)} batches of {args.batch:,}, each its own `Index.add` (one transaction, "
        f"verified pairs included), {total:.1f} s in all: {n_docs / total:,.0f} docs/s overall; "
        f"the first batch {batches[0].rate:,.0f} docs/s, the median of the last {len(last)} "
        f"{np.median([b.rate for b in last]):,.0f} docs/s. "
        f"{sum(b.new_pairs for b in batches):,} verified pairs; "
        f"{stats.bytes_on_disk / max(stats.documents, 1):,.0f} bytes per document on disk at the end.",
        "",
    )
    report.say(*window_rates(batches), "")
    if wal_before is not None and wal_after is not None:
        wal, fpi = (after - before for after, before in zip(wal_after, wal_before, strict=True))
        report.say(
            f"The server wrote {wal / 1e9:,.1f} GB of WAL during the batches "
            f"({wal / n_docs:,.0f} bytes a document) with {fpi:,} full-page images: after each "
            "checkpoint, the first change to a page logs the whole page, and the bucket rows' "
            "inserts land on pages all over their index.",
            "",
        )
    report.table(*rss_by_tenth(batches))
    report.say(
        "Resident memory of this process, which makes every `Index.add` call, read after each batch "
        "(the PostgreSQL server's is its own).",
        "",
    )
    rows = []
    prev = 0
    for c in checkpoints:
        since = [b for b in batches if prev < b.size_after <= c.size]
        this = since[-1]
        pairs = sum(b.new_pairs for b in batches if b.size_after <= c.size)
        rows.append(
            [
                f"{c.size:,}",
                f"{this.seconds:.2f}",
                f"{this.rate:,.0f}",
                f"{np.median([b.rate for b in since]):,.0f} ({len(since)})",
                f"{pairs:,}",
                f"{pct(c.all_ms, 50):.2f}",
                f"{pct(c.all_ms, 99):.2f}",
                f"{pct(c.stored_ms, 50):.2f} / {pct(c.edited_ms, 50):.2f}",
                f"{c.hits}/{len(c.edited_ms)}",
            ]
        )
        prev = c.size
    report.table(
        [
            "documents",
            "last batch s",
            "last batch docs/s",
            "median docs/s of batches since the previous row (batches)",
            "pairs",
            "query p50 ms",
            "query p99 ms",
            "p50 stored / edited ms",
            "edited copies that found their source",
        ],
        "rrrrrrrrr",
        rows,
    )
    report.say(
        f"Queries at each row: {args.queries} stored documents sampled uniformly from all added so "
        f"far and {args.edited} of them with ~3% of words replaced, one query each after 10 "
        "untimed ones.",
        "",
        f"![ingest rate per batch and query latency against collection size]({plot})",
        "",
    )
    args.out_dir.mkdir(parents=True, exist_ok=True)
    report.write(
        args.out_dir / "scaling.md", f"{args.n:,} documents", "Scaling: daily batches into a growing index"
    )
    plot_scaling(batches, checkpoints, args.batch, args.out_dir / plot)


if __name__ == "__main__":
    main()
