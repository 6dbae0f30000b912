"""Speed on the same Debian documents in the same run: neardup against datasketch (in memory and on
Redis), rensa and PostgreSQL's pg_trgm.

    python bench/bench_speed.py [CORPUS] [--limit N] [--threshold 0.8] [--queries 200] [--repeats 3]
                                [--trgm-threshold auto|X] [--trgm-pairs-docs 2000]
                                [--no-redis] [--no-trgm] [--db URL] [--settle 300]
                                [--out-dir docs/benchmarks]

Every method gets the same documents, read into memory first (reading the file is not timed), the
same threshold (0.8) and 128 permutations, and character 5-shingles of the ground truth's
normalisation (lowercase, collapsed whitespace). Measured:

- neardup: ``Index.create`` + ``add`` of every document into a durable PostgreSQL (signatures,
  buckets and verified pairs committed), listing all pairs (``pairs()``), and one query (text in,
  verified (id, jaccard) out);
- datasketch ``MinHashLSH`` (its own b x r): MinHash of each document's shingle strings and
  insertion; all pairs = every document queried against the index (unverified candidates); one
  query = MinHash of the text + ``query``. In memory, and on its Redis storage with a private
  redis-server started on loopback (a free port, no persistence) and stopped afterwards;
- rensa ``RMinHashLSH`` in memory, per document ``RMinHash.update`` of the shingle strings and
  ``insert``, all pairs by ``query_all``, with neardup's number of bands (16 at 0.8);
- pg_trgm: table (id, text) loaded by COPY with a GIN ``gin_trgm_ops`` index, queries with ``%``
  at ``pg_trgm.similarity_threshold`` chosen so that ``%`` keeps 95% of the truth pairs with
  5-shingle Jaccard just at the threshold (``auto``; the truth file is needed), and an all-pairs
  self-join only on the first --trgm-pairs-docs documents, against neardup on the same ones.

Queries: --queries documents sampled from the corpus with ~3% of their words replaced, the same
texts for every method, timed one at a time (p50 and p99) once every method is loaded, interleaved:
each block of 50 texts answered by every method in turn, so that all are timed over the same
stretch of the run, and after neardup's load has had autovacuum's pass (at most --settle seconds
after the load). Each method first answers as many other such texts right after its own load,
timed too and reported as its first queries: neardup's read the new bucket index's pages into
PostgreSQL's buffers for the first time (CREATE INDEX writes them past the buffers). All-pairs
listings are the median of --repeats runs, fewer when the runs so far took over 60 s. Ingest runs
once. Ratios are a method's time over neardup's.

Writes speed.md and speed.png into --out-dir.
"""

from __future__ import annotations

import contextlib
import gzip
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

from _autovacuum import autovacuumed, due_tables
from _common import (
    NUM_PERM,
    TRUTH_CONFIG,
    Report,
    database,
    edited,
    header,
    latencies_ms,
    median_of_runs,
    pct,
    pyplot,
    read_jsonl,
    timed,
)
from _options import add_db, add_debian, add_out_dir, add_rounds, add_settle, parser, truth_file
from _rivals import datasketch_minhash, redis_server, rensa_minhash
from neardup.index import Index
from neardup.storage.connect import libpq_url

Docs = list[tuple[str, str]]


@dataclass(frozen=True)
class Queries:
    """The query texts every method is timed on, and as many others it answers first."""

    timed: list[str]
    warm: list[str]


# Texts one method answers in a row before the next takes its turn. Timed each in its own minute,
# neardup's p50 was 0.88, 0.58 and 0.43 ms in three runs within five minutes, so the methods take
# turns and share the run's slow and fast stretches. Blocks of 10 let the switches between methods weigh
# on datasketch (its p50 over neardup's: 1.04 to 1.16 in five runs; 0.80 to 1.06 in four runs with
# blocks of 50), so each method answers 50 in a row and the first of a block is 2% of its samples.
BLOCK = 50


