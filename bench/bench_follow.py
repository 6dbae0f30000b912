"""What following a table costs: the table's writers, the queue's bytes, and the follower's pace.

The same writes go to a table that is not followed and to one that is (``neardup follow
--install``'s triggers), in alternating rounds, each on a fresh table: ``--rows`` single-row
INSERT statements in transactions of 100, then one UPDATE of every row, then one DELETE of every
row. Each step's median and the median of the per-round ratios are reported. Then, same run: the
queue's bytes a queued change, and the follower draining ``--rows`` queued inserts into a new
collection, against ``Index.add`` of the same rows into another.

    python bench/bench_follow.py --db URL [--rows 20000] [--rounds 5] [--out docs/benchmarks/follow.md]
"""

from __future__ import annotations

import contextlib
import functools
import random
import statistics
from collections.abc import Iterator

import psycopg
from psycopg import sql

from _common import Report, alternated, database, drop_schema, header, ratios, timed
from _options import add_db, add_out, add_rounds, parser
from neardup import follower as follow
from neardup.index import Index
from neardup.storage.connect import libpq_url

WORDS = [f"w{i}" for i in range(2000)]


def _texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(60)) for _ in range(n)]


def _table(conn: psycopg.Connection, schema: str) -> sql.Identifier:
    t = sql.Identifier(schema, "articles")
    conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(t))
    conn.execute(sql.SQL("CREATE TABLE {} (id text PRIMARY KEY, body text)").format(t))
    return t


def _writes(conn: psycopg.Connection, t: sql.Identifier, texts: list[str]) -> dict[str, float]:
    """Seconds of each step of the writes."""
    insert = sql.SQL("INSERT INTO {} VALUES (%s, %s)").format(t)
    rows = [(f"d{i}", text) for i, text in enumerate(texts)]

    def inserts() -> None:
        for start in range(0, len(rows), 100):
            with conn.transaction(), conn.cursor() as cur:
                for row in rows[start : start + 100]:
                    cur.execute(insert, row)

    seconds = {"insert": timed(inserts)[0]}
    seconds["update"] = timed(lambda: conn.execute(sql.SQL("UPDATE {} SET body = body || ' x'").format(t)))[0]
    seconds["delete"] = timed(lambda: conn.execute(sql.SQL("DELETE FROM {}").format(t)))[0]
    return seconds


@contextlib.contextmanager
def _scratch(url: str, name: str) -> Iterator[str]:
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
    try:
        yield name
    finally:
        drop_schema(url, name)


def main() -> None:
    ap = parser(__doc__)
    add_db(ap)
    ap.add_argument("--rows", type=int, default=20_000)
    add_rounds(ap, 5)
    add_out(ap, "follow.md")
    args = ap.parse_args()
    with contextlib.ExitStack() as stack:
        url, schema = stack.enter_context(database(args.db, "bench_follow"))
        app = stack.enter_context(_scratch(url, f"bench_follow_app_{schema.rsplit('_', 1)[1]}"))
        report = Report()
        report.say(*header("Following a table: what it costs", url, args.db is not None))
        _run(report, url, schema, app, args.rows, args.rounds)
        report.write(args.out)


def _run(report: Report, url: str, schema: str, app: str, rows: int, rounds: int) -> None:
    texts = _texts(rows, seed=1)
    source = follow.Source(url, f"{app}.articles", "id", "body", (), schema)
    steps = ("insert", "update", "delete")
    queue_bytes: list[float] = []
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:

        def writes(install: bool) -> dict[str, float]:
            t = _table(conn, app)
            if install:
                follow.install(source)
            seconds = _writes(conn, t, texts)
            if install:
                queued, size = _queue(conn, schema)
                queue_bytes.append(size / max(queued, 1))
                follow.uninstall(source)
            return seconds

        runs = alternated({"plain": lambda: writes(False), "followed": lambda: writes(True)}, rounds)
    plain = {s: [r[s] for r in runs["plain"]] for s in steps}
    followed = {s: [r[s] for r in runs["followed"]] for s in steps}
    report.say(
        f"{rows:,} rows of about {len(texts[0]):,} characters; {rounds} rounds, each writing the same rows "
        "to a table without triggers, then to one with them; seconds are medians, the ratio is the median "
        "of each round's followed / plain.",
        "",
    )
    table_rows = []
    for step in steps:
        what = {"insert": "single-row INSERTs, 100 a transaction", "update": "one UPDATE of every row"}
        table_rows.append(
            [
                what.get(step, "one DELETE of every row"),
                f"{statistics.median(plain[step]):.3f}",
                f"{statistics.median(followed[step]):.3f}",
                f"{statistics.median(ratios(followed[step], plain[step])):.2f}",
            ]
        )
    report.table(["writes", "plain (s)", "followed (s)", "followed / plain"], "lrrr", table_rows)
    report.say(
        f"The queue after a round (each row queued by its INSERT, UPDATE and DELETE): "
        f"{statistics.median(queue_bytes):.0f} bytes a queued change, its index included.",
        "",
    )
    _drain(report, url, schema, app, source, texts)


def _queue(conn: psycopg.Connection, schema: str) -> tuple[int, int]:
    row = conn.execute(
        sql.SQL("SELECT count(*), pg_total_relation_size({}) FROM {}.follow_queue").format(
            sql.Literal(f"{schema}.follow_queue"), sql.Identifier(schema)
        )
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def _drain(report: Report, url: str, schema: str, app: str, source: follow.Source, texts: list[str]) -> None:
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        t = _table(conn, app)
        with conn.cursor() as cur, conn.transaction():
            cur.executemany(
                sql.SQL("INSERT INTO {} VALUES (%s, %s)").format(t),
                [(f"d{i}", x) for i, x in enumerate(texts)],
            )
    results: list[list[object]] = []
    with Index.create(url, "added", schema=schema) as index:
        seconds, _ = timed(lambda: index.add((f"d{i}", x) for i, x in enumerate(texts)))
        results.append(["`Index.add` of the rows", f"{seconds:.2f}", f"{len(texts) / seconds:,.0f}"])
    for batch in (1_000, follow.DEFAULT_FOLLOW_BATCH):
        follow.install(source)  # the triggers, and every row queued
        with follow.Follower(source, url, f"followed-{batch}", schema=schema) as follower:
            seconds, applied = timed(functools.partial(follower.drain, batch))
        assert applied.added.added == len(texts)
        results.append(
            [f"`follow --once --batch-size {batch}`", f"{seconds:.2f}", f"{len(texts) / seconds:,.0f}"]
        )
    report.say(f"Indexing the {len(texts):,} rows into a new collection, same run:", "")
    report.table(["how", "seconds", "rows/s"], "lrr", results)
    follow.uninstall(source)


if __name__ == "__main__":
    main()
