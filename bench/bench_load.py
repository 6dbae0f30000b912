"""A load test of `neardup serve`: concurrent readers and writers for minutes, on loopback only.

Loads Debian bookworm (63,956 package descriptions) into a collection of a fresh schema, makes a
write token, starts `neardup serve` (one uvicorn worker, log at level warning) on a free port of
127.0.0.1, and then, until ``--seconds`` have passed or ``--max-requests`` have been sent:

- ``--readers`` threads, each with its own keep-alive httpx client, send in random turn queries of
  stored texts with ~3% of their words replaced, GETs of documents (one acknowledged by a writer
  when there is one, so a write must be readable once acknowledged), and pages of pairs and of
  clusters, each reader following its own cursor to the end and starting again;
- ``--writers`` threads POST batches of ``--batch`` new documents with unique ids (half of them
  near-copies of stored texts, half new texts), one after another; a 200 is an acknowledgement.

Every response's status and latency is recorded, and the resident memory of the serve process (with
its children) sampled every ``--sample-seconds``. At the end, every acknowledged document is looked
up in the collection (its id and its text), and the collection's document count compared with what
was acknowledged. The report: requests by kind with p50 / p99, every non-2xx by status, the memory
at start, after the warm-up, at the end and its peak with the slope after the warm-up, and the
documents acknowledged against stored. The exit status is 1 when a goal fails: no 5xx or broken
connection, no growth of memory after the warm-up beyond the noise, every acknowledged document
stored and readable.

The clients run on the same machine as the server and the database and compete with them for the CPU.

    python bench/bench_load.py [--seconds 300] [--readers 8] [--writers 2] [--out docs/benchmarks/load.md]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import math
import os
import random
import tempfile
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit

import httpx
import numpy as np
import psycopg

import _options as options
from _common import (
    DEBIAN,
    Report,
    bench_schema,
    edited,
    header,
    local_server,
    pct,
    read_jsonl,
    serving,
    tree_rss,
)
from neardup.database import Database
from neardup.index import Index
from neardup.storage.connect import libpq_url

COLLECTION = "load"
PATH = f"/v1/collections/{COLLECTION}"
# What a reader sends, in proportion: mostly queries, as a deduplicating client does, and enough
# page reads that the listings' queries run beside the writers' transactions all along.
READS = ("query", "document", "pairs", "clusters")
READ_WEIGHTS = (6, 2, 1, 1)
PAGE = 100  # pairs or clusters a page
# Resident memory moves by allocator noise (the arenas of the service's worker threads, numpy
# buffers, the index pool's caches) by tens of MiB; growth after the warm-up within the larger of
# these is not counted as growth.
NOISE_MIB = 32.0
NOISE_SHARE = 0.10
MIB = 2**20


class Budget:
    """Requests left to send: none once ``seconds`` have passed or ``max_requests`` were taken."""

    def __init__(self, seconds: float, max_requests: int) -> None:
        self.deadline = time.monotonic() + seconds
        self.left = max_requests
        self.ended_by = ""
        self._lock = threading.Lock()

    def take(self) -> bool:
        """Whether one more request may be sent (and it is counted if so)."""
        with self._lock:
            if not self.ended_by and time.monotonic() >= self.deadline:
                self.ended_by = "time"
            elif not self.ended_by and self.left <= 0:
                self.ended_by = "request count"
            if self.ended_by:
                return False
            self.left -= 1
            return True


@dataclass
class Tally:
    """What every thread saw, under one lock: each request's kind, status and latency, and the
    documents acknowledged."""

    statuses: Counter[tuple[str, str]] = field(default_factory=Counter)
    latencies: dict[str, list[float]] = field(default_factory=dict)
    acked: dict[str, str] = field(default_factory=dict)  # id -> text, of every 200 to an add
    said_added: int = 0  # the sum of the adds' "added"
    # The newest acknowledgements, the likeliest to show a write not yet readable.
    recent: deque[str] = field(default_factory=lambda: deque(maxlen=1000))
    unreadable: list[str] = field(default_factory=list)  # acknowledged ids a GET did not find
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, kind: str, status: str, ms: float) -> None:
        with self.lock:
            self.statuses[kind, status] += 1
            self.latencies.setdefault(kind, []).append(ms)

    def acknowledge(self, docs: list[dict[str, str]], added: int) -> None:
        with self.lock:
            self.acked.update((d["id"], d["text"]) for d in docs)
            self.recent.extend(d["id"] for d in docs)
            self.said_added += added

    def an_acked_id(self, rng: random.Random) -> str | None:
        with self.lock:
            return self.recent[rng.randrange(len(self.recent))] if self.recent else None

    def count(self, kind: str | None = None, test: Callable[[str], bool] = lambda s: True) -> int:
        with self.lock:
            return sum(n for (k, s), n in self.statuses.items() if (kind in (None, k)) and test(s))


# The page this report is a section of, with the other service-under-load runs.
PAGE_TITLE = "neardup serve under load"


def _client(base: str, token: str) -> httpx.Client:
    """A keep-alive client of the service, which must be on 127.0.0.1."""
    if urlsplit(base).hostname != "127.0.0.1":
        raise SystemExit(f"refusing to send load anywhere but 127.0.0.1: {base}")
    # trust_env off: no proxy from the environment may stand between the client and loopback.
    headers = {"Authorization": f"Bearer {token}"}
    return httpx.Client(base_url=base, headers=headers, timeout=120.0, trust_env=False)


def _send(
    client: httpx.Client, tally: Tally, kind: str, method: str, path: str, **kw: Any
) -> httpx.Response | None:
    """The response (None when the connection failed: recorded by the error's name)."""
    t0 = time.perf_counter()
    try:
        response = client.request(method, path, **kw)
    except httpx.HTTPError as exc:
        tally.record(kind, type(exc).__name__, 1000 * (time.perf_counter() - t0))
        return None
    tally.record(kind, str(response.status_code), 1000 * (time.perf_counter() - t0))
    return response


def reader(
    n: int, base: str, token: str, docs: Sequence[tuple[str, str]], tally: Tally, budget: Budget
) -> None:
    """Reads in random turn until the budget ends."""
    rng = random.Random(1000 + n)
    after: dict[str, str | None] = {"pairs": None, "clusters": None}
    with _client(base, token) as client:
        while budget.take():
            kind = rng.choices(READS, READ_WEIGHTS)[0]
            if kind == "query":
                text = edited(rng.choice(docs)[1], rng)
                _send(client, tally, kind, "POST", f"{PATH}/query", json={"text": text})
            elif kind == "document":
                acked = tally.an_acked_id(rng)
                doc_id = acked if acked is not None else rng.choice(docs)[0]
                r = _send(client, tally, kind, "GET", f"{PATH}/documents/{quote(doc_id, safe='')}")
                if acked is not None and r is not None and r.status_code == 404:
                    with tally.lock:
                        tally.unreadable.append(acked)
            else:
                cursor = after[kind]
                params: dict[str, str | int] = {"limit": PAGE}
                if cursor:
                    params["after"] = cursor
                r = _send(client, tally, kind, "GET", f"{PATH}/{kind}", params=params)
                after[kind] = r.json().get("next") if r is not None and r.status_code == 200 else None


def _new_text(rng: random.Random, docs: Sequence[tuple[str, str]]) -> str:
    """A near-copy of a stored text, or (as often) a new text made of a stored one's words shuffled."""
    text = rng.choice(docs)[1]
    if rng.random() < 0.5:
        return edited(text, rng)
    words = text.split()
    rng.shuffle(words)
    return " ".join(words)


def writer(
    n: int,
    base: str,
    token: str,
    docs: Sequence[tuple[str, str]],
    tally: Tally,
    budget: Budget,
    batch: int,
    steady: int = 0,
) -> None:
    """Adds batches of new documents with unique ids until the budget ends; with ``steady``, ids
    from a pool of that many, so that once each is stored a POST replaces as many documents as it
    sends and the collection keeps its size."""
    rng = random.Random(2000 + n)
    sent = 0
    with _client(base, token) as client:
        while budget.take():
            numbers = [(sent + i) % steady if steady else sent + i for i in range(batch)]
            new = [{"id": f"load-w{n}-{k:07d}", "text": _new_text(rng, docs)} for k in numbers]
            sent += batch
            r = _send(client, tally, "add", "POST", f"{PATH}/documents", json=new)
            if r is not None and r.status_code == 200:
                tally.acknowledge(new, int(r.json().get("added", 0)))


class Sampler:
    """The resident memory of a process tree every ``interval`` seconds on a thread of its own:
    (seconds since start, bytes, documents acknowledged so far)."""

    def __init__(self, pid: int, interval: float, tally: Tally) -> None:
        self.pid, self.interval, self.tally = pid, interval, tally
        self.samples: list[tuple[float, int, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self) -> None:
        with self.tally.lock:
            acked = len(self.tally.acked)
        self.samples.append((time.monotonic() - self.t0, tree_rss(self.pid), acked))

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def __enter__(self) -> Sampler:
        self.t0 = time.monotonic()
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()


@dataclass
class Load:
    """The run's outcome."""

    tally: Tally
    samples: list[tuple[float, int, int]]
    seconds: float
    ended_by: str


def _guarded(tally: Tally, target: Callable[..., None], args: tuple[Any, ...]) -> None:
    """``target(*args)``, a client thread's work; an exception that ends it early is counted as a
    failure (kind "client thread"), so a run cannot pass with threads that quietly stopped."""
    try:
        target(*args)
    except Exception as exc:
        tally.record("client thread", type(exc).__name__, 0.0)
        raise


def run_load(
    base: str, pid: int, token: str, docs: Sequence[tuple[str, str]], args: argparse.Namespace
) -> Load:
    """The readers and writers against the service until the budget ends, memory sampled all along."""
    tally = Tally()
    budget = Budget(args.seconds, args.max_requests)
    jobs: list[tuple[Callable[..., None], tuple[Any, ...]]] = [
        (reader, (n, base, token, docs, tally, budget)) for n in range(args.readers)
    ]
    jobs += [
        (writer, (n, base, token, docs, tally, budget, args.batch, args.steady)) for n in range(args.writers)
    ]
    threads = [threading.Thread(target=_guarded, args=(tally, *job)) for job in jobs]
    with Sampler(pid, args.sample_seconds, tally) as sampler:
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        seconds = time.perf_counter() - t0
    return Load(tally, sampler.samples, seconds, budget.ended_by)


@dataclass
class Stored:
    """The acknowledged documents looked up in the collection."""

    acked: int
    found: int  # acknowledged ids stored with the text sent
    missing: list[str]
    other_text: list[str]
    documents: int  # the collection's document count
    expected: int  # the preloaded documents and the acknowledged ones


def verify(url: str, schema: str, acked: dict[str, str], preloaded: int) -> Stored:
    """Every acknowledged id and text read back from the collection (the README's public
    ``document_list`` view, in one statement), and its document count from ``Database.info``."""
    stored: dict[str, str | None] = {}
    with psycopg.connect(libpq_url(url)) as conn:
        query = f'SELECT id, text FROM "{schema}".document_list WHERE collection = %s AND id LIKE %s'
        for doc_id, text in conn.execute(query, (COLLECTION, "load-w%")):
            stored[doc_id] = text
    missing = [i for i in acked if i not in stored]
    other = [i for i, text in acked.items() if i in stored and stored[i] != text]
    with Database(url, schema) as db:
        documents = db.info(COLLECTION).documents or 0
    found = len(acked) - len(missing) - len(other)
    return Stored(len(acked), found, missing, other, documents, preloaded + len(acked))


@dataclass
class Memory:
    """Resident memory of the serve process, in MiB."""

    start: float
    warm: float
    end: float
    peak: float
    slope: float  # MiB a minute after the warm-up (least squares), nan with too few samples
    growth: float  # the fitted line's rise from the warm-up to the end
    r2: float  # the share of the samples' variance the line explains: near 1 a steady climb, near 0 noise
    allowed: float

    @property
    def held(self) -> bool | None:
        return None if math.isnan(self.growth) else self.growth <= self.allowed


def memory(samples: list[tuple[float, int, int]], warmup: float) -> Memory:
    """The memory figures: the first sample, the first at or after the warm-up, the last, the peak,
    and the trend of those from the warm-up on."""
    t = np.array([s[0] for s in samples])
    mib = np.array([s[1] / MIB for s in samples])
    after = t >= warmup
    warm = float(mib[after][0]) if after.any() else float("nan")
    slope = growth = r2 = float("nan")
    if after.sum() >= 3:
        x, y = t[after], mib[after]
        per_s, at_0 = np.polyfit(x, y, 1)
        slope, growth = 60 * float(per_s), float(per_s) * float(x[-1] - x[0])
        spread = float(((y - y.mean()) ** 2).sum())
        r2 = 1 - float(((y - (per_s * x + at_0)) ** 2).sum()) / spread if spread else 0.0
    allowed = max(NOISE_MIB, NOISE_SHARE * warm)
    return Memory(float(mib[0]), warm, float(mib[-1]), float(mib.max()), slope, growth, r2, allowed)


def main() -> None:
    """Run the load test, write the report, exit 1 when a goal fails."""
    args = _options()
    if not DEBIAN.exists():
        raise SystemExit(f"the Debian corpus is not at {DEBIAN}")
    with contextlib.ExitStack() as stack:
        url = args.db or stack.enter_context(local_server())
        schema = stack.enter_context(bench_schema(url, "nd_bench_load"))
        docs = list(read_jsonl(DEBIAN, args.preload))
        t0 = time.perf_counter()
        with Index.create(url, COLLECTION, 0.8, schema=schema) as index:
            index.add(docs)
        load_s = time.perf_counter() - t0
        with Database(url, schema) as db:
            _, token = db.tokens.create("write", COLLECTION, "bench_load")
        log = stack.enter_context(tempfile.TemporaryFile())
        served = stack.enter_context(serving(url, schema, log=log))
        load_before = os.getloadavg()
        load = run_load(served.base, served.pid, token, docs, args)
        load_after = os.getloadavg()
        stored = verify(url, schema, load.tally.acked, len(docs))
        log.seek(0)
        server_log = log.read().decode(errors="replace").splitlines()
        report = Report()
        report.say(*header("Readers and writers at once", url, args.db is not None, level=2))
        report.say(
            f"Load average of the machine (1, 5, 15 minutes): {', '.join(f'{x:.1f}' for x in load_before)} "
            f"as the load began, {', '.join(f'{x:.1f}' for x in load_after)} as it ended.",
            "",
        )
        held = _report(report, args, load, stored, memory(load.samples, _warmup(args)), server_log, load_s)
        report.write(args.out, section="readers and writers", title=PAGE_TITLE)
    if not all(held):
        raise SystemExit(1)


def _options() -> argparse.Namespace:
    parser = options.parser(__doc__)
    options.add_db(parser)
    parser.add_argument("--seconds", type=float, default=300.0, help="length of the load (default 300)")
    parser.add_argument("--readers", type=int, default=8, help="reading threads (default 8)")
    parser.add_argument("--writers", type=int, default=2, help="writing threads (default 2)")
    parser.add_argument("--batch", type=int, default=50, help="documents a POST (default 50)")
    parser.add_argument(
        "--max-requests",
        type=int,
        default=1_000_000,
        help="requests at most, all threads (default 1,000,000)",
    )
    parser.add_argument(
        "--warmup",
        type=float,
        default=60.0,
        help="seconds before memory is expected flat (default 60, at most a third of --seconds)",
    )
    parser.add_argument(
        "--sample-seconds", type=float, default=2.0, help="memory sampled this often (default 2)"
    )
    parser.add_argument("--preload", type=int, help="Debian documents loaded first (default all)")
    parser.add_argument(
        "--steady",
        type=int,
        default=0,
        metavar="N",
        help="each writer sends ids from a pool of N, replacing its own documents once each is stored: "
        "the collection's size holds, so memory that still grows is not the data's (default 0: new ids)",
    )
    options.add_out(parser, "load.md")
    return parser.parse_args()


def _warmup(args: argparse.Namespace) -> float:
    return float(min(args.warmup, args.seconds / 3))


def _report(
    report: Report,
    args: argparse.Namespace,
    load: Load,
    stored: Stored,
    mem: Memory,
    server_log: list[str],
    load_s: float,
) -> list[bool]:
    """The report's body; returns whether each goal held."""
    tally = load.tally
    total = tally.count()
    report.say(
        f"Debian bookworm, {stored.expected - stored.acked:,} documents loaded first (in {load_s:.1f} s, "
        f"in-process), threshold 0.8. One `neardup serve` process (one uvicorn worker, log at level "
        f"warning) on 127.0.0.1; {args.readers} reader and {args.writers} writer threads in this process, "
        f"each with its own keep-alive httpx client, on the same cores as the server and the database. "
        f"Readers send queries, document GETs, pairs pages and clusters pages in the proportions "
        f"{':'.join(map(str, READ_WEIGHTS))}; writers POST {args.batch} documents at a time, "
        + (
            f"from a pool of {args.steady:,} ids each (so the collection's size holds once each is stored). "
            if args.steady
            else "all new. "
        )
        + f"The load ran {load.seconds:.1f} s (ended by {load.ended_by}; limits {args.seconds:g} s and "
        f"{args.max_requests:,} requests): {total:,} requests, {total / load.seconds:,.0f} a second. "
        "Latency is each request's wall time in the client.",
        "",
    )
    report.table(
        ["kind", "requests", "2xx", "other", "per s", "p50 ms", "p99 ms", "max ms"], "lrrrrrrr", _kinds(load)
    )
    bad = sorted((k, s, n) for (k, s), n in tally.statuses.items() if not s.startswith("2"))
    if bad:
        report.say("Answers other than 2xx, by kind and status (a name is a connection error):", "")
        report.table(["kind", "status", "count"], "llr", [(k, s, f"{n:,}") for k, s, n in bad])
    else:
        report.say("Every request was answered 2xx.", "")
    _memory_section(report, load, mem, _warmup(args))
    _documents_section(report, stored, tally)
    errors = [line for line in server_log if "Traceback" in line or "ERROR" in line]
    report.say(
        f"The server's log (level warning): {len(server_log):,} line(s), {len(errors):,} with a "
        "traceback or an error" + (":" if errors else "."),
        *(f"    {line}" for line in errors[:20]),
        "",
    )
    return _goals(report, tally, stored, mem)


def _kinds(load: Load) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for kind in ("add", *READS):
        lat = load.tally.latencies.get(kind, [])
        ok = load.tally.count(kind, lambda s: s.startswith("2"))
        rows.append(
            (
                kind,
                f"{len(lat):,}",
                f"{ok:,}",
                f"{len(lat) - ok:,}",
                f"{len(lat) / load.seconds:,.1f}",
                f"{pct(lat, 50):.2f}",
                f"{pct(lat, 99):.2f}",
                f"{max(lat, default=float('nan')):.1f}",
            )
        )
    return rows


def _memory_section(report: Report, load: Load, mem: Memory, warmup: float) -> None:
    report.say(
        f"Resident memory of the serve process (with any children), sampled every few seconds: "
        f"{mem.start:,.0f} MiB at the start (idle, before the load), {mem.warm:,.0f} MiB after the "
        f"warm-up ({warmup:.0f} s), {mem.end:,.0f} MiB at the end, {mem.peak:,.0f} MiB at most. From the "
        f"warm-up on, the least-squares slope is {mem.slope:+.2f} MiB a minute, a rise of "
        f"{mem.growth:+.1f} MiB over the rest of the run (allowed: {mem.allowed:.0f} MiB, the larger "
        f"of {NOISE_MIB:g} MiB and {NOISE_SHARE:.0%} of the memory after the warm-up); the line explains "
        f"{mem.r2:.0%} of the samples' variance (near 100%: a steady climb; near 0: noise about a flat "
        "line).",
        "",
    )
    parts = _part_slopes(load.samples, warmup, 3)
    if parts is not None:
        report.say(
            "The same slope over each third of the run after the warm-up: "
            + ", ".join(f"{p:+.2f}" for p in parts)
            + " MiB a minute (a plateau shows as slopes falling to 0; a leak as thirds alike).",
            "",
        )
    picked = load.samples[:: max(1, len(load.samples) // 12)]
    if picked[-1] is not load.samples[-1]:
        picked.append(load.samples[-1])
    rows = [(f"{t:.1f}", f"{rss / MIB:,.0f}", f"{acked:,}") for t, rss, acked in picked]
    report.table(["seconds", "RSS MiB", "documents acknowledged"], "rrr", rows)


def _part_slopes(samples: list[tuple[float, int, int]], warmup: float, parts: int) -> list[float] | None:
    """Least-squares slopes (MiB a minute) of the samples after the warm-up, in ``parts`` equal
    spans of time; None with too few samples."""
    t = np.array([s[0] for s in samples])
    mib = np.array([s[1] / MIB for s in samples])
    after = t >= warmup
    if after.sum() < 3 * parts:
        return None
    x, y = t[after], mib[after]
    edges = np.linspace(x[0], x[-1], parts + 1)
    slopes = []
    for lo, hi in itertools.pairwise(edges):
        inside = (x >= lo) & (x <= hi)
        fitted = inside.sum() >= 2
        slopes.append(60 * float(np.polyfit(x[inside], y[inside], 1)[0]) if fitted else float("nan"))
    return slopes


def _documents_section(report: Report, stored: Stored, tally: Tally) -> None:
    report.say(
        f"Documents: {stored.acked:,} acknowledged (a 200 to their POST; the answers said "
        f"{tally.said_added:,} added), {stored.found:,} of them stored with the text sent, "
        f"{len(stored.missing):,} missing, "
        f"{len(stored.other_text):,} with another text; the collection holds {stored.documents:,} documents "
        f"against {stored.expected:,} preloaded and acknowledged. Reads of acknowledged documents that "
        f"answered 404: {len(tally.unreadable):,}.",
        *([f"Missing, first ids: {', '.join(stored.missing[:10])}"] if stored.missing else []),
        "",
    )


def _goals(report: Report, tally: Tally, stored: Stored, mem: Memory) -> list[bool]:
    errors = tally.count(test=lambda s: s.startswith("5") or not s.isdigit())
    docs_ok = stored.found == stored.acked == tally.said_added and stored.documents == stored.expected
    rows = [
        ("no 5xx and no failed connection", f"{errors:,}", errors == 0),
        (
            "no memory growth after the warm-up",
            f"{mem.growth:+.1f} MiB ({mem.slope:+.2f} MiB/min), allowed {mem.allowed:.0f}",
            mem.held is not False,
        ),
        ("every acknowledged document stored", f"{stored.found:,} of {stored.acked:,}", docs_ok),
        (
            "every acknowledged document readable",
            f"{len(tally.unreadable):,} reads answered 404",
            not tally.unreadable,
        ),
    ]
    report.table(["goal", "figure", "held"], "lll", [(g, f, "yes" if ok else "**no**") for g, f, ok in rows])
    if mem.held is None:
        report.say("Too few memory samples after the warm-up to judge growth (a longer run is needed).", "")
    return [ok for _, _, ok in rows]


if __name__ == "__main__":
    main()