def interleaved_latencies(fns: Sequence[Callable[[str], Any]], texts: Sequence[str]) -> list[list[float]]:
    """Milliseconds of each method's call on each text: the texts in blocks of BLOCK, each block
    answered by every method in turn, the first to go rotating from block to block."""
    out: list[list[float]] = [[] for _ in fns]
    for b, start in enumerate(range(0, len(texts), BLOCK)):
        for k in range(len(fns)):
            i = (b + k) % len(fns)
            for text in texts[start : start + BLOCK]:
                t0 = time.perf_counter()
                fns[i](text)
                out[i].append(1000 * (time.perf_counter() - t0))
    return out


@dataclass
class Result:
    method: str
    docs: int
    ingest_s: float = float("nan")
    pairs_s: float = float("nan")
    pairs_runs: int = 0
    pairs: int = 0
    query_ms: list[float] = field(default_factory=list)
    first_query_ms: list[float] = field(default_factory=list)
    query: Callable[[str], Any] | None = field(default=None, repr=False)
    note: str = ""

    @property
    def to_pairs_s(self) -> float:
        return self.ingest_s + self.pairs_s

    @property
    def p50(self) -> float:
        return pct(self.query_ms, 50)

    @property
    def p99(self) -> float:
        return pct(self.query_ms, 99)


# -- neardup ------------------------------------------------------------------------------------


def bench_neardup(
    url: str, schema: str, name: str, docs: Docs, t: float, queries: Queries | None, repeats: int
) -> tuple[Result, Index, Callable[[float], float | None]]:
    """neardup timed: its ingest, its listing of all pairs, its first queries; with the index
    (open: the caller closes it) and a wait for autovacuum's pass over what the load filled (at most
    the given seconds after the load), which returns the seconds it came after the load, or None."""

    def ingest() -> Index:
        index = Index.create(url, name, t, schema=schema, **TRUTH_CONFIG)
        index.add(docs)
        return index

    r = Result("neardup", len(docs))
    r.ingest_s, index = timed(ingest)
    loaded, due = time.time(), due_tables(url, schema)
    r.method = f"neardup {index.params.bands}x{index.params.rows}, PostgreSQL"
    r.pairs_s, r.pairs_runs, listed = median_of_runs(lambda: list(index.pairs()), repeats)
    r.pairs = len(listed)
    r.query = index.query
    if queries:
        r.first_query_ms = latencies_ms(index.query, queries.warm)
    r.note = "verified pairs (exact Jaccard >= t) stored at ingest; query verified"
    return r, index, lambda settle: autovacuumed(url, due, loaded, settle)


# -- datasketch ---------------------------------------------------------------------------------


def _candidates(
    name: str,
    n: int,
    ingest: Callable[[], list[Any]],
    all_pairs: Callable[[list[Any]], set[Any]],
    query: Callable[[str], Any],
    queries: Queries,
    repeats: int,
) -> Result:
    """An LSH library timed: ingest (returning the signatures), all pairs from them, one query; its
    pairs and query results are unverified candidates."""
    r = Result(name, n)
    r.ingest_s, signatures = timed(ingest)
    r.pairs_s, r.pairs_runs, found = median_of_runs(lambda: all_pairs(signatures), repeats)
    r.pairs = len(found)
    r.query = query
    r.first_query_ms = latencies_ms(query, queries.warm)
    r.note = "unverified LSH candidates (pairs and query)"
    return r


