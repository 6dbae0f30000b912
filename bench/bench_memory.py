"""Memory of an ingest of hot clusters: peak resident memory and time of `neardup add` and of
`neardup serve` when the documents come in clusters of near-copies.

For each N of ``--n`` (100,000 by default), three shapes of N documents:

- clusters of each ``--cluster`` size (100 and 10,000): a base text of 60 words, each copy with 2 of
  them replaced, so that two copies of a cluster are near the 0.8 threshold (the report gives the
  Jaccard of sampled pairs); document i is a copy of cluster i mod (N / size), so every batch holds
  copies of every cluster and finds copies already stored;
- the shape of issue 39: ``record {i} of the large request, topic {i%997} and {i%13}``.

Each shape goes in by the CLI (`neardup add FILE` on a JSONL file, the command's batch size unless
``--batch-size``) and over HTTP (`neardup serve` on loopback, POSTs of ``--request`` documents each,
one after the other); then ``--one-request`` documents of the issue's shape in a single POST. Each
case gets a fresh collection and, over HTTP, a fresh server process, so that its peak is its own.

The ingesting process (the CLI, or the serve process) runs with its address space limited to
``--memory-limit`` (RLIMIT_AS, inherited by any child) and is killed when it and its children
reach that much resident memory or run past ``--timeout``: such a case is reported as having
exceeded the limit or timed out, with the documents and pairs its committed transactions stored.
Peak RSS is the larger of psutil's samples (the process and its children, every 0.1 s) and the
kernel's ``ru_maxrss`` of the process. The PostgreSQL server's memory is not counted. The goal:
under 2 GiB at the default batch size, finishing. The script exits 0 whatever the figures.

    python bench/bench_memory.py [--n 100000[,1000000]] [--cluster 100,10000] [--request 20000]
        [--one-request 100000] [--only 0,3] [--memory-limit 6G] [--timeout 600] [--db URL]
        [--out docs/benchmarks/memory-hot.md]
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import io
import json
import os
import random
import resource
import signal
import socket
import statistics
import string
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import psycopg

from _common import REPO, Report, bench_schema, free_port, header, local_server, truth_shingles, warm_up
from neardup.config import DEFAULT_BATCH_SIZE
from neardup.database import Database
from neardup.storage.connect import libpq_url

THRESHOLD = 0.8
GOAL_BYTES = 2 * 2**30
WORDS = 60  # words of a cluster's base text
CHANGED = 2  # words replaced in each copy: two copies then share about 0.8 of their 5-shingles
SAMPLE_S = 0.1  # psutil's sampling interval
# What a process that ran out of address space says on its way down: Python's MemoryError,
# numpy's failed allocation, a thread that cannot get a stack, a C++ allocation in a library.
OUT_OF_MEMORY = (
    "MemoryError",
    "Unable to allocate",
    "Cannot allocate memory",
    "can't start new thread",
    "std::bad_alloc",
    "out of memory",
)


# -- the documents --------------------------------------------------------------------------------


def _vocabulary(rng: random.Random, size: int = 5000) -> list[str]:
    return ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 9))) for _ in range(size)]


def cluster_texts(n: int, size: int, seed: int = 1) -> Iterator[str]:
    """n texts in clusters of ``size`` near-copies (the last cluster may be short); text i is a
    copy of cluster i mod the number of clusters."""
    rng = random.Random(seed)
    vocab = _vocabulary(rng)
    count = max(1, -(-n // size))
    bases = [rng.choices(vocab, k=WORDS) for _ in range(count)]
    for i in range(n):
        words = list(bases[i % count])
        for position in rng.sample(range(WORDS), CHANGED):
            words[position] = rng.choice(vocab)
        yield " ".join(words)


def issue_texts(n: int) -> Iterator[str]:
    """The texts of issue 39's request that grew the server past 20 GB."""
    for i in range(n):
        yield f"record {i} of the large request, topic {i % 997} and {i % 13}"


