"""One server against a Citus cluster on the same documents: ingest, all pairs, query and check.

The same corpus goes into collections on one durable local PostgreSQL, written by 1, 2 and 4
writer processes (--jobs; `Index.add(jobs=N)`), and into a distributed collection on each Citus
coordinator named by --citus (give it once per cluster, e.g. one with one worker and one with
two; a schema of its own, made distributed with --shards shards per table, dropped afterwards).
For each: ingest (documents a second, with every verified pair stored), listing all pairs,
--queries edited copies of stored documents queried one at a time (p50, p99), `Index.check` of as
many (documents a second), and the bytes a document takes on disk (on every node; on a cluster
also each worker's share), with the CPU seconds of the client, the coordinator (or the one
server) and each worker. --citus-jobs adds cluster runs with several writer processes, to show
what their work costs where. The report names each cluster's worker nodes and their settings.
Citus is in neither PyPI nor Debian's archive: docs/distributed.md says how to get a cluster.

With --interactive R, each single-writer collection then answers the interactive calls R times
each, timed one by one (p50, p99): `stats`, `collections`, the first 100 pairs and the first 100
clusters of the listings, a query, and every review page over HTTP from a `neardup serve` of its
own (the home page, a collection's clusters, a cluster, the pairs, the queue, a pair, a document).

    python bench/bench_distributed.py --citus postgresql://postgres@127.0.0.1:9710/test \
        --citus postgresql://postgres@127.0.0.1:9700/test [CORPUS] [--limit N] [--jobs 1,2,4]
        [--citus-jobs 1,2] [--shards 4] [--queries 200] [--interactive 20] [--db URL]
        [--out docs/benchmarks/distributed.md]

Not measured here: more workers than one machine holds (the device tool's larger machine was not
lent to this session).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import random
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

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


def worker_shares(url: str, schema: str) -> str:
    """Each worker's share of the schema's shards, in bytes (``citus_shards``)."""
    with psycopg.connect(libpq_url(url)) as conn:
        rows = conn.execute(
            "SELECT nodeport, sum(shard_size) FROM citus_shards "
            "WHERE table_name::text LIKE %s GROUP BY nodeport ORDER BY nodeport",
            (f"{schema}.%",),
        ).fetchall()
    total = sum(int(size) for _, size in rows) or 1
    return ", ".join(f":{port} {100 * int(size) / total:.0f}%" for port, size in rows)


_TICK = os.sysconf("SC_CLK_TCK")
_LOCAL = ("127.0.0.1", "localhost", "::1")


def _stat(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the command name (field 3, the state, first)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def server_cpu(url: str) -> float:
    """CPU seconds the PostgreSQL server behind ``url`` has used so far: its postmaster, every
    live process under it and every ended one it reaped (nan when it is not on this machine)."""
    parts = urlsplit(url)
    socket_dir = "host=/" in parts.query  # a Unix socket: this machine
    if parts.hostname not in _LOCAL and not (parts.hostname is None and (socket_dir or not parts.query)):
        return float("nan")
    with psycopg.connect(libpq_url(url)) as conn:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None
        postmaster = int(_stat(int(row[0]))[1])
        # utime, stime, and the cutime and cstime of the children it waited for (fields 14-17).
        ticks = sum(int(f) for f in _stat(postmaster)[11:15])
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    fields = _stat(int(entry.name))
                except OSError:  # ended meanwhile
                    continue
                if int(fields[1]) == postmaster:
                    ticks += int(fields[11]) + int(fields[12])
    return ticks / _TICK


def node_urls(url: str) -> dict[str, str]:
    """The URL of the coordinator and of each worker (same user and database), by name."""
    parts = urlsplit(url)
    nodes = {"coordinator": url}
    for node in workers(url):
        host, port = node.rsplit(":", 1)
        userinfo = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
        nodes[f"worker :{port}"] = urlunsplit(parts._replace(netloc=f"{userinfo}{host}:{port}"))
    return nodes


class CpuMeter:
    """CPU seconds of this process and its children (the client) and of each database node."""

    def __init__(self, nodes: dict[str, str]) -> None:
        self.nodes = nodes

    def read(self) -> dict[str, float]:
        """The counters now."""
        mine = resource.getrusage(resource.RUSAGE_SELF)
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        client = mine.ru_utime + mine.ru_stime + children.ru_utime + children.ru_stime
        return {"client": client, **{name: server_cpu(u) for name, u in self.nodes.items()}}

    def since(self, before: dict[str, float]) -> dict[str, float]:
        """CPU seconds used since ``before``: client, server (one server) or coordinator and workers."""
        used = self.each_since(before)
        workers = [v for k, v in used.items() if k.startswith("worker")]
        return {
            "client": used["client"],
            "server": used.get("coordinator", float("nan")),
            "workers": sum(workers) if workers else float("nan"),
        }

    def each_since(self, before: dict[str, float]) -> dict[str, float]:
        """CPU seconds used since ``before`` by the client and by each node, by name."""
        now = self.read()
        return {k: now[k] - before[k] for k in now}


def _split(cpu: dict[str, float], per: float, unit: float) -> str:
    """client / server-or-coordinator / workers, each ``cpu[k] / per * unit``."""
    return " / ".join("–" if v != v else f"{v / per * unit:.2f}" for v in cpu.values())


def measure(
    url: str,
    schema: str,
    docs: list[tuple[str, str]],
    probes: list[str],
    jobs: int = 1,
    nodes: dict[str, str] | None = None,
    interactive: int = 0,
    **create: Any,
) -> list[str]:
    """One row of the report: ingest, all pairs, query p50/p99, check rate, bytes a document, and
    the CPU an ingested document and a query cost on the client and on each kind of node."""
    meter = CpuMeter(nodes or {"coordinator": url})
    name = f"bench{jobs}"
    load_before = os.getloadavg()[0]
    with Index.create(url, name, threshold=0.8, schema=schema, **create) as index:
        before = meter.read()
        start = time.perf_counter()
        index.add(docs, jobs=jobs)
        ingest = time.perf_counter() - start
        each = meter.each_since(before)
        ingest_cpu = meter.since(before)
        where = ", ".join(
            f"{'server' if k == 'coordinator' and not nodes else k} {v:.1f}" for k, v in each.items()
        )
        start = time.perf_counter()
        pairs = sum(1 for _ in index.pairs())
        listing = time.perf_counter() - start
        # Leave autovacuum nothing to do after the load, so that the nodes' CPU below is the queries'.
        with psycopg.connect(libpq_url(url), autocommit=True) as conn:
            for table in ("contents", "documents", "signatures", "buckets", "pairs"):
                conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(sql.Identifier(schema, table)))
        before = meter.read()
        query_ms = latencies_ms(index.query, probes)
        query_cpu = meter.since(before)
        start = time.perf_counter()
        found = sum(1 for r in index.check((f"probe-{i}", t) for i, t in enumerate(probes)) if r.matches)
        check = time.perf_counter() - start
        size = index.stats().bytes_on_disk
        if interactive and jobs == 1:
            label = f"Citus, coordinator :{urlsplit(url).port}" if create else "one server"
            load = os.getloadavg()[0]
            answered[label] = timed_calls(url, schema, name, probes, interactive)
            loads[label] = (load, os.getloadavg()[0])
    deployment = create or "one server"
    print(f"  {deployment}, {jobs} writer(s): ingest {ingest:.1f} s, {pairs:,} pairs", file=sys.stderr)
    return [
        str(jobs),
        f"{len(docs) / ingest:,.0f}",
        f"{ingest:.2f}",
        f"{listing:.2f}",
        f"{pairs:,}",
        f"{pct(query_ms, 50):.2f} / {pct(query_ms, 99):.2f}",
        f"{len(probes) / check:,.0f} ({found:,} found)",
        f"{size / len(docs):,.0f}",
        _split(ingest_cpu, len(docs), 1000),
        where,
        _split(query_cpu, len(probes), 1000),
        f"{load_before:.1f} / {os.getloadavg()[0]:.1f}",
    ]


# The review pages a reviewer opens, by path under /review/ ({c}: the collection).
_PAGES = ("home", "clusters", "cluster", "pairs", "queue", "pair", "document")


def timed_calls(url: str, schema: str, name: str, probes: list[str], repeats: int) -> dict[str, list[float]]:
    """Milliseconds of each interactive call on the collection, ``repeats`` times each, after one
    untimed call: the command line's reads through the API, and the review pages over HTTP."""
    import httpx

    from _common import serving
    from neardup.database import Database

    calls: dict[str, Any] = {}
    with Database(url, schema) as db, Index.open(url, name, schema=schema) as index:
        calls["stats"] = index.stats
        calls["collections"] = db.collections
        calls["pairs, first 100"] = lambda: list(itertools.islice(index.pairs(), 100))
        calls["clusters, first 100"] = lambda: list(itertools.islice(index.clusters(), 100))
        texts = itertools.cycle(probes)
        calls["query"] = lambda: index.query(next(texts))
        pair = next(iter(index.pairs()), None)
        cluster = next(iter(index.clusters()), None)
        _, token = db.tokens.create("read", name="bench")
        with (
            serving(url, schema) as served,
            httpx.Client(
                base_url=f"{served.base}/review",
                headers={"Authorization": f"Bearer {token}"},
                trust_env=False,
            ) as client,
        ):
            paths = {
                "home": "/",
                "clusters": f"/{name}",
                "cluster": f"/{name}/cluster/{cluster.id if cluster else 0}",
                "pairs": f"/{name}/pairs",
                "queue": f"/{name}/queue",
                "pair": f"/{name}/pair?a={pair[0] if pair else ''}&b={pair[1] if pair else ''}",
                "document": f"/{name}/document?id={pair[0] if pair else ''}",
            }
            for page in _PAGES:
                calls[f"review: {page}"] = lambda path=paths[page]: client.get(
                    path, timeout=120
                ).raise_for_status()
            return {what: _timed(fn, repeats) for what, fn in calls.items()}


