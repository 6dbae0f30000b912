"""What the changes feed costs the writes that feed it: the same writes with the feed and without.

On the Debian descriptions (real near-duplicates: many pairs per batch) each round writes a fresh
collection through four phases: a bulk ingest of the first part into the empty collection (batches
of 50,000), daily batches of the rest (5,000 a transaction), replacements (stored ids re-added
with about 3% of their words changed, 2,000 a transaction) and removals (2,000 ids in one call).
Rounds alternate a collection without the feed and one with it (off, on, off, on, ...), so both
see the same drift of the machine; the report gives each phase's median seconds and the median of
the on/off ratios of paired rounds, with the changes recorded and their bytes.

    python bench/bench_changes.py [--rounds 3] [--limit N] [--db URL] [--out docs/benchmarks/changes.md]

``--only on`` (or ``off``) runs one round of that kind and writes nothing: for timing the whole
process from outside.
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from collections.abc import Callable
from itertools import count

from _common import Report, alternated, database, edited, header, ratios, read_jsonl
from _options import add_db, add_debian, add_out, add_rounds, parser
from neardup.database import Database
from neardup.index import Index

PHASES = ("bulk ingest", "daily batches", "replacements", "removals")
DAILY_BATCH, REPLACED, REMOVED = 5_000, 4_000, 2_000


def _round(url: str, schema: str, docs: list[tuple[str, str]], feed: bool, n: int) -> dict[str, float]:
    """One collection through the four phases; seconds of each, and the changes it recorded."""
    rng = random.Random(1)
    split = len(docs) * 4 // 5
    name = f"r{n}-{'on' if feed else 'off'}"
    out: dict[str, float] = {}
    with Index.create(url, name, schema=schema, changes_feed=feed or None) as index:
        steps: list[tuple[str, Callable[[], object]]] = [
            ("bulk ingest", lambda: index.add(docs[:split])),
            ("daily batches", lambda: index.add(docs[split:], batch_size=DAILY_BATCH)),
            (
                "replacements",
                lambda: index.add(
                    [(i, edited(t, rng)) for i, t in rng.sample(docs, REPLACED)], batch_size=REPLACED // 2
                ),
            ),
            ("removals", lambda: index.remove(i for i, _ in rng.sample(docs, REMOVED))),
        ]
        for phase, step in steps:
            t0 = time.perf_counter()
            step()
            out[phase] = time.perf_counter() - t0
        if feed:
            with Database(url, schema) as db:
                out["changes"] = _count(db, name)
            out["bytes"] = index.stats().bytes_by_table["changes"][0]
        out["documents"] = index.stats().documents
    with Database(url, schema) as db:
        db.drop(name)
    print(f"{name}: {sum(out[p] for p in PHASES):.1f} s", file=sys.stderr)
    return out


def _count(db: Database, name: str) -> int:
    """How many changes the collection keeps."""
    since, count = 0, 0
    while page := db.changes(name, since, limit=10_000).changes:
        count += len(page)
        since = page[-1].seq
    return count


def main() -> None:
    """Alternate rounds without and with the feed, and write the report."""
    ap = parser(__doc__)
    add_rounds(ap, 3)
    add_debian(ap, flag="--corpus")
    add_db(ap)
    ap.add_argument("--only", choices=("on", "off"), help="one round of that kind, no report")
    add_out(ap, "changes.md")
    args = ap.parse_args()
    docs = list(dict(read_jsonl(args.corpus, args.limit)).items())
    with database(args.db, "nd_changes", warm=None if args.only else {}) as (url, schema):
        numbered = count()
        if args.only:
            _round(url, schema, docs, args.only == "on", next(numbered))
            return

        def way(feed: bool) -> Callable[[], dict[str, float]]:
            return lambda: _round(url, schema, docs, feed, next(numbered))

        runs = alternated({False: way(False), True: way(True)}, args.rounds)
        report = Report()
        report.say(
            *header(
                "The changes feed: what it costs the writes that feed it",
                url,
                args.db is not None,
                [
                    f"Corpus: `{args.corpus.name}`, {len(docs):,} documents; "
                    f"{args.rounds} rounds of each, alternated"
                ],
            )
        )
        rows = []
        for phase in PHASES:
            off = [r[phase] for r in runs[False]]
            on = [r[phase] for r in runs[True]]
            each = ratios(on, off)
            rows.append(
                [
                    phase,
                    f"{statistics.median(off):.2f}",
                    f"{statistics.median(on):.2f}",
                    f"{statistics.median(each):.3f} ({min(each):.3f}-{max(each):.3f})",
                ]
            )
        report.say("Seconds of each phase (median of the rounds) and the on/off ratio of paired rounds:", "")
        report.table(["phase", "without the feed", "with the feed", "on / off (min-max)"], "lrrr", rows)
        last = runs[True][-1]
        report.say(
            f"With the feed the collection recorded {int(last['changes']):,} changes "
            f"({last['changes'] / len(docs):.2f} per document written in the bulk and daily phases' "
            f"{len(docs):,}, plus the replacements' and removals'), {last['bytes'] / last['changes']:.0f} "
            f"bytes a change, {last['bytes'] / last['documents']:.0f} bytes per stored document "
            "(rows only; the primary key adds its index). Without the feed nothing is written: the "
            "writer tests a flag of the row it locks anyway."
        )
        report.write(args.out)


if __name__ == "__main__":
    main()