@dataclass(frozen=True)
class Shape:
    """One way of making n documents: its name in the report and its texts."""

    name: str
    cluster: int | None  # None: the issue's shape

    def texts(self, n: int) -> Iterator[str]:
        return issue_texts(n) if self.cluster is None else cluster_texts(n, self.cluster)


def jaccard_sample(shape: Shape, n: int, pairs: int = 300) -> tuple[float, float, float]:
    """(lowest, median, highest) Jaccard of the benchmark's 5-shingles over ``pairs`` random pairs
    of texts in one cluster (for the issue's shape: of texts with the same topic numbers)."""
    texts = list(shape.texts(min(n, 200_000)))
    step = 997 * 13 if shape.cluster is None else max(1, -(-n // shape.cluster))
    rng = random.Random(2)
    found = []
    for _ in range(pairs):
        a = rng.randrange(min(step, len(texts)))
        members = range(a, len(texts), step)
        if len(members) < 2:
            continue
        i, j = rng.sample(members, 2)
        x, y = truth_shingles(texts[i]), truth_shingles(texts[j])
        found.append(len(x & y) / len(x | y))
    if not found:
        nan = float("nan")
        return nan, nan, nan
    return min(found), statistics.median(found), max(found)


# -- one ingesting process under limits -----------------------------------------------------------


@dataclass
class Outcome:
    """What became of one case."""

    seconds: float = 0.0
    peak_rss: int = 0
    peak_vms: int = 0
    status: str = "finished"  # or "exceeded ...", "timed out", "failed: ..."
    documents: int | None = None
    pairs: int | None = None
    notes: list[str] = field(default_factory=list)
    load: float = float("nan")  # the machine's 1-minute load average as the case ended


def limited(limit: int) -> Callable[[], None]:
    """A preexec_fn that caps the child's address space at ``limit`` bytes: it and every process it
    starts get MemoryError (or die) there instead of taking the machine."""

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return cap


def _tree_memory(proc: psutil.Process) -> tuple[int, int]:
    """(RSS, largest VMS) of a process and its children, bytes; zeros once it is gone."""
    rss = vms = 0
    with contextlib.suppress(psutil.Error):
        for p in [proc, *proc.children(recursive=True)]:
            with contextlib.suppress(psutil.Error):
                info = p.memory_info()
                rss += info.rss
                vms = max(vms, info.vms)
    return rss, vms


class Watched:
    """A process started in its own session under the memory limit, sampled until it ends or is
    stopped; ``stop`` kills its whole process group (it and any children it started)."""

    def __init__(self, argv: list[str], limit: int, log: Path) -> None:
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")])),
        }
        with log.open("wb") as err:
            self.proc = subprocess.Popen(
                argv,
                stdout=subprocess.DEVNULL,
                stderr=err,
                env=env,
                start_new_session=True,
                preexec_fn=limited(limit),
            )
        self.ps = psutil.Process(self.proc.pid)
        self.limit = limit
        self.log = log
        self.peak_rss = self.peak_vms = 0
        self.returncode: int | None = None
        self.over = False

    def sample(self) -> bool:
        """Take one sample; True while the process runs (and is under the limit: one that reaches
        it with its children is killed here)."""
        if self.returncode is not None:
            return False
        pid, status, usage = os.wait4(self.proc.pid, os.WNOHANG)
        if pid:
            self.returncode = os.waitstatus_to_exitcode(status)
            self.proc.returncode = self.returncode
            self.peak_rss = max(self.peak_rss, usage.ru_maxrss * 1024)  # KiB on Linux
            return False
        rss, vms = _tree_memory(self.ps)
        self.peak_rss, self.peak_vms = max(self.peak_rss, rss), max(self.peak_vms, vms)
        if rss >= self.limit:
            self.over = True
            self.stop()
            return False
        return True

    def stop(self) -> None:
        """Kill the process group and reap the process (its peak from the kernel included)."""
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            _, status, usage = os.wait4(self.proc.pid, 0)
            self.returncode = os.waitstatus_to_exitcode(status)
            self.proc.returncode = self.returncode
            self.peak_rss = max(self.peak_rss, usage.ru_maxrss * 1024)

    def said(self) -> str:
        """The last line the process wrote to stderr."""
        lines = self.log.read_text(errors="replace").strip().splitlines()
        return lines[-1] if lines else ""

    def out_of_memory(self) -> bool:
        """Whether it reached the limit: killed here at it, or it said it ran out of memory."""
        text = self.log.read_text(errors="replace")
        return self.over or any(sign in text for sign in OUT_OF_MEMORY)


def gib(n: int) -> str:
    return f"{n / 2**30:g} GiB"


# -- the two ways in ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Setup:
    """What every case shares."""

    url: str
    schema: str
    secret: str
    tmp: Path
    limit: int
    timeout: float
    batch_size: int | None


def _neardup(setup: Setup) -> list[str]:
    return [sys.executable, "-m", "neardup", "--db", setup.url, "--schema", setup.schema]


def by_cli(setup: Setup, collection: str, texts: Iterator[str]) -> Outcome:
    """`neardup add` of the texts written to a JSONL file, under the limits."""
    path = setup.tmp / f"{collection}.jsonl"
    with path.open("w") as f:
        for i, text in enumerate(texts):
            f.write(json.dumps({"id": str(i), "text": text}) + "\n")
    argv = [*_neardup(setup), "--collection", collection, "add", str(path)]
    argv += [] if setup.batch_size is None else ["--batch-size", str(setup.batch_size)]
    out = Outcome()
    t0 = time.perf_counter()
    watched = Watched(argv, setup.limit, setup.tmp / f"{collection}.log")
    deadline = t0 + setup.timeout
    while watched.sample():
        if time.perf_counter() > deadline:
            watched.stop()
            out.status = "timed out"
            break
        time.sleep(SAMPLE_S)
    out.seconds = time.perf_counter() - t0
    path.unlink()
    return _ended(out, watched)


def _ended(out: Outcome, watched: Watched, *, exits: bool = True) -> Outcome:
    """The outcome's status and peaks from how the process ended (``exits``: it was to end by
    itself, as the CLI does; the server is stopped here)."""
    out.peak_rss, out.peak_vms = watched.peak_rss, watched.peak_vms
    if out.status != "timed out" and watched.out_of_memory():
        out.status = f"exceeded {gib(watched.limit)}"
    elif exits and out.status == "finished" and watched.returncode not in (0, None):
        out.status = f"failed: exit {watched.returncode}"
    said = watched.said()
    if out.status != "finished" and said:
        out.notes.append(said[:300])
    return out


class Client:
    """A keep-alive HTTP/1.1 client from the standard library, one request at a time."""

    def __init__(self, port: int, secret: str, timeout: float) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        self.conn.connect()
        if self.conn.sock is not None:  # the body is sent apart from the headers: no delayed ACK
            self.conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.headers = {"Authorization": f"Bearer {secret}", "Content-Type": "application/json"}

    def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        self.conn.request("POST", path, body, self.headers)
        response = self.conn.getresponse()
        return response.status, response.read()


def _healthy(port: int, watched: Watched, deadline: float) -> bool:
    """Wait for /healthz to answer 200; False if the server ends or the deadline passes first."""
    while time.perf_counter() < deadline and watched.sample():
        with contextlib.suppress(OSError, http.client.HTTPException):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/healthz")
            if conn.getresponse().status == 200:
                return True
        time.sleep(0.2)
    return False


def _bodies(texts: Iterator[str], per_request: int) -> Iterator[bytes]:
    batch: list[dict[str, str]] = []
    for i, text in enumerate(texts):
        batch.append({"id": str(i), "text": text})
        if len(batch) == per_request:
            yield json.dumps(batch).encode()
            batch = []
    if batch:
        yield json.dumps(batch).encode()


def by_http(setup: Setup, collection: str, texts: Iterator[str], per_request: int) -> Outcome:
    """POSTs of ``per_request`` documents each to a fresh `neardup serve`, under the limits; the
    serve process's memory from its start (its idle size included) to the last answer."""
    port = free_port()
    argv = [*_neardup(setup), "serve", "--port", str(port), "--log-level", "warning"]
    bodies = list(_bodies(texts, per_request))
    out = Outcome()
    watched = Watched(argv, setup.limit, setup.tmp / f"{collection}.log")
    try:
        if not _healthy(port, watched, time.perf_counter() + 120):
            out.status = "failed: the server did not start"
            watched.stop()
            return _ended(out, watched)
        t0 = time.perf_counter()
        answers: list[tuple[int, bytes]] = []
        sender = threading.Thread(target=_send, args=(port, setup, collection, bodies, answers), daemon=True)
        sender.start()
        while sender.is_alive() and watched.sample():
            if time.perf_counter() > t0 + setup.timeout:
                out.status = "timed out"
                break
            sender.join(SAMPLE_S)
        out.seconds = time.perf_counter() - t0
        watched.sample()
        bad = [(s, b) for s, b in answers if s != 200]
        if out.status == "finished" and (bad or len(answers) < len(bodies)):
            out.status = "failed: " + (f"HTTP {bad[0][0]}" if bad else "no answer")
            out.notes += [f"HTTP {s}: {b[:200].decode(errors='replace')}" for s, b in bad[:1]]
    finally:
        watched.stop()  # its peak from the kernel comes with the reaping
    return _ended(out, watched, exits=False)


def _send(
    port: int, setup: Setup, collection: str, bodies: list[bytes], answers: list[tuple[int, bytes]]
) -> None:
    """POST the bodies in turn until one fails (the answers so far in ``answers``)."""
    path = f"/v1/collections/{collection}/documents"
    try:
        client = Client(port, setup.secret, setup.timeout + 60)
        for body in bodies:
            answers.append(client.post(path, body))
            if answers[-1][0] != 200:
                return
    except (OSError, http.client.HTTPException) as exc:
        answers.append((0, f"{type(exc).__name__}: {exc}".encode()))


# -- the cases ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One ingest: n documents of a shape, by the CLI or over HTTP (``per_request`` documents a POST)."""

    n: int
    shape: Shape
    per_request: int | None  # None: the CLI

    @property
    def way(self) -> str:
        if self.per_request is None:
            return "CLI `neardup add`"
        return f"HTTP, {self.per_request:,} a request" if self.per_request < self.n else "HTTP, one request"


def cases(ns: Sequence[int], clusters: Sequence[int], per_request: int, one_request: int) -> list[Case]:
    """Each N's shapes by the CLI and over HTTP, then the issue's one large request."""
    shapes = [Shape(f"clusters of {size:,}", size) for size in clusters]
    shapes.append(Shape("issue 39's records", None))
    out = [Case(n, s, way) for n in ns for way in (None, per_request) for s in shapes]
    if one_request:
        out.append(Case(one_request, shapes[-1], one_request))
    return out


def _stop_backends(url: str) -> None:
    """End the database sessions a killed process left busy (a query still running for it, a
    transaction holding the collection's lock), so that the counts and the next case do not wait on
    them; idle sessions (this script's own pool) stay. The server is this run's own."""
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND backend_type = 'client backend' "
            "AND state IS DISTINCT FROM 'idle'"
        )


