"""One server against a Citus cluster on the same documents: ingest, all pairs, query and check.

The same corpus goes into a collection on one durable local PostgreSQL and into a distributed
collection on the Citus coordinator named by --citus (a schema of its own, made distributed with
--shards shards per table, dropped afterwards); for each: ingest (documents a second, with every
verified pair stored), listing all pairs, --queries edited copies of stored documents queried one
at a time (p50, p99), `Index.check` of as many (documents a second), and the bytes a document
takes on disk (on every node). The report names the cluster's worker nodes. Citus is in neither
PyPI nor Debian's archive: docs/distributed.md says how to get a cluster.

    python bench/bench_distributed.py --citus postgresql://postgres@127.0.0.1:9700/test
        [CORPUS] [--limit N] [--shards 4] [--queries 200] [--db URL] [--out docs/benchmarks/distributed.md]

Not yet measured here: writers in parallel (not built), and more workers than one machine holds
(the device tool's larger machine was not lent to this session).
"""

from __future__ import annotations

import argparse
import contextlib
import random
import sys
import time
from pathlib import Path
from typing import Any

import psycopg

from _common import (
    DEBIAN,
    REPO,
    Report,
    bench_schema,
    edited,
    header,
    latencies_ms,
    local_server,
    pct,
    read_jsonl,
)
from neardup.index import Index
from neardup.storage.connect import libpq_url


def workers(url: str) -> list[str]:
    """host:port of the cluster's active worker nodes."""
    with psycopg.connect(libpq_url(url)) as conn:
        rows = conn.execute(
            "SELECT node_name, node_port FROM citus_get_active_worker_nodes() ORDER BY 2"
        ).fetchall()
    return [f"{host}:{port}" for host, port in rows]


_SETTINGS = ("fsync", "synchronous_commit", "shared_buffers", "max_wal_size", "checkpoint_timeout")


def settings(url: str) -> str:
    """The settings that decide durability and caching on each node of the cluster, as shown."""
    with psycopg.connect(libpq_url(url)) as conn:
        coordinator = conn.execute(
            "SELECT string_agg(name || '=' || current_setting(name), ', ' ORDER BY name) "
            "FROM unnest(%s::text[]) AS name",
            (list(_SETTINGS),),
        ).fetchone()
        nodes = conn.execute(
            "SELECT nodeport, result FROM run_command_on_workers($$SELECT string_agg(name || '=' || "
            f"current_setting(name), ', ' ORDER BY name) FROM unnest(ARRAY{list(_SETTINGS)!r}) AS name$$) "
            "ORDER BY nodeport"
        ).fetchall()
    shown = [f"coordinator: {coordinator[0] if coordinator else '?'}"]
    return "; ".join(shown + [f"worker :{port}: {result}" for port, result in nodes])


def measure(
    url: str, schema: str, docs: list[tuple[str, str]], probes: list[str], **create: Any
) -> list[str]:
    """One row of the report: ingest, all pairs, query p50/p99, check rate, bytes a document."""
    with Index.create(url, "bench", threshold=0.8, schema=schema, **create) as index:
        start = time.perf_counter()
        index.add(docs)
        ingest = time.perf_counter() - start
        start = time.perf_counter()
        pairs = sum(1 for _ in index.pairs())
        listing = time.perf_counter() - start
        query_ms = latencies_ms(index.query, probes)
        start = time.perf_counter()
        found = sum(1 for r in index.check((f"probe-{i}", t) for i, t in enumerate(probes)) if r.matches)
        check = time.perf_counter() - start
        size = index.stats().bytes_on_disk
    print(f"  {create or 'one server'}: ingest {ingest:.1f} s, {pairs:,} pairs", file=sys.stderr)
    return [
        f"{len(docs) / ingest:,.0f}",
        f"{ingest:.2f}",
        f"{listing:.2f}",
        f"{pairs:,}",
        f"{pct(query_ms, 50):.2f} / {pct(query_ms, 99):.2f}",
        f"{len(probes) / check:,.0f} ({found:,} found)",
        f"{size / len(docs):,.0f}",
    ]


def main() -> None:
    """Run both deployments on the same documents and write the report."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus", nargs="?", type=Path, default=DEBIAN, help="JSONL(.gz) of id, text")
    ap.add_argument("--citus", required=True, help="URL of a Citus coordinator with worker nodes")
    ap.add_argument("--limit", type=int, help="use only the first N documents")
    ap.add_argument("--shards", type=int, default=4, help="shards per distributed table")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--db", help="PostgreSQL URL for the one-server run (default: a durable local server)")
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "benchmarks" / "distributed.md")
    args = ap.parse_args()
    docs = list(read_jsonl(args.corpus, args.limit))
    rng = random.Random(1)
    probes = [edited(text, rng) for _, text in rng.sample(docs, min(args.queries, len(docs)))]
    nodes = workers(args.citus)
    rows = []
    with contextlib.ExitStack() as stack:
        url = args.db or stack.enter_context(local_server())
        schema = stack.enter_context(bench_schema(url, "nd_one"))
        rows.append(["one server", *measure(url, schema, docs, probes)])
        citus_schema = stack.enter_context(bench_schema(args.citus, "nd_citus"))
        rows.append(
            [
                f"Citus, {len(nodes)} workers, {args.shards} shards a table",
                *measure(args.citus, citus_schema, docs, probes, distributed=True, shards=args.shards),
            ]
        )
        report = Report()
        report.say(
            *header(
                "One server and a Citus cluster on the same documents",
                url,
                args.db is not None,
                [
                    f"Corpus: `{args.corpus.name}`, {len(docs):,} documents; threshold 0.8; "
                    f"{len(probes):,} queries and checks of edited copies of stored documents",
                    f"Citus coordinator: `{args.citus}`, workers {', '.join(nodes) or 'none'} "
                    "(all on this machine unless they say otherwise)",
                    f"Citus settings: {settings(args.citus)}",
                ],
            )
        )
        report.table(
            [
                "deployment",
                "ingest docs/s",
                "ingest s",
                "list all pairs s",
                "pairs",
                "query p50 / p99 ms",
                "check docs/s",
                "bytes a document",
            ],
            "lrrrrrrr",
            rows,
        )
        report.say(
            "Every node of the cluster runs on the same cores as the one server when they share a "
            "machine, so this compares the cost of the distributed plan (two-phase commit, "
            "coordinator round trips), not the gain of more machines."
        )
        report.write(args.out)


if __name__ == "__main__":
    main()
