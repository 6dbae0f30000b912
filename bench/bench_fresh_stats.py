"""`stats` right after an `add`: the views' plans with and without the partitioned tables' statistics.

    python bench/bench_fresh_stats.py [CORPUS] [--limit N] [--tries 6] [--threshold 0.5]
                                      [--temp-file-limit 3GB]

Each try starts a fresh durable local server (autovacuum on, as a user's would be), adds the corpus
to a new collection at the threshold, and calls ``Index.stats()`` at once, twice: as neardup leaves
the schema (an add analyzes the partitioned tables once, ``storage.statistics.
keep_parent_statistics``), then with those statistics deleted (the schema as the code before left
it: autovacuum never analyzes a partitioned table). Before each call it records the planner's
estimate of the collection's ``pair_list`` rows; the true count is taken once, with the
statistics there. The server's
``temp_file_limit`` stops a statement that would spill without bound (without it such a plan ran
until the disk was full); a call it stops is reported as failed.
"""

from __future__ import annotations

import time

import psycopg

from _common import TRUTH_CONFIG, database, read_jsonl
from _options import add_debian, parser
from neardup.errors import NeardupError
from neardup.index import Index
from neardup.storage.connect import libpq_url

_PARENTS = ("documents", "contents", "signatures", "pairs")


def _pair_list(conn: psycopg.Connection[tuple[object, ...]], schema: str) -> str:
    found = conn.execute(f'SELECT collection_id FROM "{schema}".collections').fetchone()
    assert found is not None
    return f'SELECT * FROM "{schema}".pair_list WHERE collection_id = {int(str(found[0]))}'


def estimate(url: str, schema: str) -> float:
    """The planner's rows for the collection's pair_list (the one collection)."""
    with psycopg.connect(libpq_url(url)) as conn:
        plan = conn.execute(f"EXPLAIN (FORMAT JSON) {_pair_list(conn, schema)}").fetchone()
    assert plan is not None
    return float(plan[0][0]["Plan"]["Plan Rows"])


def true_count(url: str, schema: str) -> int:
    """The collection's pair_list rows (counted while the statistics are there)."""
    with psycopg.connect(libpq_url(url)) as conn:
        row = conn.execute(f"SELECT count(*) FROM ({_pair_list(conn, schema)}) q").fetchone()
    assert row is not None
    return int(str(row[0]))


def forget_parents(url: str, schema: str) -> None:
    """Delete the partitioned tables' own statistics, as if no add had taken them."""
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute(
            "DELETE FROM pg_statistic WHERE stainherit AND starelid = ANY(%s::regclass[])",
            [[f'"{schema}".{table}' for table in _PARENTS]],
        )


def timed_stats(index: Index) -> str:
    t0 = time.perf_counter()
    try:
        index.stats()
    except NeardupError as exc:
        return f"failed after {time.perf_counter() - t0:.1f} s: {str(exc)[:100]}"
    return f"ok, {time.perf_counter() - t0:.1f} s"


def main() -> None:
    ap = parser(__doc__)
    add_debian(ap)
    ap.add_argument("--tries", type=int, default=6)
    ap.add_argument("--threshold", type=float, default=0.5)
    ap.add_argument("--temp-file-limit", default="3GB")
    args = ap.parse_args()
    docs = list(read_jsonl(args.corpus, args.limit))
    for attempt in range(1, args.tries + 1):
        with database(None, "fresh") as (url, schema):
            with psycopg.connect(libpq_url(url), autocommit=True) as conn:
                conn.execute(f"ALTER SYSTEM SET temp_file_limit = '{args.temp_file_limit}'")
                conn.execute("SELECT pg_reload_conf()")
            with Index.create(url, "fresh", args.threshold, schema=schema, **TRUTH_CONFIG) as index:
                index.add(docs)
                rows = estimate(url, schema)
                kept = timed_stats(index)
                true = true_count(url, schema)
                forget_parents(url, schema)
                rows_without = estimate(url, schema)
                without = timed_stats(index)
        print(
            f"try {attempt}: pair_list {true:,} rows; with the parents' statistics estimated {rows:,.0f}, "
            f"stats {kept}; without them estimated {rows_without:,.0f}, stats {without}",
            flush=True,
        )


if __name__ == "__main__":
    main()