def bench_datasketch(
    docs: Docs, t: float, queries: Queries, repeats: int, storage: dict[str, Any] | None
) -> Result:
    from datasketch import MinHashLSH

    lsh = MinHashLSH(threshold=t, num_perm=NUM_PERM, storage_config=storage, prepickle=storage is not None)

    def ingest() -> list[Any]:
        out = []
        with lsh.insertion_session() as session:
            for doc_id, text in docs:
                m = datasketch_minhash(text)
                session.insert(doc_id, m, check_duplication=False)
                out.append(m)
        return out

    def all_pairs(minhashes: list[Any]) -> set[tuple[str, str]]:
        found: set[tuple[str, str]] = set()
        for (doc_id, _), m in zip(docs, minhashes, strict=True):
            for other in lsh.query(m):
                if other != doc_id:
                    found.add((doc_id, other) if doc_id < other else (other, doc_id))
        return found

    where = "Redis" if storage else "memory"
    name = f"datasketch MinHashLSH {lsh.b}x{lsh.r}, {where}"
    return _candidates(
        name, len(docs), ingest, all_pairs, lambda text: lsh.query(datasketch_minhash(text)), queries, repeats
    )


# -- rensa --------------------------------------------------------------------------------------


def bench_rensa(docs: Docs, t: float, bands: int, queries: Queries, repeats: int) -> Result:
    from rensa import RMinHashLSH

    lsh = RMinHashLSH(t, NUM_PERM, bands)

    def ingest() -> list[Any]:
        out = []
        for i, (_, text) in enumerate(docs):
            m = rensa_minhash(text)
            lsh.insert(i, m)
            out.append(m)
        return out

    def all_pairs(minhashes: list[Any]) -> set[tuple[int, int]]:
        found: set[tuple[int, int]] = set()
        for i, others in enumerate(lsh.query_all(minhashes)):
            found.update((i, j) for j in others if j > i)
            found.update((j, i) for j in others if j < i)
        return found

    name = f"rensa RMinHashLSH {bands}x{NUM_PERM // bands}, memory"
    return _candidates(
        name, len(docs), ingest, all_pairs, lambda text: lsh.query(rensa_minhash(text)), queries, repeats
    )


# -- pg_trgm ------------------------------------------------------------------------------------


def trgm_load(conn: psycopg.Connection[Any], table: str, docs: Docs) -> None:
    conn.execute(f"DROP TABLE IF EXISTS {table}")
    conn.execute(f"CREATE TABLE {table} (id text NOT NULL, text text NOT NULL)")
    with conn.cursor() as cur, cur.copy(f"COPY {table} (id, text) FROM STDIN") as copy:
        for row in docs:
            copy.write_row(row)
    conn.execute(f"CREATE INDEX ON {table} USING gin (text gin_trgm_ops)")
    conn.execute(f"ANALYZE {table}")


def trgm_threshold(
    conn: psycopg.Connection[Any], truth_path: Path, docs: Docs, t: float, rng: random.Random
) -> tuple[float, str]:
    """The pg_trgm similarity that 95% of the truth pairs with J in [t, t + 0.02) reach or exceed."""
    if not truth_path.is_file():
        return t, f"{t} (no truth file to calibrate with: the same number as the Jaccard threshold)"
    text_of = dict(docs)
    near: list[tuple[str, str]] = []
    with gzip.open(truth_path, "rt", encoding="utf-8") as f:
        next(f)
        for line in f:
            a, b, _, inter, union = line.rstrip("\n").split("\t")
            if t <= int(inter) / int(union) < t + 0.02 and a in text_of and b in text_of:
                near.append((a, b))
    if len(near) < 20:
        return t, f"{t} (too few truth pairs near the threshold to calibrate: the same number)"
    sample = rng.sample(near, min(1000, len(near)))
    rows = conn.execute(
        "SELECT similarity(x, y) FROM unnest(%s::text[], %s::text[]) AS u(x, y)",
        ([text_of[a] for a, _ in sample], [text_of[b] for _, b in sample]),
    ).fetchall()
    sims = np.array([r[0] for r in rows], dtype=np.float64)
    value = float(np.floor(np.percentile(sims, 5) * 100) / 100)
    return value, (
        f"{value:.2f}: the 5th percentile (rounded down) of the trigram similarity of {len(sample):,} "
        f"truth pairs with 5-shingle Jaccard in [{t}, {t + 0.02:.2f}) (their median: "
        f"{np.median(sims):.3f}), so that `%` keeps about 95% of the pairs at the threshold"
    )


