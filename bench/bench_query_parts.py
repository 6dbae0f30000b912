"""Where a query's time goes at one threshold, the old default banding beside the new one.

    python bench/bench_query_parts.py [CORPUS] [--thresholds 0.5,0.9] [--covering] [--queries 200]
                                      [--rounds 3] [--db URL]

At each threshold, for each banding (``old`` and ``new`` of bench_threshold.py), it builds the
corpus as neardup builds it, and with ``--covering`` a second time with the bucket partition's
lookup index replaced by a covering one, ``(bucket) INCLUDE (band, content_id)``, which lets the
band lookup read the index alone. Every partition is vacuumed and analysed, then a CHECKPOINT.
Builds are made once and timed in rounds, taking turns query by query (rebuilding between rounds,
as bench_threshold.py does, or timing each build in a pass of its own, moved a query's p50 by more
than the bandings do). Over the same corpus texts it times:

- ``query``: ``Index.query`` whole (sketch, lookup statement, verification), on neardup's builds;
- ``lookup``: the lookup statement alone (``storage.buckets.lookup``: bucket rows, signatures,
  one text and the ids of every candidate);
- ``signatures``: the same statement reading the candidates' signatures only;
- ``covering``: ``lookup``'s statement on the covering index (no band check against the heap).

It prints each figure's median over the rounds, the candidates a query reads (median and mean) and
the bytes a document of each build. The covering index is not what neardup builds: it is measured
here as a way to make each candidate cheaper.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import psycopg

import _options as options
from _common import DEBIAN, TRUTH_CONFIG, bench_schema, local_server, read_jsonl
from bench_threshold import VARIANTS
from neardup.core.sketch import Sketcher
from neardup.database import Database
from neardup.index import Index
from neardup.storage import buckets
from neardup.storage.binary import Int8s
from neardup.storage.connect import connect, libpq_url
from neardup.storage.scope import Scope

_CANDIDATES = (
    "SELECT DISTINCT b.content_id FROM {buckets_p} b WHERE b.bucket = ANY(%(keys)s::int8[]) "
    "AND b.band + 1 = ANY(array_positions(%(keys)s::int8[], b.bucket))"
)
SIGNATURES = (
    f"SELECT s.content_id, s.signature FROM ({_CANDIDATES} AND b.collection_id = %(c)s) c "
    "JOIN {signatures_p} s ON s.collection_id = %(c)s AND s.content_id = c.content_id"
)
COVERING = (
    "SELECT s.content_id, s.signature, (SELECT d.text FROM {documents_p} d WHERE d.collection_id = %(c)s "
    "AND d.content_id = s.content_id LIMIT 1), ARRAY(SELECT d.external_id FROM {documents_p} d "
    f"WHERE d.collection_id = %(c)s AND d.content_id = s.content_id) FROM ({_CANDIDATES}) c "
    "JOIN {signatures_p} s ON s.collection_id = %(c)s AND s.content_id = c.content_id"
)


def build(url: str, schema: str, name: str, banding: tuple[int, int, int], t: float, docs: list[Any]) -> int:
    """Add the corpus to a new collection ``name``; its collection id."""
    bands, rows, num_perm = banding
    with Index.create(
        url, name, t, schema=schema, bands=bands, rows=rows, num_perm=num_perm, **TRUTH_CONFIG
    ) as index:
        index.add(docs)
    with psycopg.connect(libpq_url(url)) as conn:
        row = conn.execute(
            f'SELECT collection_id FROM "{schema}".collections WHERE name = %s', (name,)
        ).fetchone()
    assert row is not None
    return int(row[0])


def settle(url: str, schema: str, collection_id: int, covering: bool) -> None:
    """Vacuum and analyse the collection's partitions; with ``covering``, swap its lookup index."""
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        if covering:
            conn.execute(f'DROP INDEX "{schema}".buckets_c{collection_id}_lookup')
            conn.execute(
                f'CREATE INDEX buckets_c{collection_id}_covering ON "{schema}".buckets_c{collection_id} '
                "(bucket) INCLUDE (band, content_id)"
            )
        for table in ("buckets", "signatures", "documents", "contents"):
            conn.execute(f'VACUUM ANALYZE "{schema}".{table}_c{collection_id}')
        conn.execute("CHECKPOINT")


def statement(scope: Scope, template: str) -> Callable[[Any], Any]:
    """A function running ``template`` (a lookup statement) for one query's band keys."""
    rendered = scope.sql_bytes(template)
    params = {"c": scope.collection_id}
    return lambda keys: (
        scope.binary_cursor().execute(rendered, {**params, "keys": Int8s(keys)}, prepare=True).fetchall()
    )


def lookup(scope: Scope, num_perm: int) -> Callable[[Any], Any]:
    """neardup's own lookup statement, texts and ids read, for one query's band keys."""
    return lambda keys: buckets.lookup(scope, keys, True, num_perm)


