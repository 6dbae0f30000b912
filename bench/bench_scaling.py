"""Scaling on a synthetic corpus: daily batches into a growing index, and the ingest's memory.

    python bench/bench_scaling.py [--corpus PATH] [--more PATH ...] [--n 1000000] [--batch 10000]
                                  [--queries 100] [--no-daily] [--no-memory] [--db URL]
                                  [--out-dir docs/benchmarks]

The corpus is ../shared/data/make_corpus.py's (``--n N --seed 1``, ~1.5 KB documents, ~10%
near-copies): --corpus PATH uses that file when it exists (its first N documents) and writes it
there when it does not; without --corpus it is generated in a temporary directory and removed.
make_corpus.py keeps every original's words in memory (about 4 GB a million documents), so ten
million are made as ten files of a million with seeds 1 to 10 and given as --corpus for the first
and --more for each of the others, read in that order; a document of the k-th --more file has the
id ``k:ID``. Near-copies are planted within each file only. For 10M on this machine:

    python bench/bench_scaling.py --n 10000000 --batch 50000 --no-memory \
        --corpus /tmp/synth1m-s1.jsonl --more /tmp/synth1m-s2.jsonl ... --more /tmp/synth1m-s10.jsonl

(a) Daily batches: N/--batch batches (100 of 10,000 by default) go into one collection at
threshold 0.8 with neardup's defaults, each by its own ``Index.add`` call (one transaction, as a
daily import would be), verified pairs included; each batch's time is measured from records in
memory to committed rows. When the collection reaches 10k, 20k, 50k, 100k, 200k, 500k and 1M
documents (and N), query latency is measured over --queries stored documents sampled uniformly
from everything added so far plus --edited sampled documents with ~3% of words replaced: p50 and
p99 of one query each (text in, verified (id, jaccard) out), after 10 untimed ones.

(b) Memory: ``neardup add`` (the command line, default batch size) loads the whole corpus into a
fresh collection on the same server as a separate process; its resident memory (the process and
any children) is sampled every --interval seconds, and the documents read so far are estimated
from its read offset in the corpus file. Peak RSS is also read from the kernel (``ru_maxrss``).
The PostgreSQL server's memory is its own processes' and is not counted: its shared buffers
(shared_buffers=2GB) show up in the RSS of every backend that touches them, so a sum would
mislead.

Writes scaling.md, scaling.png and memory.png into --out-dir.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import psycopg

from _common import (
    MAKE_CORPUS,
    SERVER_SETTINGS,
    Report,
    bench_schema,
    drop_schema,
    edited,
    header,
    latencies_ms,
    local_server,
    pct,
    pyplot,
    read_jsonl,
    tree_rss,
    warm_up,
)
from neardup.index import Index
from neardup.ingest import DEFAULT_BATCH_SIZE
from neardup.storage import migrate
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


@dataclass
class Memory:
    samples: list[tuple[float, int, float]] = field(default_factory=list)  # (s, RSS bytes, docs read)
    max_rss: int = 0  # ru_maxrss, bytes
    seconds: float = 0.0
    summary: str = ""


# -- the corpus ---------------------------------------------------------------------------------


@contextlib.contextmanager
def corpus_file(path: Path | None, n: int) -> Iterator[tuple[Path, str]]:
    """(path, how it was obtained) of a make_corpus.py corpus (plain JSONL) of at least n documents."""
    if path is not None and path.exists():
        with path.open("rb") as f:
            if f.read(2) == b"\x1f\x8b":  # its lines would be counted in the compressed bytes
                raise SystemExit(f"{path} is gzip-compressed; give the plain JSONL (zcat it first)")
            f.seek(0)
            have = sum(1 for _ in islice(f, n))
        if have < n:
            raise SystemExit(f"{path} holds {have:,} documents, fewer than --n {n:,}")
        yield path, f"`{path}` (existing file; its first {n:,} documents)"
        return
    with contextlib.ExitStack() as stack:
        if path is None:
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="nd-corpus-", dir="/var/tmp"))
            path = Path(tmp) / f"synthetic_{n}.jsonl"
        print(f"generating {n:,} documents into {path} ...", file=sys.stderr)
        t0 = time.perf_counter()
        cmd = [sys.executable, str(MAKE_CORPUS), str(path), "--n", str(n), "--seed", "1"]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        made = f"made by `make_corpus.py --n {n} --seed 1` in {time.perf_counter() - t0:.0f} s"
        yield path, made


@contextlib.contextmanager
def first_lines(path: Path, n: int) -> Iterator[Path]:
    """path itself when it holds exactly n lines, else a temporary copy of its first n lines."""
    with path.open("rb") as f:
        lines = sum(1 for _ in islice(f, n + 1))
    if lines <= n:
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="nd-corpus-", dir="/var/tmp") as tmp:
        out = Path(tmp) / path.name
        with path.open("rb") as src, out.open("wb") as dst:
            dst.writelines(islice(src, n))
        yield out


# -- (a) daily batches --------------------------------------------------------------------------


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


# -- (b) memory ---------------------------------------------------------------------------------


def _read_offset(pid: int, path: Path) -> int | None:
    """Where process pid's open file descriptor on path is, or None."""
    target = str(path.resolve())
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                    for line in Path(f"/proc/{pid}/fdinfo/{fd}").read_text().splitlines():
                        if line.startswith("pos:"):
                            return int(line.split()[1])
    except OSError:
        pass
    return None