def bench_trgm(
    conn: psycopg.Connection[Any], docs: Docs, queries: Queries, threshold: float, note: str
) -> tuple[Result, list[str]]:
    """pg_trgm's load and `%` queries through the GIN index (sequential scans off, see below), on
    ``conn`` (autocommit, its search_path the bench schema), which its query goes on using."""
    table = "trgm_docs"
    r = Result("pg_trgm `%` + GIN, PostgreSQL", len(docs))
    r.ingest_s, _ = timed(lambda: trgm_load(conn, table, docs))
    conn.execute(f"SET pg_trgm.similarity_threshold = {threshold}")
    sql = f"SELECT id, similarity(text, %(q)s) FROM {table} WHERE text %% %(q)s"
    # Left to itself the planner takes a sequential scan for some long query texts (seconds
    # each, every row's trigrams compared): counted here, then the index is forced, since the
    # point is pg_trgm's indexed `%`.
    seq = sum(
        any("Seq Scan" in row[0] for row in conn.execute(f"EXPLAIN {sql}", {"q": text}).fetchall())
        for text in queries.timed
    )
    conn.execute("SET enable_seqscan = off")

    def query(text: str) -> list[Any]:
        return conn.execute(sql, {"q": text}, prepare=True).fetchall()

    r.query = query
    r.first_query_ms = latencies_ms(query, queries.warm)
    r.note = f"similarity_threshold {threshold}; no all-pairs run on the whole corpus"
    return r, [
        f"pg_trgm.similarity_threshold = {note}",
        f"pg_trgm queries ran with `enable_seqscan = off`, so through the GIN index: with the "
        f"planner's own choice, {seq} of the {len(queries.timed)} query texts would have been a "
        "sequential scan of the whole table",
    ]


def bench_trgm_pairs(url: str, schema: str, docs: Docs, threshold: float) -> tuple[float, float, int, str]:
    """(load + index s, self-join s, pairs, plan summary) of pg_trgm on docs."""
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute(f"SET search_path = {schema}, public")
        conn.execute(f"SET pg_trgm.similarity_threshold = {threshold}")
        conn.execute("SET enable_seqscan = off")
        load_s, _ = timed(lambda: trgm_load(conn, "trgm_sub", docs))
        sql = "SELECT a.id, b.id FROM trgm_sub a JOIN trgm_sub b ON a.text % b.text AND a.id < b.id"
        plan = "\n".join(row[0] for row in conn.execute(f"EXPLAIN {sql}").fetchall())
        join_s, rows = timed(lambda: conn.execute(sql).fetchall())
        conn.execute("DROP TABLE trgm_sub")
    how = "a nested loop over GIN index scans" if "Index Scan" in plan else "a join without index scans"
    return load_s, join_s, len(rows), how


# -- report -------------------------------------------------------------------------------------


def ratio(value: float, base: float) -> str:
    if value != value or base != base or base <= 0:
        return "-"
    x = value / base
    return f"{x:.1f}x" if x >= 0.95 else f"{x:.2f}x"


def num(x: float, digits: int = 2) -> str:
    return "-" if x != x else f"{x:,.{digits}f}"