def run_case(setup: Setup, db: Database, number: int, case: Case) -> Outcome:
    """One case in a fresh collection, with what it stored counted afterwards."""
    name = f"case{number}"
    with db.create(name, THRESHOLD):
        pass
    texts = case.shape.texts(case.n)
    if case.per_request is None:
        out = by_cli(setup, name, texts)
    else:
        out = by_http(setup, name, texts, case.per_request)
    if out.status != "finished":
        _stop_backends(setup.url)
    info = db.info(name)
    out.documents, out.pairs = info.documents, info.pairs
    db.drop(name)  # its pairs can be many: the disk is for the next case
    return out


# -- the report -----------------------------------------------------------------------------------


def mib(n: int) -> str:
    return f"{n / 2**20:,.0f}"


def _count(n: int | None) -> str:
    return "?" if n is None else f"{n:,}"


def goal_met(out: Outcome) -> bool:
    return out.status == "finished" and out.peak_rss < GOAL_BYTES


def table_rows(done: Sequence[tuple[Case, Outcome]]) -> list[list[str]]:
    return [
        [
            f"{case.n:,}",
            case.shape.name,
            case.way,
            f"{out.seconds:,.1f}",
            mib(out.peak_rss),
            mib(out.peak_vms),
            _count(out.documents),
            _count(out.pairs),
            "" if not out.pairs or not out.seconds else f"{out.pairs / out.seconds:,.0f}",
            f"{out.load:.1f}",
            out.status,
            "yes" if goal_met(out) else "**no**",
        ]
        for case, out in done
    ]