def memory(url: str, schema: str, corpus: Path, n: int, interval: float, batch_size: int | None) -> Memory:
    base = [sys.executable, "-m", "neardup", "--db", url, "--schema", schema, "--collection", "memory"]
    subprocess.run([*base, "init", "--threshold", str(THRESHOLD)], check=True, capture_output=True)
    size = corpus.stat().st_size
    mem = Memory()
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        cmd = [*base, "add", str(corpus)] + ([] if batch_size is None else ["--batch-size", str(batch_size)])
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
        docs = 0.0
        while True:
            # wait4, not Popen.wait: it also gives the kernel's peak RSS of the process.
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            offset = _read_offset(proc.pid, corpus)
            docs = n * offset / size if offset is not None else docs
            mem.samples.append((time.perf_counter() - t0, tree_rss(proc.pid), docs))
            time.sleep(interval)
        mem.seconds = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        said = err.read().decode(errors="replace").strip().splitlines()
        mem.summary = said[-1] if said else ""
    if proc.returncode != 0:
        raise SystemExit(f"neardup add failed ({proc.returncode}): {mem.summary}")
    mem.max_rss = usage.ru_maxrss * 1024  # KiB on Linux
    mem.samples.append((mem.seconds, 0, float(n)))  # the end, for the plot's x range (RSS dropped)
    return mem


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


def mib(x: float) -> str:
    return f"{x / 2**20:,.0f}"


def plot_scaling(batches: list[Batch], checkpoints: list[Checkpoint], batch_size: int, path: Path) -> None:
    plt = pyplot()
    from matplotlib import ticker

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.4))
    sizes = np.array([b.size_after for b in batches])
    rates = np.array([b.rate for b in batches])
    left.plot(sizes, rates, marker="o", markersize=3, linewidth=1, color="#1f6fb4")
    left.xaxis.set_major_formatter(_count_formatter())
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
    right.xaxis.set_major_formatter(_count_formatter())
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