def plot(results: list[Result], sub: dict[str, float], path: Path) -> None:
    plt = pyplot()
    panels: list[tuple[str, Callable[[Result], float]]] = [
        ("documents to all pairs (s)", lambda r: r.to_pairs_s),
        ("list all pairs (s)", lambda r: r.pairs_s),
        ("one query, p50 (ms)", lambda r: r.p50),
    ]
    fig, axes = plt.subplots(1, len(panels) + (1 if sub else 0), figsize=(4.2 * (len(panels) + 1), 4.6))

    def color(method: str) -> str:
        if method.startswith("datasketch"):
            return "#c25b1a" if "Redis" in method else "#e8842a"
        kinds = {"neardup": "#1f6fb4", "rensa": "#9ac36b", "pg_trgm": "#8c6bb1"}
        return kinds.get(method.split()[0], "#888888")

    def log_axis(ax: Any, values: list[float]) -> None:
        # Whole decades at both ends, so that every panel shows labelled ticks.
        ax.set_yscale("log")
        ax.set_ylim(10 ** np.floor(np.log10(min(values))), 10 ** np.ceil(np.log10(max(values) * 1.5)))
        ax.yaxis.set_major_formatter(plain)
        ax.yaxis.set_minor_formatter(ticker.NullFormatter())
        ax.grid(axis="y", alpha=0.3, which="both")

    short = [
        r.method.replace("RMinHashLSH ", "").replace("MinHashLSH ", "").replace("`", "") for r in results
    ]
    from matplotlib import ticker

    plain = ticker.FuncFormatter(lambda v, _: f"{v:g}")
    for ax, (title, value) in zip(axes, panels, strict=False):
        vals = [value(r) for r in results]
        keep = [i for i, v in enumerate(vals) if v == v and v > 0]
        bars = ax.bar(
            range(len(keep)), [vals[i] for i in keep], color=[color(results[i].method) for i in keep]
        )
        ax.bar_label(bars, [f"{vals[i]:.3g}" for i in keep], fontsize=8)
        ax.set_xticks(range(len(keep)), [short[i] for i in keep], rotation=35, ha="right", fontsize=8)
        log_axis(ax, [vals[i] for i in keep])
        ax.set_title(title, fontsize=10)
    if sub:
        ax = axes[-1]
        names = ["neardup", "pg_trgm"]
        vals = [sub["neardup"], sub["pg_trgm"]]
        bars = ax.bar(names, vals, color=[color(n) for n in names])
        ax.bar_label(bars, [f"{v:.3g}" for v in vals], fontsize=8)
        log_axis(ax, vals)
        ax.set_title(f"all pairs of the first {int(sub['docs']):,} docs (s)", fontsize=10)
    fig.suptitle(f"Same {results[0].docs:,} Debian documents, log scale, lower is better", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    ap = parser(__doc__)
    add_debian(ap, truth=True)
    ap.add_argument("--threshold", type=float, default=0.8)
    ap.add_argument("--queries", type=int, default=200)
    add_rounds(ap, 3, flag="--repeats")
    ap.add_argument("--trgm-threshold", default="auto", help="pg_trgm.similarity_threshold, or auto")
    ap.add_argument("--trgm-pairs-docs", type=int, default=2000)
    ap.add_argument("--no-redis", action="store_true", help="skip datasketch on Redis")
    ap.add_argument("--no-trgm", action="store_true", help="skip pg_trgm")
    add_db(ap)
    add_settle(ap, 300)
    add_out_dir(ap)
    args = ap.parse_args()
    t = args.threshold
    truth_path = truth_file(args)

    docs = list(read_jsonl(args.corpus, args.limit))
    rng = random.Random(1)
    sampled = rng.sample(docs, min(args.queries, len(docs)))
    chosen = set(sampled)
    others = [doc for doc in docs if doc not in chosen]
    queries = Queries(
        [edited(text, rng) for _, text in sampled],
        [edited(text, rng) for _, text in rng.sample(others, min(args.queries, len(others)))],
    )
    results: list[Result] = []
    report = Report()
    sub: dict[str, float] = {}
    trgm_notes: list[str] = []
    with contextlib.ExitStack() as stack:
        url, schema = stack.enter_context(database(args.db, "nd_speed", warm=TRUTH_CONFIG))
        print("neardup ...", file=sys.stderr)
        nd, index, settled = bench_neardup(url, schema, "speed", docs, t, queries, args.repeats)
        stack.callback(index.close)
        neardup_bands = index.params.bands
        results.append(nd)
        print("datasketch, memory ...", file=sys.stderr)
        results.append(bench_datasketch(docs, t, queries, args.repeats, None))
        if not args.no_redis:
            print("datasketch, Redis ...", file=sys.stderr)
            port = stack.enter_context(redis_server())
            storage = {"type": "redis", "redis": {"host": "127.0.0.1", "port": port}}
            results.append(bench_datasketch(docs, t, queries, args.repeats, storage))
        print("rensa ...", file=sys.stderr)
        bands = max(b for b in range(1, neardup_bands + 1) if NUM_PERM % b == 0)
        results.append(bench_rensa(docs, t, bands, queries, args.repeats))
        if not args.no_trgm:
            print("pg_trgm ...", file=sys.stderr)
            conn = stack.enter_context(psycopg.connect(libpq_url(url), autocommit=True))
            # In the bench schema, so that it goes with it (unless --db has it installed already).
            conn.execute(f"SET search_path = {schema}, public")
            conn.execute(f"CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA {schema}")
            trgm_version = conn.execute(
                "SELECT extversion FROM pg_extension WHERE extname = 'pg_trgm'"
            ).fetchone()
            if args.trgm_threshold == "auto":
                threshold, why = trgm_threshold(conn, truth_path, docs, t, random.Random(2))
            else:
                threshold = float(args.trgm_threshold)
                why = f"{threshold} (given by --trgm-threshold)"
            r, notes = bench_trgm(conn, docs, queries, threshold, why)
            results.append(r)
            trgm_notes.append(f"pg_trgm {trgm_version[0] if trgm_version else '?'}, {notes[0]}.")
            trgm_notes.append(notes[1] + ".")
        print("waiting for autovacuum after neardup's load ...", file=sys.stderr)
        settled_s = settled(args.settle)
        print(f"timing {len(queries.timed)} queries of each method, interleaved ...", file=sys.stderr)
        fns = [r.query for r in results if r.query is not None]
        for fn in fns:
            latencies_ms(fn, queries.warm[:20], warmup=0)
        for r, ms in zip(results, interleaved_latencies(fns, queries.timed), strict=True):
            r.query_ms = ms
        if not args.no_trgm:
            m = min(args.trgm_pairs_docs, len(docs))
            print(f"all pairs of the first {m:,} documents ...", file=sys.stderr)
            first = docs[:m]
            nd_sub, nd_sub_index, _ = bench_neardup(url, schema, "speed_sub", first, t, None, 1)
            nd_sub_index.close()
            load_s, join_s, trgm_pairs, how = bench_trgm_pairs(url, schema, first, threshold)
            sub = {
                "docs": m,
                "neardup": nd_sub.to_pairs_s,
                "pg_trgm": load_s + join_s,
                "nd_ingest": nd_sub.ingest_s,
                "nd_pairs_s": nd_sub.pairs_s,
                "nd_pairs": nd_sub.pairs,
                "trgm_load": load_s,
                "trgm_join": join_s,
                "trgm_pairs": trgm_pairs,
            }
            trgm_notes.append(f"The pg_trgm self-join (sequential scans off too) ran as {how}.")
        report.say(
            *header(
                "Speed: neardup, datasketch, rensa and pg_trgm on the same documents",
                url,
                args.db is not None,
                [
                    f"Corpus: `{args.corpus.name}`, {len(docs):,} documents"
                    + (f" (the first {args.limit:,})" if args.limit else "")
                    + ", read into memory before any timing",
                    f"Threshold {t}, {NUM_PERM} permutations, character 5-shingles of the ground "
                    "truth's normalisation (lowercase, collapsed whitespace) for every method; "
                    f"{len(queries.timed)} query texts (sampled documents with ~3% of words replaced), "
                    f"each method timed on them after answering {len(queries.warm)} others",
                ],
                level=2,
            )
        )

    base = results[0]
    report.say("## Same documents, same run", "")
    rows = []
    for r in results:
        runs = f" ({r.pairs_runs})" if r.pairs_runs not in (0, args.repeats) else ""
        rows.append(
            [
                r.method,
                num(r.ingest_s),
                f"{r.docs / r.ingest_s:,.0f}" if r.ingest_s == r.ingest_s else "-",
                num(r.pairs_s) + runs,
                f"{r.pairs:,}" if r.pairs_runs else "-",
                num(r.to_pairs_s),
                num(r.p50),
                num(r.p99),
                ratio(r.to_pairs_s, base.to_pairs_s),
                ratio(r.pairs_s, base.pairs_s),
                ratio(r.p50, base.p50),
            ]
        )
    report.table(
        [
            "method",
            "ingest s",
            "docs/s",
            "list all pairs s",
            "pairs",
            "docs to all pairs s",
            "query p50 ms",
            "query p99 ms",
            "docs to all pairs ×",
            "list pairs ×",
            "query p50 ×",
        ],
        "lrrrrrrrrrr",
        rows,
    )
    report.say(
        "Ratios are the method's time over neardup's (above 1: slower than neardup). "
        f"'list all pairs' is the median of {args.repeats} runs (fewer, in brackets, where the "
        "runs took over 60 s). neardup's ingest includes exact verification and durable commits, "
        "so its pairs are final; datasketch's and rensa's pairs and query results are LSH "
        "candidates, unverified and held in memory (or Redis), and their 'list all pairs' is "
        "every document queried against the index. pg_trgm's ingest is COPY plus the GIN index "
        "build; its all-pairs time on the whole corpus was not measured (see below).",
        "",
        *(f"- {r.method}: {r.note}" for r in results),
        *(f"- {n}" for n in trgm_notes),
        "",
        "Each method's first queries, on the warm-up texts (after 20 of them untimed), before the "
        "timed ones: "
        + "; ".join(
            f"{r.method} p50 {num(pct(r.first_query_ms, 50))} ms, p99 {num(pct(r.first_query_ms, 99))} ms"
            for r in results
            if r.first_query_ms
        )
        + ". neardup's, right after its bulk load, read the new bucket index's pages into "
        "PostgreSQL's buffers for the first time. The timed queries came after every method was "
        f"loaded, interleaved in blocks of {BLOCK} texts, "
        + (
            f"once autovacuum had vacuumed what neardup's load filled and no autovacuum worker was at "
            f"work ({settled_s:.0f} s after the load)."
            if settled_s is not None
            else f"though autovacuum had not finished its pass over neardup's load {args.settle:.0f} s "
            "after it (--settle)."
        ),
        "",
    )
    if sub:
        report.say(f"## All pairs of the first {int(sub['docs']):,} documents: neardup and pg_trgm", "")
        report.table(
            ["method", "load s", "pairs s", "total s", "pairs", "total ×"],
            "lrrrrr",
            [
                [
                    "neardup (ingest with verified pairs; list pairs)",
                    num(sub["nd_ingest"]),
                    num(sub["nd_pairs_s"]),
                    num(sub["neardup"]),
                    f"{int(sub['nd_pairs']):,}",
                    "1.0x",
                ],
                [
                    "pg_trgm (COPY + GIN index; self-join with `%`)",
                    num(sub["trgm_load"]),
                    num(sub["trgm_join"]),
                    num(sub["pg_trgm"]),
                    f"{int(sub['trgm_pairs']):,}",
                    ratio(sub["pg_trgm"], sub["neardup"]),
                ],
            ],
        )
        report.say(
            "Measured on this subsample only, nothing extrapolated. pg_trgm's pairs are those "
            "with trigram similarity over its threshold, a different measure than 5-shingle "
            "Jaccard, so the two pair counts differ.",
            "",
        )
    report.say("![speed, log scale](speed.png)")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    report.write(args.out_dir / "speed.md", section="against peers", title="Speed")
    plot(results, sub, args.out_dir / "speed.png")
    print(f"wrote {args.out_dir / 'speed.png'}", file=sys.stderr)


if __name__ == "__main__":
    main()