def _timed(fn: Any, repeats: int) -> list[float]:
    fn()
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        out.append(1000 * (time.perf_counter() - start))
    return out


# What each deployment's single-writer collection answered (``timed_calls``), by deployment.
answered: dict[str, dict[str, list[float]]] = {}
# The machine's 1-minute load average before and after each deployment's interactive calls.
loads: dict[str, tuple[float, float]] = {}


def uptime() -> str:
    """The output of ``uptime``: this machine's load while the figures were taken."""
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def main() -> None:
    """Run both deployments on the same documents and write the report."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus", nargs="?", type=Path, default=DEBIAN, help="JSONL(.gz) of id, text")
    ap.add_argument(
        "--citus",
        action="append",
        required=True,
        help="URL of a Citus coordinator with worker nodes (once per cluster)",
    )
    ap.add_argument("--jobs", default="1,2,4", help="writer processes of the one-server runs (default 1,2,4)")
    ap.add_argument("--citus-jobs", default="1", help="writer processes of the cluster runs (default 1)")
    ap.add_argument(
        "--interactive",
        type=int,
        default=0,
        help="time each interactive call this many times (default 0: not)",
    )
    ap.add_argument("--limit", type=int, help="use only the first N documents")
    ap.add_argument("--shards", type=int, default=4, help="shards per distributed table")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--db", help="PostgreSQL URL for the one-server run (default: a durable local server)")
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "benchmarks" / "distributed.md")
    args = ap.parse_args()
    docs = list(read_jsonl(args.corpus, args.limit))
    rng = random.Random(1)
    probes = [edited(text, rng) for _, text in rng.sample(docs, min(args.queries, len(docs)))]
    clusters = {citus: workers(citus) for citus in args.citus}
    rows = []
    started = uptime()
    with contextlib.ExitStack() as stack:
        url = args.db or stack.enter_context(local_server())
        schema = stack.enter_context(bench_schema(url, "nd_one"))
        for jobs in (int(j) for j in args.jobs.split(",")):
            row = measure(url, schema, docs, probes, jobs, interactive=args.interactive)
            rows.append(["one server", *row[:-1], "–", row[-1]])
        for citus, nodes in clusters.items():
            citus_schema = stack.enter_context(bench_schema(citus, "nd_citus"))
            create = {"distributed": True, "shards": args.shards}
            name = f"Citus, {len(nodes)} worker{'s' if len(nodes) > 1 else ''}, {args.shards} shards a table"
            for jobs in (int(j) for j in args.citus_jobs.split(",")):
                row = measure(
                    citus, citus_schema, docs, probes, jobs, node_urls(citus), args.interactive, **create
                )
                rows.append([name, *row[:-1], worker_shares(citus, citus_schema), row[-1]])
        report = Report()
        report.say(
            *header(
                "One server and a Citus cluster on the same documents",
                url,
                args.db is not None,
                [
                    f"Corpus: `{args.corpus.name}`, {len(docs):,} documents; threshold 0.8; "
                    f"{len(probes):,} queries and checks of edited copies of stored documents",
                    *(
                        f"Citus coordinator `{citus}`: workers {', '.join(nodes) or 'none'} (on this "
                        f"machine unless they say otherwise); settings: {settings(citus)}"
                        for citus, nodes in clusters.items()
                    ),
                ],
            )
        )
        report.table(
            [
                "deployment",
                "writers",
                "ingest docs/s",
                "ingest s",
                "list all pairs s",
                "pairs",
                "query p50 / p99 ms",
                "check docs/s",
                "bytes a document",
                "CPU s per 1,000 documents ingested: client / server or coordinator / workers",
                "CPU s of the ingest, by process",
                "CPU ms per query: client / server or coordinator / workers",
                "each worker's share",
                "load (1 min) before / after",
            ],
            "lrrrrrrrrrrllr",
            rows,
        )
        if answered:
            deployments = list(answered)
            report.say(
                f"Interactive calls on the single-writer collections ({len(docs):,} documents), each "
                f"timed {args.interactive} times after one untimed call, p50 / p99 in ms:"
            )
            report.table(
                ["call", *deployments],
                "l" + "r" * len(deployments),
                [
                    [
                        what,
                        *(
                            f"{pct(answered[d][what], 50):.1f} / {pct(answered[d][what], 99):.1f}"
                            for d in deployments
                        ),
                    ]
                    for what in answered[deployments[0]]
                ]
                + [
                    [
                        "load (1 min) before / after",
                        *(f"{loads[d][0]:.1f} / {loads[d][1]:.1f}" for d in deployments),
                    ]
                ],
            )
        report.say(f"`uptime` at the start: {started}; at the end: {uptime()}.")
        report.say(
            "Every node of the cluster runs on the same cores as the one server when they share a "
            "machine, so this compares the cost of the distributed plan (two-phase commit, "
            "coordinator round trips), not the gain of more machines. Writer processes split the "
            "input by id; each reads, checks, sketches, probes and verifies its share and writes its "
            "new contents, signatures and bucket rows on its own, and their batches take turns at "
            "the collection's lock to write documents (docs/distributed.md). CPU seconds "
            "are read from /proc for every PostgreSQL process of each node (ended ones included, through "
            "their postmaster) and from getrusage for this process and its writer processes; "
            "docs/capacity.md projects larger clusters from them."
        )
        report.write(args.out)


if __name__ == "__main__":
    main()