def main() -> None:
    ap = options.parser(__doc__)
    ap.add_argument("corpus", nargs="?", type=Path, default=DEBIAN, help="JSONL(.gz) of {id, text}")
    ap.add_argument("--thresholds", default="0.5", help="comma-separated, each measured in turn")
    ap.add_argument("--covering", action="store_true", help="also build and time the covering index")
    ap.add_argument("--queries", type=int, default=200, help="corpus texts timed per figure")
    ap.add_argument("--rounds", type=int, default=3, help="rounds, builds alternated")
    options.add_db(ap)
    args = ap.parse_args()
    docs = list(read_jsonl(args.corpus, None))
    queries = [text for _, text in random.Random(1).sample(docs, min(args.queries, len(docs)))]
    server = local_server() if args.db is None else nullcontext(args.db)
    with server as url, bench_schema(url, "qparts") as schema:
        for t in (float(v) for v in args.thresholds.split(",")):
            builds = {}
            for variant in ("old", "new"):
                banding = VARIANTS[variant](t)
                for covering in (False, True) if args.covering else (False,):
                    name = f"{variant}_{'covering' if covering else 'plain'}"
                    collection_id = build(url, schema, name, banding, t, docs)
                    settle(url, schema, collection_id, covering)
                    index = Index.open(url, name, schema=schema)
                    builds[name] = (index, collection_id, covering)
                    size = index.stats().bytes_on_disk / len(docs)
                    print(
                        f"t = {t}, {name} ({banding[0]}x{banding[1]}): {size:,.0f} bytes a document",
                        flush=True,
                    )
            figures, counts = measure(url, schema, builds, queries, args.rounds)
            report(t, args.rounds, len(queries), figures, counts)
            for name, (index, _, _) in builds.items():
                index.close()
                Database(url, schema).drop(name)


Build = tuple[Index, int, bool]
Figures = dict[tuple[str, str], list[float]]


def measure(
    url: str, schema: str, builds: dict[str, Build], queries: list[str], rounds: int
) -> tuple[Figures, dict[str, list[int]]]:
    """Each build's parts timed over the queries in rounds: the builds take turns query by query
    (this machine's speed drifts by half within a minute, which separate passes took for a
    difference between the builds); and the candidates each query reads."""
    conn = connect(url)
    parts: dict[str, dict[str, tuple[Callable[[Any], Any], list[Any]]]] = {}
    counts: dict[str, list[int]] = {}
    for name, (index, collection_id, covering) in builds.items():
        scope = Scope(conn, schema, collection_id)
        sketcher = Sketcher(index.params)
        keys = [sketcher.band_keys(sketcher.signatures([q]))[0] for q in queries]
        # The whole query of a covering build would run today's statement, which checks the
        # collection in the heap: only the statement that reads the index alone is timed.
        parts[name] = (
            {"covering": (statement(scope, COVERING), keys)}
            if covering
            else {
                "query": (index.query, queries),
                "lookup": (lookup(scope, index.params.num_perm), keys),
                "signatures": (statement(scope, SIGNATURES), keys),
            }
        )
        counts[name] = [len(statement(scope, SIGNATURES)(k)) for k in keys]
        conn.rollback()
    figures: Figures = {}
    for _ in range(rounds):
        for part in ("query", "lookup", "signatures", "covering"):
            taking = [name for name in builds if part in parts[name]]
            times: dict[str, list[float]] = {name: [] for name in taking}
            for i in range(len(queries)):
                for name in taking if i % 2 == 0 else taking[::-1]:
                    fn, items = parts[name][part]
                    t0 = time.perf_counter()
                    fn(items[i])
                    times[name].append(1000 * (time.perf_counter() - t0))
            for name in taking:
                # The first calls warm each statement up (a prepared plan, the cursor's loaders).
                figures.setdefault((name, part), []).append(statistics.median(times[name][20:]))
            conn.rollback()
    conn.close()
    return figures, counts


def report(t: float, rounds: int, n: int, figures: Figures, counts: dict[str, list[int]]) -> None:
    print(f"\nthreshold {t}, {n} corpus texts, medians of {rounds} rounds (ms):")
    for (name, part), values in figures.items():
        each = ", ".join(f"{v:.3f}" for v in values)
        print(f"  {name:13} {part:10} {statistics.median(values):.3f}  ({each})")
    for name, c in counts.items():
        middle, mean = statistics.median(c), statistics.mean(c)
        print(f"  {name:13} candidates a query: median {middle:.0f}, mean {mean:.1f}")
    med = {k: statistics.median(v) for k, v in figures.items()}
    print("new / old, the median of the rounds' ratios (each round's):")
    for build_, part in (
        ("plain", "query"),
        ("plain", "lookup"),
        ("plain", "signatures"),
        ("covering", "covering"),
    ):
        if (f"new_{build_}", part) in med:
            pairs = zip(figures[(f"new_{build_}", part)], figures[(f"old_{build_}", part)], strict=True)
            ratios = [a / b for a, b in pairs]
            each = ", ".join(f"{r:.2f}" for r in ratios)
            print(f"  {part:10} {statistics.median(ratios):.2f}x  ({each})")
    for variant in ("old", "new") if ("new_covering", "covering") in med else ():
        whole = med[(f"{variant}_plain", "query")] - med[(f"{variant}_plain", "lookup")]
        whole += med[(f"{variant}_covering", "covering")]
        print(
            f"  {variant} query with the covering statement (its query less its lookup, plus the "
            f"covering statement): {whole:.3f} ms, {whole / med[('old_plain', 'query')]:.2f}x old's query"
        )
    print(flush=True)


if __name__ == "__main__":
    main()
