"""What a cluster of near-copies costs the pairs table: bytes a pair and pairs stored a second.

Every verified pair is a row of the collection's pairs partition (content_a, content_b, exact
Jaccard, method) with its indexes, so a cluster of c near-copies at or above the threshold stores
about c^2/2 rows. For each ``--cluster`` size, N documents (``--n``) in clusters of that many
near-copies (as bench_memory.py makes them: a base text of 60 words, each copy with 2 replaced) go
into a fresh collection in-process (``Index.add``, the CLI's batch size) at threshold 0.8; the
report gives the pairs stored, the seconds, pairs a second, the partition's heap and index bytes
(``pg_relation_size``, ``pg_indexes_size`` after a VACUUM ANALYZE) and bytes a pair, and the same
extrapolated (linearly in pairs) to 100,000 and 1,000,000 documents in clusters of 10,000. It also
times the exact Jaccard of pairs of one cluster in memory (the cost a listing would pay per pair
if a cluster were stored as its members only, its pairs verified when read).

Its figures are a section of docs/benchmarks/memory.md.

    python bench/bench_pairs_table.py [--n 10000] [--cluster 500,1000] [--db URL] [--out FILE]
"""

from __future__ import annotations

import contextlib
import time

import numpy as np
import psycopg

from _common import Report, bench_schema, header, server
from _options import add_db, add_out, numbers, parser
from bench_memory import THRESHOLD, cluster_texts
from neardup.config import DEFAULT_BATCH_SIZE
from neardup.core.params import Params
from neardup.core.sketch import Sketcher
from neardup.core.verify import exact_jaccard
from neardup.index import Index
from neardup.stages import StageClock
from neardup.storage.connect import libpq_url


def table_bytes(url: str, schema: str, collection_id: int) -> tuple[int, int, int]:
    """(rows, heap bytes, index bytes) of the collection's pairs partition, vacuumed first."""
    name = f'"{schema}"."pairs_c{collection_id}"'
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute(f"VACUUM ANALYZE {name}")
        rows = conn.execute(f"SELECT count(*) FROM {name}").fetchone()
        sizes = conn.execute(f"SELECT pg_relation_size('{name}'), pg_indexes_size('{name}')").fetchone()
    assert rows is not None
    assert sizes is not None
    return int(rows[0]), int(sizes[0]), int(sizes[1])


def exact_rate(size: int, pairs: int = 2_000_000) -> float:
    """Exact Jaccards a second of random pairs of one cluster of ``size`` near-copies, in memory
    (shingle sets made once, as a read that verifies a cluster's pairs would hold them)."""
    texts = list(cluster_texts(size, size))
    sets = Sketcher(Params(bands=16, rows=8)).shingles(texts, unique=True)
    rng = np.random.default_rng(1)
    left, right = rng.integers(0, size, pairs), rng.integers(0, size, pairs)
    exact_jaccard(sets, left[:1000], right[:1000])  # the kernel loaded before the clock starts
    start = time.perf_counter()
    exact_jaccard(sets, left, right)
    return pairs / (time.perf_counter() - start)