def write_report(
    args: argparse.Namespace,
    url: str,
    done: Sequence[tuple[Case, Outcome]],
    similar: list[str],
    left: Sequence[Case] = (),
) -> None:
    """The markdown report, echoed with the failed goals once every case has run; written quietly
    after each case before that (``left``: the cases still to run), so that a run cut short
    leaves the figures it has."""
    if left:
        with contextlib.redirect_stdout(io.StringIO()):
            _report(args, url, done, similar, left).write(args.out)
        return
    _report(args, url, done, similar, left).write(args.out)
    for case, out in done:
        if not goal_met(out):
            print(
                f"GOAL FAILED: N {case.n:,}, {case.shape.name}, {case.way}: {out.status}, "
                f"peak RSS {mib(out.peak_rss)} MiB",
                file=sys.stderr,
            )


def _report(
    args: argparse.Namespace,
    url: str,
    done: Sequence[tuple[Case, Outcome]],
    similar: list[str],
    left: Sequence[Case],
) -> Report:
    report = Report()
    batch = f"{args.batch_size:,}" if args.batch_size else f"{DEFAULT_BATCH_SIZE:,} (the default)"
    report.say(*header("Memory of an ingest of hot clusters", url, args.db is not None))
    report.say(
        f"Each case adds N documents to a fresh collection at threshold {THRESHOLD}: by the CLI "
        f"(`neardup add FILE`, batch size {batch}) or over HTTP (a fresh `neardup serve`, one "
        "uvicorn worker, POSTs sent one after the other; a request is one batch). Clusters: a base "
        f"text of {WORDS} random words, each copy with {CHANGED} of them replaced, document i a copy "
        "of cluster i mod the number of clusters. Issue 39's records: `record {i} of the large "
        "request, topic {i%997} and {i%13}`.",
        "",
        f"The ingesting process runs with its address space limited to {gib(args.memory_limit)} "
        f"(RLIMIT_AS) and is killed at {gib(args.memory_limit)} of resident memory (with its "
        f"children) or after {args.timeout:,.0f} s. Peak RSS: the larger of psutil's samples every "
        f"{SAMPLE_S} s (the process and its children) and the kernel's `ru_maxrss`; for HTTP it "
        "includes the idle server. Peak VMS: the largest address space of one of its processes. "
        "Documents and pairs: what the case's committed transactions stored. The PostgreSQL "
        "server's memory is not counted. Load: the machine's 1-minute load average as the case "
        f"ended (its {os.cpu_count()} cores are shared with other work; seconds stretch with it).",
        "",
        "Jaccard of sampled pairs of one cluster (the benchmark's 5-shingles; for the issue's "
        "records, pairs with the same topic numbers), lowest / median / highest: " + "; ".join(similar) + ".",
        "",
    )
    report.table(
        [
            "N",
            "shape",
            "how",
            "seconds",
            "peak RSS MiB",
            "peak VMS MiB",
            "documents",
            "pairs",
            "pairs a second",
            "load",
            "ended",
            "goal < 2 GiB",
        ],
        "lllrrrrrrrll",
        table_rows(done),
    )
    notes = [
        f"- {case.way}, {case.shape.name}, N {case.n:,}: {note}" for case, out in done for note in out.notes
    ]
    if notes:
        report.say("What the processes that did not finish said last:", "", *notes, "")
    if left:
        report.say(
            "Not run yet (the run was stopped before them): "
            + "; ".join(f"{c.way}, {c.shape.name}, N {c.n:,}" for c in left)
            + ".",
            "",
        )
    failed = [(case, out) for case, out in done if not goal_met(out)]
    report.say(
        f"Goal (under 2 GiB at the default batch size, finishing): met by {len(done) - len(failed)} of "
        f"{len(done)} cases."
    )
    return report


