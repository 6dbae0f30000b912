"""Parquet in and pairs out against the same as JSONL, in the same run.

A make_corpus.py corpus (JSONL: an integer id and a text) is converted to Parquet (pyarrow's
defaults: snappy, row groups of 128 Mi rows' worth or less, here ``--row-group`` rows). Then, in
alternating rounds (JSONL first in odd rounds, Parquet first in even ones, so that a drift of the
machine's speed falls on both alike), each format:

- is read and checked as ``neardup add`` reads it (``read_inputs`` then ``checked``) with no
  database, in a process of its own: the reader's cost alone;
- is added by ``neardup add FILE`` to a fresh collection, and its pairs written by ``neardup pairs
  --out`` (``--format parquet`` for Parquet, ``--format jsonl`` for JSONL): each a process of its
  own, timed from outside, with its peak resident memory (``wait4``).

Medians over the rounds, and the ratio Parquet / JSONL of each round's pair.

    python bench/bench_arrow.py [--n 1000000] [--corpus /tmp/synth1m.jsonl] [--rounds 3]
                                [--db URL] [--out docs/benchmarks/arrow.md]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from functools import partial
from itertools import count
from pathlib import Path

import pyarrow as pa
import pyarrow.json as pajson
import pyarrow.parquet as pq

from _common import Report, alternated, database, header, measured, neardup_command, ratios, synthetic_corpus
from _options import add_db, add_out, add_rounds, add_synthetic, parser

FORMATS = ("jsonl", "parquet")
READ_ONLY = (
    "import sys, time\n"
    "from neardup.inputs import read_inputs\n"
    "from neardup.readers import checked\n"
    "t = time.perf_counter()\n"
    "n = sum(1 for _ in checked(read_inputs([sys.argv[1]])))\n"
    "print(n, time.perf_counter() - t)\n"
)


def to_parquet(jsonl: Path, parquet: Path, row_group: int) -> None:
    """The JSONL corpus as a Parquet file (id as int64, text as string), read a block at a time."""
    schema = pa.schema([("id", pa.int64()), ("text", pa.string())])
    reader = pajson.open_json(jsonl, parse_options=pajson.ParseOptions(explicit_schema=schema))
    with pq.ParquetWriter(parquet, schema) as out:
        pending: list[pa.RecordBatch] = []
        rows = 0
        for batch in reader:
            pending.append(batch)
            rows += batch.num_rows
            if rows >= row_group:
                out.write_table(pa.Table.from_batches(pending), row_group_size=row_group)
                pending, rows = [], 0
        if pending:
            out.write_table(pa.Table.from_batches(pending), row_group_size=row_group)


def _mib(n: float) -> str:
    return f"{n / (1 << 20):,.0f} MiB" if n >= 1 << 20 else f"{n / 1024:,.0f} KiB"


def main() -> None:
    ap = parser(__doc__)
    add_synthetic(ap, 1_000_000)
    add_rounds(ap, 3)
    ap.add_argument(
        "--row-group", type=int, default=131_072, help="rows a Parquet row group (default 131,072)"
    )
    ap.add_argument("--threshold", type=float, default=0.8)
    add_db(ap)
    add_out(ap, "arrow.md")
    args = ap.parse_args()

    with ExitStack() as stack:
        jsonl, made = stack.enter_context(synthetic_corpus(args.corpus, args.n))
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="nd-arrow-", dir="/var/tmp")))
        parquet = work / "corpus.parquet"
        t0 = time.perf_counter()
        to_parquet(jsonl, parquet, args.row_group)
        converted = time.perf_counter() - t0
        url, schema = stack.enter_context(database(args.db, "nd_arrow", warm={}))
        sizes = {"jsonl": jsonl.stat().st_size, "parquet": parquet.stat().st_size}
        groups = pq.ParquetFile(parquet).num_row_groups
        report = Report()
        report.say(
            *header(
                f"Parquet in and pairs out against JSONL, {args.n:,} documents",
                url,
                args.db is not None,
                [
                    f"Corpus: {made}; as JSONL {_mib(sizes['jsonl'])}, as Parquet {_mib(sizes['parquet'])} "
                    f"(snappy, {groups} row groups of up to {args.row_group:,} rows; "
                    f"converted in {converted:.1f} s)",
                    f"pyarrow {pa.__version__}; threshold {args.threshold}; {args.rounds} alternating rounds",
                ],
            )
        )
        neardup = neardup_command(url, schema)
        pairs_found: dict[str, int] = {}
        pairs_bytes: dict[str, int] = {}
        numbered = count(1)

        def one(fmt: str) -> dict[str, float]:
            """One format read and checked, added and its pairs written: seconds and peak memory."""
            source = jsonl if fmt == "jsonl" else parquet
            got: dict[str, float] = {}
            got["read"], got["read_rss"], _ = measured([sys.executable, "-c", READ_ONLY, str(source)])
            collection = f"{fmt}-{next(numbered)}"
            c = [*neardup, "--collection", collection]
            measured([*c, "init", "--threshold", str(args.threshold)])
            got["add"], got["add_rss"], message = measured([*c, "add", str(source)])
            out = work / f"pairs-{fmt}.{fmt}"
            got["pairs"], _, _ = measured([*c, "pairs", "--format", fmt, "--out", str(out)])
            got["total"] = got["add"] + got["pairs"]
            pairs_found[fmt] = (
                pq.ParquetFile(out).metadata.num_rows if fmt == "parquet" else sum(1 for _ in out.open())
            )
            pairs_bytes[fmt] = out.stat().st_size
            measured([*c, "drop", collection, "--yes"])
            print(f"{collection}: {message.strip()}", file=sys.stderr)
            return got

        # JSONL first in odd rounds, Parquet first in even ones.
        runs = alternated({fmt: partial(one, fmt) for fmt in FORMATS}, args.rounds, flip=True)
        results = {fmt: {key: [r[key] for r in runs[fmt]] for key in runs[fmt][0]} for fmt in FORMATS}
        if pairs_found["jsonl"] != pairs_found["parquet"]:
            raise SystemExit(f"the two formats found different pairs: {pairs_found}")

        def med(fmt: str, key: str) -> float:
            return statistics.median(results[fmt][key])

        def ratio(key: str) -> str:
            return f"{statistics.median(ratios(results['parquet'][key], results['jsonl'][key])):.2f}"

        report.say(
            f"**{args.n:,} documents in and their {pairs_found['parquet']:,} pairs out: Parquet "
            f"{med('parquet', 'total'):.1f} s, JSONL {med('jsonl', 'total'):.1f} s** (medians of "
            f"{args.rounds} rounds; Parquet / JSONL {ratio('total')}: the median of each round's own ratio, "
            "which a drift of the machine's speed between rounds moves less than the medians). "
            f"Reading and checking alone: Parquet {med('parquet', 'read'):.1f} s, JSONL "
            f"{med('jsonl', 'read'):.1f} s ({ratio('read')}).",
            "",
        )
        report.table(
            ["stage", "JSONL, median s", "Parquet, median s", "Parquet / JSONL"],
            "lrrr",
            [
                [
                    "read and check (no database)",
                    f"{med('jsonl', 'read'):.2f}",
                    f"{med('parquet', 'read'):.2f}",
                    ratio("read"),
                ],
                [
                    "`neardup add FILE`",
                    f"{med('jsonl', 'add'):.2f}",
                    f"{med('parquet', 'add'):.2f}",
                    ratio("add"),
                ],
                [
                    "`neardup pairs --out`",
                    f"{med('jsonl', 'pairs'):.2f}",
                    f"{med('parquet', 'pairs'):.2f}",
                    ratio("pairs"),
                ],
                [
                    "in and out",
                    f"{med('jsonl', 'total'):.2f}",
                    f"{med('parquet', 'total'):.2f}",
                    ratio("total"),
                ],
            ],
        )
        report.table(
            ["peak resident memory", "JSONL, median", "Parquet, median"],
            "lrr",
            [
                [
                    "read and check (no database)",
                    _mib(med("jsonl", "read_rss")),
                    _mib(med("parquet", "read_rss")),
                ],
                ["`neardup add FILE`", _mib(med("jsonl", "add_rss")), _mib(med("parquet", "add_rss"))],
            ],
        )
        report.say(
            "Each figure is one process timed from outside, start-up included. `pairs` writes "
            "`--format jsonl` in the JSONL rounds and `--format parquet` in the Parquet ones (the pairs "
            f"file: {_mib(pairs_bytes['jsonl'])} as JSONL, {_mib(pairs_bytes['parquet'])} as Parquet).",
        )
        report.say(
            "",
            "Rounds (seconds: read, add, pairs):",
            "",
            *(
                f"- round {r + 1}: "
                + "; ".join(
                    f"{name} " + ", ".join(f"{results[fmt][key][r]:.2f}" for key in ("read", "add", "pairs"))
                    for fmt, name in (("jsonl", "JSONL"), ("parquet", "Parquet"))
                )
                for r in range(args.rounds)
            ),
        )
        report.write(args.out)


if __name__ == "__main__":
    main()