def centre_bounds(size: int, sample: int = 200) -> tuple[float, float, float, float]:
    """For one cluster of ``size`` near-copies and its medoid c (highest mean Jaccard to ``sample``
    members): the median distance d = 1 - J of a member to c, the share of pairs at or above the
    threshold, the share that d(x, c) + d(y, c) <= 1 - t proves to be (the triangle inequality of
    the Jaccard distance), and the share of pairs |d(x, c) - d(y, c)| > 1 - t proves not to be."""
    texts = list(cluster_texts(size, size))
    sets = Sketcher(Params(bands=16, rows=8)).shingles(texts, unique=True)
    picked = np.random.default_rng(0).choice(size, sample, replace=False)
    means = [exact_jaccard(sets, np.full(sample, c), picked).mean() for c in range(size)]
    centre = int(np.argmax(means))
    d = 1 - exact_jaccard(sets, np.full(size, centre), np.arange(size))
    left, right = np.triu_indices(size, 1)
    pair = exact_jaccard(sets, left.astype(np.int64), right.astype(np.int64)) >= THRESHOLD
    slack = 1 - THRESHOLD
    proved = (d[left] + d[right] <= slack).mean()
    ruled_out = (np.abs(d[left] - d[right]) > slack).mean()
    return float(np.median(np.delete(d, centre))), float(pair.mean()), float(proved), float(ruled_out)


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--n", type=int, default=10_000, help="documents a case (default 10000)")
    ap.add_argument("--cluster", type=numbers, default=[500, 1_000], help="cluster sizes (default 500,1000)")
    add_db(ap)
    ap.add_argument("--centre-only", action="store_true", help="only the in-memory figures, no database")
    add_out(ap, None)
    args = ap.parse_args()
    report = Report()
    rows = []
    if args.centre_only:
        args.cluster = []
    with contextlib.ExitStack() as stack:
        url = None if args.centre_only else stack.enter_context(server(args.db))
        report.say(*header("Pairs table of clusters of near-copies", url, args.db is not None))
        for size in args.cluster:
            assert url is not None
            schema = stack.enter_context(bench_schema(url, f"nd_bench_pairs_{size}"))
            index = stack.enter_context(
                Index.create(url, schema=schema, name=f"c{size}", threshold=THRESHOLD)
            )
            clock = StageClock()
            start = time.perf_counter()
            index.add(((f"d{i}", t) for i, t in enumerate(cluster_texts(args.n, size))), clock=clock)
            seconds = time.perf_counter() - start
            count, heap, indexes = table_bytes(url, schema, index._scope.collection_id)
            clusters = -(-args.n // size)
            possible = clusters * size * (size - 1) // 2
            copy = clock.seconds.get("pairs: binary COPY", 0.0) + clock.seconds.get("merge clusters", 0.0)
            rows.append((size, seconds, count, possible, heap, indexes, copy))
            print(f"clusters of {size}: {count:,} pairs in {seconds:.1f} s", flush=True)
    rate = exact_rate(2_000)
    median_d, share, proved, ruled_out = centre_bounds(2_000)
    report.say(
        f"N = {args.n:,} documents a case, by `Index.add` (batch size {DEFAULT_BATCH_SIZE:,}), threshold "
        f"{THRESHOLD}. Pairs at or above it: what was stored, against all pairs within clusters.",
        "",
    )
    report.table(
        [
            "cluster",
            "seconds",
            "pairs",
            "of all in-cluster",
            "pairs/s",
            "COPY + merge s",
            "heap MiB",
            "indexes MiB",
            "bytes/pair",
        ],
        "rrrrrrrrr",
        [
            (
                f"{size:,}",
                f"{s:.1f}",
                f"{c:,}",
                f"{c / p:.1%}",
                f"{c / s:,.0f}",
                f"{cp:.1f}",
                f"{h / 2**20:,.0f}",
                f"{i / 2**20:,.0f}",
                f"{(h + i) / max(c, 1):.1f}",
            )
            for size, s, c, p, h, i, cp in rows
        ],
    )
    for size, s, c, p, h, i, _ in rows:
        per_pair, per_s, share = (h + i) / max(c, 1), c / s, c / p
        for n in (100_000, 1_000_000):
            pairs = share * (n // 10_000) * 10_000 * 9_999 / 2
            report.say(
                f"- From clusters of {size:,}: {n:,} documents in clusters of 10,000 would store "
                f"{pairs:.2g} pairs, {pairs * per_pair / 2**30:,.0f} GiB, in {pairs / per_s / 3600:,.1f} h."
            )
    report.say(
        "",
        f"Exact Jaccard in memory, pairs of one cluster of 2,000 near-copies: {rate:,.0f} a second "
        "(one thread).",
        "",
        f"One cluster of 2,000 near-copies and its medoid c: median distance to c {median_d:.3f}; pairs "
        f"at or above {THRESHOLD}: {share:.1%}; proved so by d(x, c) + d(y, c) <= {1 - THRESHOLD:.1f}: "
        f"{proved:.2%}; proved not so by |d(x, c) - d(y, c)| > {1 - THRESHOLD:.1f}: {ruled_out:.2%}.",
    )
    if args.out is not None:
        report.write(args.out)


if __name__ == "__main__":
    main()