def plot_memory(mem: Memory, n: int, path: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8.5, 4.2))
    live = [(t, rss, d) for t, rss, d in mem.samples if rss > 0]
    ax.plot([t for t, _, _ in live], [rss / 2**20 for _, rss, _ in live], color="#1f6fb4", linewidth=1.2)
    ax.axhline(mem.max_rss / 2**20, color="#1f6fb4", linestyle=":", linewidth=1)
    ax.text(0, mem.max_rss / 2**20, f" peak {mib(mem.max_rss)} MiB (ru_maxrss)", va="bottom", fontsize=8)
    ax.set_xlim(0, mem.seconds)
    ax.set_ylim(0, mem.max_rss / 2**20 * 1.25)
    ax.set_xlabel("seconds")
    ax.set_ylabel("resident memory of the client, MiB", color="#1f6fb4")
    docs = ax.twinx()
    docs.plot([t for t, _, _ in mem.samples], [d for _, _, d in mem.samples], color="#e8842a", linewidth=1)
    docs.set_ylim(0, n * 1.05)
    docs.yaxis.set_major_formatter(_count_formatter())
    docs.set_ylabel("documents read (from the file offset)", color="#e8842a")
    ax.set_title(f"neardup add of {n:,} documents in {mem.seconds:.0f} s", fontsize=10)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _count_formatter() -> Any:
    from matplotlib import ticker

    def label(v: float, _: object) -> str:
        return f"{v / 1e6:g}M" if v >= 1e6 else f"{v / 1e3:g}k" if v >= 1e3 else f"{v:g}"

    return ticker.FuncFormatter(label)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--corpus", type=Path, help="make_corpus.py JSONL (not gzipped): used if present, else written there"
    )
    ap.add_argument(
        "--more", type=Path, action="append", default=[], help="a further make_corpus.py file (repeatable)"
    )
    ap.add_argument("--n", type=int, default=1_000_000, help="documents (default 1,000,000)")
    ap.add_argument("--batch", type=int, default=10_000, help="documents per daily batch")
    ap.add_argument("--queries", type=int, default=100, help="stored documents queried at each checkpoint")
    ap.add_argument("--edited", type=int, default=20, help="edited copies queried at each checkpoint")
    ap.add_argument("--interval", type=float, default=0.5, help="seconds between RSS samples")
    ap.add_argument(
        "--memory-batch-size", type=int, help="neardup add --batch-size (default: the command's own)"
    )
    ap.add_argument("--no-daily", action="store_true")
    ap.add_argument("--no-memory", action="store_true")
    ap.add_argument("--db", help="PostgreSQL URL (default: a temporary durable local server)")
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
    ap.add_argument("--out-dir", type=Path, default=Path("docs/benchmarks"))
    args = ap.parse_args()
    if args.more and not args.no_memory:
        ap.error("--more needs --no-memory: neardup add of several files would repeat their ids")
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
    batches: list[Batch] = []
    checkpoints: list[Checkpoint] = []
    wal_before = wal_after = None
    mem: Memory | None = None
    stats: Any = None
    with contextlib.ExitStack() as stack:
        corpus, made = stack.enter_context(corpus_file(args.corpus, args.n if not args.more else 1))
        if args.more:
            made = (
                f"`{corpus}` then "
                + ", ".join(f"`{p}`" for p in args.more)
                + " (existing files; ids of the k-th further file prefixed `k:`)"
            )
        url = args.db or stack.enter_context(local_server({**SERVER_SETTINGS, **extra}))
        if not args.no_daily:
            with bench_schema(url, "nd_daily") as schema:
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
                # Dropped (with bench_schema's exit) before the memory run: disk and a cold cache.
        if not args.no_memory:
            schema = f"nd_memory_{os.getpid()}"
            migrate.upgrade(url, schema)
            try:
                whole = stack.enter_context(first_lines(corpus, args.n))
                print(f"neardup add of {args.n:,} documents, sampling its memory ...", file=sys.stderr)
                mem = memory(url, schema, whole, args.n, args.interval, args.memory_batch_size)
            finally:
                drop_schema(url, schema)
        report.say(
            *header(
                "Scaling: daily batches into a growing index, and the ingest's memory",
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
            )
        )

    if batches:
        report.say("## Daily batches", "")
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
            "![ingest rate per batch and query latency against collection size](scaling.png)",
            "",
        )
    if mem is not None:
        report.say("## Memory of the ingest process", "")
        live = [(t, rss, d) for t, rss, d in mem.samples if rss > 0]
        quarter = [
            max((rss for _, rss, d in live if lo * args.n <= d < hi * args.n), default=None)
            for lo, hi in ((0, 0.25), (0.25, 0.5), (0.5, 0.75), (0.75, 1.01))
        ]
        report.table(
            [
                "documents",
                "seconds",
                "docs/s",
                "peak RSS MiB (ru_maxrss)",
                "peak sampled RSS MiB, by quarter of the documents read",
                "samples",
            ],
            "rrrrrr",
            [
                [
                    f"{args.n:,}",
                    f"{mem.seconds:.1f}",
                    f"{args.n / mem.seconds:,.0f}",
                    mib(mem.max_rss),
                    " / ".join("-" if q is None else mib(q) for q in quarter),
                    len(live),
                ]
            ],
        )
        report.say(
            f"`neardup add` (batches of {args.memory_batch_size or DEFAULT_BATCH_SIZE:,}) as its own "
            "process, into a fresh collection on the same server"
            + (" after the daily-batch collection was dropped" if batches else "")
            + f"; its RSS (with any children) sampled every {args.interval} s. Its output: `{mem.summary}`. "
            "The PostgreSQL server's memory is not included (see the top of bench_scaling.py).",
            "",
            "![RSS of the ingest process against documents read](memory.png)",
        )
    args.out_dir.mkdir(parents=True, exist_ok=True)
    report.write(args.out_dir / "scaling.md")
    if batches:
        plot_scaling(batches, checkpoints, args.batch, args.out_dir / "scaling.png")
    if mem is not None:
        plot_memory(mem, args.n, args.out_dir / "memory.png")


if __name__ == "__main__":
    main()