def size(text: str) -> int:
    """Bytes from '6G', '512M', '6GB' or a plain number (binary units)."""
    units = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
    t = text.strip().upper().removesuffix("IB").removesuffix("B")
    if t and t[-1] in units:
        return int(float(t[:-1]) * units[t[-1]])
    return int(t)


def numbers(text: str) -> list[int]:
    return [int(part.replace("_", "")) for part in text.split(",") if part.strip()]


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--n", type=numbers, default=[100_000], help="documents a case, comma-separated (default 100000)"
    )
    ap.add_argument(
        "--cluster", type=numbers, default=[100, 10_000], help="cluster sizes (default 100,10000)"
    )
    ap.add_argument("--request", type=int, default=20_000, help="documents a POST (default 20000)")
    ap.add_argument(
        "--one-request", type=int, default=100_000, help="issue records in one POST (default 100000; 0: none)"
    )
    ap.add_argument(
        "--only", type=numbers, help="run only these cases, numbered from 0 in the order listed above"
    )
    ap.add_argument("--batch-size", type=int, help="neardup add --batch-size (default: the command's own)")
    ap.add_argument(
        "--memory-limit", type=size, default=size("6G"), help="address space and RSS limit (default 6G)"
    )
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds a case may run (default 600)")
    ap.add_argument("--db", help="PostgreSQL URL (default: a durable local server made for the run)")
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "benchmarks" / "memory-hot.md")
    return ap.parse_args()


