"""The HTTP service against the in-process Index, in one run: query and check on the Debian corpus.

Loads the Debian bookworm descriptions (63,956; or --corpus) into a fresh schema, starts `neardup serve`
(one uvicorn worker unless --workers says more, access log off) on a free loopback port, and measures:

- in-process `Index.query` and `Index.check` latency, one caller;
- over HTTP, query and check with 1, 8 and 32 concurrent clients (closed loop, keep-alive):
  requests/s, p50 and p99;
- over HTTP, queries sent at a fixed 200/s (open loop) for ``--rate-seconds``: p50 and p99 measured
  from each request's scheduled start, so queueing counts.

The client runs on the same machine as the server and competes with it for the CPU.

    python bench/bench_service.py [--corpus PATH] [--limit N] [--db URL] [--queries 2000]
                                  [--out docs/benchmarks/service.md]
"""

from __future__ import annotations

import contextlib
import json
import random
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from _common import (
    Client,
    Report,
    database,
    edited,
    header,
    latencies_ms,
    pct,
    read_jsonl,
    serving,
)
from _options import add_db, add_debian, add_out, parser
from neardup.database import Database
from neardup.index import Index

CONCURRENCY = (1, 8, 32)
RATE = 200  # queries per second in the open-loop run (the goal: p99 under 20 ms at this rate)


def wrk_latency(base: str, token: str, path: str, bodies: list[object], seconds: float) -> dict[str, float]:
    """p50 and p99 (ms) of POSTs of ``bodies`` in turn from wrk (a C client), one connection, or an
    empty dict without wrk on PATH: the server's latency with a client that costs next to nothing."""
    wrk = shutil.which("wrk")
    if wrk is None:
        return {}
    literals = ",\n".join(f"[==[{json.dumps(b)}]==]" for b in bodies)
    script = (
        f"local bodies = {{\n{literals}\n}}\nlocal i = 0\n"
        'wrk.method = "POST"\n'
        f'wrk.headers["Authorization"] = "Bearer {token}"\n'
        'wrk.headers["Content-Type"] = "application/json"\n'
        "request = function()\n  i = i % #bodies + 1\n"
        f'  return wrk.format(nil, "{path}", nil, bodies[i])\nend\n'
    )
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(script)
    try:
        out = subprocess.run(
            [wrk, "-t1", "-c1", f"-d{seconds:.0f}s", "--latency", "-s", f.name, base],
            capture_output=True,
            text=True,
            check=True,
            timeout=seconds + 60,
        ).stdout
    finally:
        Path(f.name).unlink()
    scale = {"us": 0.001, "ms": 1.0, "s": 1000.0}
    found = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] in ("50%", "99%"):
            number, unit = parts[1].rstrip("usm"), parts[1][len(parts[1].rstrip("usm")) :]
            found[parts[0]] = float(number) * scale[unit]
    return found


def _clients(
    base: str, token: str, count: int, items: Iterator[Any], send: Callable[[Client, Any], float]
) -> list[float]:
    """Latencies (ms) of ``count`` client threads taking ``items`` in turn, each sent by ``send``,
    which returns its latency."""
    latencies: list[float] = []
    lock = threading.Lock()

    def run() -> None:
        mine: list[float] = []
        c = Client(base, token)
        try:
            while True:
                with lock:
                    item = next(items, None)
                if item is None:
                    break
                mine.append(send(c, item))
        finally:
            c.close()
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=run) for _ in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return latencies


def closed_loop(
    base: str, token: str, path: str, bodies: list[object], clients: int
) -> tuple[float, list[float]]:
    """(requests/s, latencies in ms) of ``clients`` threads sending ``bodies`` between them."""

    def send(c: Client, body: object) -> float:
        t0 = time.perf_counter()
        status, text = c.post(path, json.dumps(body).encode())
        if status != 200:
            raise RuntimeError(f"{path}: {status} {text[:200]!r}")
        return 1000 * (time.perf_counter() - t0)

    t0 = time.perf_counter()
    latencies = _clients(base, token, clients, iter(bodies), send)
    return len(bodies) / (time.perf_counter() - t0), latencies


