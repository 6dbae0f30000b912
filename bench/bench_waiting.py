"""`neardup serve` with clients that wait: health checks, adds and queries beside many changes-feed
longpolls, and beside top-k queries of megabytes. Loopback only, bounded in count and time.

Starts `neardup serve` (``--workers``, ``--max-longpolls`` above ``--waiters``) on a free port of
127.0.0.1 against a fresh schema; makes a collection with the changes feed (the longpolls wait on
it) and one with neighbours (for top-k); then, in three phases, sends ``--probes`` rounds of
/healthz, an add of one document and a query, one after another, and records each one's latency:

1. alone (the baseline);
2. while ``--waiters`` longpolls wait on the fed collection (none of them is woken: the adds go to
   the other collection), with the server's database connections counted meanwhile;
3. while ``--topk-clients`` threads loop top-k queries of a ``--topk-mb`` MB text.

The report: p50 / p99 / max of each kind in each phase, the longpolls still waiting at the end of
phase 2, and the connections to the database during it against max_connections.

    python bench/bench_waiting.py [--waiters 200] [--workers 2] [--probes 50] [--out FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

import httpx
import psycopg

import _options as options
from _common import Report, bench_schema, header, local_server, pct, serving
from neardup.database import Database
from neardup.storage.connect import libpq_url

FED, NEAR = "waited", "nearest"
LONGPOLL_MS = 60_000


# The page this report is a section of, with the other service-under-load runs.
PAGE_TITLE = "neardup serve under load"


def _client(base: str, token: str, connections: int = 10) -> httpx.Client:
    if urlsplit(base).hostname != "127.0.0.1":
        raise SystemExit(f"refusing to send load anywhere but 127.0.0.1: {base}")
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    headers = {"Authorization": f"Bearer {token}"}
    return httpx.Client(base_url=base, headers=headers, timeout=300.0, limits=limits, trust_env=False)


def _words(n: int, rng: random.Random) -> str:
    return " ".join(f"w{rng.randrange(50_000)}" for _ in range(n))


def probe(client: httpx.Client, rounds: int, rng: random.Random) -> dict[str, list[float]]:
    """``rounds`` of /healthz, an add and a query, each timed (ms); a failed one counts as inf."""
    out: dict[str, list[float]] = {"healthz": [], "add": [], "query": []}
    for n in range(rounds):
        text = _words(80, rng)
        doc = [{"id": f"probe-{os.getpid()}-{n}", "text": text}]
        calls: list[tuple[str, Callable[[], httpx.Response]]] = [
            ("healthz", lambda: client.get("/healthz")),
            ("add", functools.partial(client.post, f"/v1/collections/{NEAR}/documents", json=doc)),
            ("query", functools.partial(client.post, f"/v1/collections/{NEAR}/query", json={"text": text})),
        ]
        for kind, call in calls:
            t0 = time.perf_counter()
            try:
                ok = call().status_code < 300
            except httpx.HTTPError:
                ok = False
            out[kind].append(1000 * (time.perf_counter() - t0) if ok else float("inf"))
    return out


@contextlib.contextmanager
def longpolls(base: str, token: str, count: int) -> Iterator[list[int]]:
    """``count`` longpolls waiting on the fed collection for the block; their statuses after it."""
    statuses: list[int] = []
    with _client(base, token, count + 10) as client, ThreadPoolExecutor(count) as pool:

        def wait() -> None:
            try:
                r = client.get(
                    f"/v1/collections/{FED}/changes", params={"feed": "longpoll", "timeout": LONGPOLL_MS}
                )
                statuses.append(r.status_code)
            except httpx.HTTPError:
                statuses.append(0)

        for _ in range(count):
            pool.submit(wait)
        yield statuses


def connections(url: str) -> tuple[int, int]:
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FILTER (WHERE backend_type = 'client backend'), "
            "current_setting('max_connections')::int FROM pg_stat_activity"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def main() -> None:
    args = _options()
    rng = random.Random(5)
    phases: dict[str, dict[str, list[float]]] = {}
    with contextlib.ExitStack() as stack:
        url = args.db or stack.enter_context(local_server())
        schema = stack.enter_context(bench_schema(url, "nd_bench_waiting"))
        with Database(url, schema) as db:
            db.upgrade()
            db.create(FED, changes_feed=True).close()
            with db.create(NEAR, threshold=0.5, neighbours=True) as index:
                index.add([(f"d{i}", _words(200, rng)) for i in range(2000)])
            _, token = db.tokens.create("write", None, "bench_waiting")
        served = stack.enter_context(
            serving(url, schema, args.workers, extra=["--max-longpolls", str(args.waiters + 100)])
        )
        client = stack.enter_context(_client(served.base, token))
        load_before = os.getloadavg()
        phases["alone"] = probe(client, args.probes, rng)
        with longpolls(served.base, token, args.waiters) as statuses:
            time.sleep(args.settle)  # the longpolls reach the server
            during, most = connections(url)
            phases[f"{args.waiters} longpolls waiting"] = probe(client, args.probes, rng)
            still_waiting = args.waiters - len(statuses)
            client.post(
                f"/v1/collections/{FED}/documents", json=[{"id": "wake", "text": "wakes every longpoll"}]
            )
        big = _words(args.topk_mb * 170_000, rng)
        stop = threading.Event()

        def topk() -> None:
            with _client(served.base, token) as own:
                while not stop.is_set():
                    own.post(f"/v1/collections/{NEAR}/query", json={"text": big, "top_k": 10})

        workers = [threading.Thread(target=topk) for _ in range(args.topk_clients)]
        for w in workers:
            w.start()
        time.sleep(args.settle)
        phases[f"{args.topk_clients} clients looping top-k of {args.topk_mb} MB"] = probe(
            client, args.probes, rng
        )
        stop.set()
        for w in workers:
            w.join()
        load_after = os.getloadavg()
        title = header("Beside waiting clients", url, args.db is not None, level=2)
    report = Report()
    report.say(*title)
    report.say(
        f"One `neardup serve` (--workers {args.workers}) on 127.0.0.1, its clients on the same cores. Load "
        f"average (1, 5, 15 min): {', '.join(f'{x:.1f}' for x in load_before)} before, "
        f"{', '.join(f'{x:.1f}' for x in load_after)} after. Each phase: {args.probes} rounds of /healthz, "
        "an add of one document and a query, one after another; milliseconds in the client.",
        "",
    )
    rows = []
    for phase, kinds in phases.items():
        for kind, ms in kinds.items():
            failed = sum(1 for m in ms if m == float("inf"))
            ok = [m for m in ms if m != float("inf")]
            rows.append(
                (
                    phase,
                    kind,
                    f"{pct(ok, 50):.1f}",
                    f"{pct(ok, 99):.1f}",
                    f"{max(ok, default=0):.1f}",
                    str(failed),
                )
            )
    report.table(["phase", "request", "p50 ms", "p99 ms", "max ms", "failed"], "llrrrr", rows)
    report.say(
        f"Longpolls still waiting when phase 2 ended: {still_waiting} of {args.waiters}. Client connections "
        f"to the database during it: {during} (max_connections {most}).",
        "",
    )
    report.write(args.out, section="waiting clients", title=PAGE_TITLE)


def _options() -> argparse.Namespace:
    parser = options.parser(__doc__)
    options.add_db(parser)
    parser.add_argument("--waiters", type=int, default=200, help="longpolls waiting in phase 2 (default 200)")
    parser.add_argument("--workers", type=int, default=2, help="serve's worker processes (default 2)")
    parser.add_argument("--probes", type=int, default=50, help="rounds of probes a phase (default 50)")
    parser.add_argument("--topk-clients", type=int, default=2, help="clients looping top-k (default 2)")
    parser.add_argument(
        "--topk-mb", type=int, default=4, help="megabytes of a top-k query's text (default 4)"
    )
    parser.add_argument(
        "--settle", type=float, default=10.0, help="seconds before a phase's probes (default 10)"
    )
    options.add_out(parser, "load.md")
    return parser.parse_args()


if __name__ == "__main__":
    main()