def main() -> None:
    """Run every case and write the report; exits 0 whatever the figures."""
    args = parse_args()
    todo = cases(args.n, args.cluster, args.request, args.one_request)
    if args.only:
        todo = [case for number, case in enumerate(todo) if number in args.only]
    shapes = {case.shape: case.n for case in todo}
    similar = [
        f"{shape.name} " + " / ".join(f"{j:.2f}" for j in jaccard_sample(shape, n))
        for shape, n in shapes.items()
    ]
    with contextlib.ExitStack() as stack:
        url = args.db or stack.enter_context(local_server())
        schema = stack.enter_context(bench_schema(url, "nd_bench_memory"))
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="nd-memory-", dir="/var/tmp")))
        # The compiled kernels' cache filled once, so that the first case is not charged with it.
        warm_up(url, schema)
        db = stack.enter_context(Database(url, schema, pool_size=1))
        _, secret = db.tokens.create("write", name="bench_memory")
        setup = Setup(url, schema, secret, tmp, args.memory_limit, args.timeout, args.batch_size)
        done: list[tuple[Case, Outcome]] = []
        for number, case in enumerate(todo):
            print(f"{case.way}, {case.shape.name}, N {case.n:,} ...", file=sys.stderr, flush=True)
            out = run_case(setup, db, number, case)
            out.load = os.getloadavg()[0]
            print(
                f"  {out.status} in {out.seconds:,.1f} s, peak RSS {mib(out.peak_rss)} MiB, "
                f"{_count(out.documents)} documents, {_count(out.pairs)} pairs",
                file=sys.stderr,
                flush=True,
            )
            done.append((case, out))
            write_report(args, url, done, similar, todo[number + 1 :])


if __name__ == "__main__":
    main()
