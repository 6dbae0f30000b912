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

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path

import pyarrow as pa
import pyarrow.json as pajson
import pyarrow.parquet as pq

from _common import REPO, Report, bench_schema, header, local_server, warm_up
from bench_scaling import corpus_file, first_lines

FORMATS = ("jsonl", "parquet")
READ_ONLY = (
    "import sys, time\n"
    "from neardup.inputs import read_inputs\n"
    "from neardup.readers import checked\n"
    "t = time.perf_counter()\n"
    "n = sum(1 for _ in checked(read_inputs([sys.argv[1]])))\n"
    "print(n, time.perf_counter() - t)\n"
)


def run(argv: Sequence[str], stdout: int | None = subprocess.DEVNULL) -> tuple[float, int, str]:
    """(wall seconds, peak resident bytes, standard error) of one process, which must succeed."""
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    started = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        child = subprocess.Popen(argv, stdout=stdout, stderr=err, env=env)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
        err.seek(0)
        message = err.read().decode()
    if status != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({status}): {message}")
    return wall, usage.ru_maxrss * 1024, message


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
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1_000_000, help="documents (default 1,000,000)")
    ap.add_argument("--corpus", type=Path, help="a make_corpus.py JSONL file (default: made for the run)")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    ap.add_argument(
        "--row-group", type=int, default=131_072, help="rows a Parquet row group (default 131,072)"
    )
    ap.add_argument("--threshold", type=float, default=0.8)
    ap.add_argument("--db", help="PostgreSQL URL (default: a local durable server for the run)")
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "benchmarks" / "arrow.md")
    args = ap.parse_args()

    with ExitStack() as stack:
        corpus, made = stack.enter_context(corpus_file(args.corpus, args.n))
        jsonl = stack.enter_context(first_lines(corpus, args.n))
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="nd-arrow-", dir="/var/tmp")))
        parquet = work / "corpus.parquet"
        t0 = time.perf_counter()
        to_parquet(jsonl, parquet, args.row_group)
        converted = time.perf_counter() - t0
        url = args.db or stack.enter_context(local_server())
        schema = stack.enter_context(bench_schema(url, "nd_arrow"))
        warm_up(url, schema)
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
        neardup = [sys.executable, "-m", "neardup", "--db", url, "--schema", schema]
        results: dict[str, dict[str, list[float]]] = {
            f: {"read": [], "add": [], "pairs": [], "add_rss": [], "read_rss": []} for f in FORMATS
        }
        pairs_found: dict[str, int] = {}
        pairs_bytes: dict[str, int] = {}
        for r in range(args.rounds):
            order = FORMATS if r % 2 == 0 else FORMATS[::-1]
            for fmt in order:
                source = jsonl if fmt == "jsonl" else parquet
                wall, rss, _ = run([sys.executable, "-c", READ_ONLY, str(source)])
                results[fmt]["read"].append(wall)
                results[fmt]["read_rss"].append(rss)
                collection = f"{fmt}-{r}"
                c = [*neardup, "--collection", collection]
                run([*c, "init", "--threshold", str(args.threshold)])
                wall, rss, message = run([*c, "add", str(source)])
                results[fmt]["add"].append(wall)
                results[fmt]["add_rss"].append(rss)
                out = work / f"pairs-{fmt}.{fmt}"
                wall, _, _ = run([*c, "pairs", "--format", fmt, "--out", str(out)])
                results[fmt]["pairs"].append(wall)
                pairs_found[fmt] = (
                    pq.ParquetFile(out).metadata.num_rows if fmt == "parquet" else sum(1 for _ in out.open())
                )
                pairs_bytes[fmt] = out.stat().st_size
                run([*c, "drop", collection, "--yes"])
                print(f"round {r + 1} {fmt}: {message.strip()}", file=sys.stderr)
        if pairs_found["jsonl"] != pairs_found["parquet"]:
            raise SystemExit(f"the two formats found different pairs: {pairs_found}")

        def med(fmt: str, key: str) -> float:
            return statistics.median(results[fmt][key])

        def ratio(key: str) -> str:
            pairs = [p / j for p, j in zip(results["parquet"][key], results["jsonl"][key], strict=True)]
            return f"{statistics.median(pairs):.2f}"

        total = {
            f: [a + p for a, p in zip(results[f]["add"], results[f]["pairs"], strict=True)] for f in FORMATS
        }
        results["jsonl"]["total"], results["parquet"]["total"] = total["jsonl"], total["parquet"]
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