def open_loop(base: str, token: str, path: str, bodies: list[object], rate: float) -> list[float]:
    """Latencies (ms, from each request's scheduled start) of ``bodies`` sent at ``rate`` per second."""
    start = time.perf_counter() + 0.5

    def send(c: Client, item: tuple[int, object]) -> float:
        n, body = item
        due = start + n / rate
        time.sleep(max(0.0, due - time.perf_counter()))
        c.post(path, json.dumps(body).encode())
        return 1000 * (time.perf_counter() - due)

    return _clients(base, token, 32, iter(enumerate(bodies)), send)


ROUNDS = 5  # interleaved rounds of the one-client comparison


def interleaved(
    base: str, token: str, index: Index, texts: list[str], rounds: int = ROUNDS
) -> list[tuple[float, float, float]]:
    """Per round, the p50 (ms) of the same queries in-process, over HTTP from the Python client and
    over HTTP from wrk (nan without it), one after the other, so each round's three share the
    machine's state of the moment: the median of the differences is what HTTP adds."""
    share = max(len(texts) // rounds, 1)
    out = []
    for r in range(rounds):
        chunk = texts[r * share : (r + 1) * share]
        local = pct(latencies_ms(index.query, chunk, warmup=50), 50)
        bodies: list[object] = [{"text": t} for t in chunk]
        remote = pct(closed_loop(base, token, "/v1/collections/debian/query", bodies, 1)[1], 50)
        by_wrk = wrk_latency(base, token, "/v1/collections/debian/query", bodies, 4).get("50%", float("nan"))
        out.append((local, remote, by_wrk))
    return out


def main() -> None:
    """Run the benchmark and write the report."""
    ap = parser(__doc__)
    add_debian(ap, flag="--corpus")
    add_db(ap)
    ap.add_argument("--queries", type=int, default=2000, help="requests per measurement (default 2000)")
    ap.add_argument("--rate-seconds", type=float, default=10.0, help="length of the 200/s run (default 10)")
    ap.add_argument("--workers", type=int, default=1, help="uvicorn worker processes (default 1)")
    add_out(ap, "service.md")
    args = ap.parse_args()
    if not args.corpus.exists():
        raise SystemExit(f"the corpus is not at {args.corpus}")
    with contextlib.ExitStack() as stack:
        url, schema = stack.enter_context(database(args.db, "nd_bench_service"))
        docs = list(read_jsonl(args.corpus, args.limit))
        index = stack.enter_context(Index.create(url, "debian", 0.8, schema=schema))
        t0 = time.perf_counter()
        index.add(docs)
        load_s = time.perf_counter() - t0
        rng = random.Random(1)
        texts = [edited(docs[rng.randrange(len(docs))][1], rng) for _ in range(args.queries)]
        with Database(url, schema, pool_size=1) as db:
            _, secret = db.tokens.create("read", name="bench")

        def check_one(text: str) -> object:
            return list(index.check([{"id": "q", "text": text}]))

        local_query = latencies_ms(index.query, texts, warmup=50)
        local_check = latencies_ms(check_one, texts, warmup=50)
        base = stack.enter_context(serving(url, schema, args.workers)).base
        query_bodies: list[object] = [{"text": t} for t in texts]
        check_bodies: list[object] = [[{"id": "q", "text": t}] for t in texts]
        rows = [("query", "in-process `Index.query`", "–", *_cells(local_query))]
        rows.append(("check", "in-process `Index.check`", "–", *_cells(local_check)))
        for clients in CONCURRENCY:
            rate, lat = closed_loop(base, secret, "/v1/collections/debian/query", query_bodies, clients)
            rows.append(("query", "HTTP", str(clients), f"{rate:,.0f}", *_cells(lat)[1:]))
        for clients in CONCURRENCY:
            rate, lat = closed_loop(base, secret, "/v1/collections/debian/check", check_bodies, clients)
            rows.append(("check", "HTTP", str(clients), f"{rate:,.0f}", *_cells(lat)[1:]))
        rounds = interleaved(base, secret, index, texts)
        by_wrk = wrk_latency(base, secret, "/v1/collections/debian/query", query_bodies, 10)
        if by_wrk:
            rows.append(
                (
                    "query",
                    "HTTP, `wrk` (a C client)",
                    "1",
                    "–",
                    f"{by_wrk['50%']:.2f}",
                    f"{by_wrk['99%']:.2f}",
                )
            )
        n_rate = int(RATE * args.rate_seconds)
        fixed = open_loop(base, secret, "/v1/collections/debian/query", (query_bodies * 10)[:n_rate], RATE)

        report = Report()
        report.say(*header("The HTTP service against the in-process Index", url, args.db is not None))
        report.say(
            f"`{args.corpus.name}`, {len(docs):,} documents, threshold 0.8, loaded in {load_s:.1f} s; "
            f"{args.queries:,} query texts (a stored description with ~3% of its words replaced). "
            f"One `neardup serve` process ({args.workers} uvicorn worker(s), access log off); the "
            "clients are threads of this process with keep-alive connections (`http.client`), on the "
            "same 2 cores as the server.",
            "",
        )
        report.table(["what", "how", "clients", "requests/s", "p50 ms", "p99 ms"], "lllrrr", rows)
        report.say(
            f"Fixed rate: {n_rate:,} queries at {RATE}/s over HTTP (32 client threads, latency from each "
            f"request's scheduled start): p50 {pct(fixed, 50):.2f} ms, p99 {pct(fixed, 99):.2f} ms.",
            "",
            f"HTTP over in-process at one client: query p50 {pct(_http_one(rows, 'query'), 50):.2f} ms "
            f"added (goal: at most 1 ms); p99 at 200/s {pct(fixed, 99):.2f} ms (goal: under 20 ms).",
            *(
                [
                    "",
                    "With `wrk` as the client (one connection, 10 s, the same bodies in turn), the query's "
                    f"p50 is {by_wrk['50%']:.2f} ms: HTTP adds {by_wrk['50%'] - pct(local_query, 50):.2f} ms "
                    "to the in-process p50; the rest of the difference above is the Python client's time.",
                ]
                if by_wrk
                else []
            ),
        )
        added = [remote - local for local, remote, _ in rounds]
        added_wrk = [w - local for local, _, w in rounds if w == w]
        report.say(
            "",
            f"Interleaved, {len(rounds)} rounds of the same queries in-process, then over HTTP from the "
            "Python client, then from wrk (p50 ms each):",
            "",
        )
        report.table(
            ["round", "in-process", "HTTP, Python client", "HTTP, wrk"],
            "rrrr",
            [(str(n + 1), f"{a:.2f}", f"{b:.2f}", f"{c:.2f}") for n, (a, b, c) in enumerate(rounds)],
        )
        report.say(
            f"Median added by HTTP over the rounds: {statistics.median(added):.2f} ms from the Python client"
            + (f", {statistics.median(added_wrk):.2f} ms from wrk" if added_wrk else "")
            + " (goal: at most 1 ms).",
        )
        report.write(args.out)


def _cells(lat: list[float]) -> tuple[str, str, str]:
    rate = 1000 * len(lat) / sum(lat) if lat else float("nan")
    return f"{rate:,.0f}", f"{pct(lat, 50):.2f}", f"{pct(lat, 99):.2f}"


def _http_one(rows: Sequence[tuple[str, ...]], what: str) -> list[float]:
    local = next(float(r[4]) for r in rows if r[0] == what and r[2] == "–")
    http = next(float(r[4]) for r in rows if r[0] == what and r[2] == "1")
    return [http - local]


if __name__ == "__main__":
    main()
