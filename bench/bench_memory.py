"""The ingest's memory: peak resident memory and time of `neardup add` and of `neardup serve` when
the documents come in clusters of near-copies, and of `neardup add` of a make_corpus.py corpus.

For each N of ``--n`` (100,000 by default), three shapes of N documents:

- clusters of each ``--cluster`` size (100 and 10,000): a base text of 60 words, each copy with 2 of
  them replaced, so that two copies of a cluster are near the 0.8 threshold (the report gives the
  Jaccard of sampled pairs); document i is a copy of cluster i mod (N / size), so every batch holds
  copies of every cluster and finds copies already stored;
- the shape of issue 39: ``record {i} of the large request, topic {i%997} and {i%13}``.

Each shape goes in by the CLI (`neardup add FILE` on a JSONL file, the command's batch size unless
``--batch-size``) and over HTTP (`neardup serve` on loopback, POSTs of ``--request`` documents each,
one after the other); then ``--one-request`` documents of the issue's shape in a single POST; then,
with ``--synthetic PATH``, the first ``--synthetic-n`` documents of a make_corpus.py corpus (used if
present, else made there) by the CLI, its memory drawn against the documents read so far (from the
process's offset in the file) in ``memory.png`` beside the report. Each case gets a fresh
collection and, over HTTP, a fresh server process, so that its peak is its own.

The ingesting process (the CLI, or the serve process) runs with its address space limited to
``--memory-limit`` (RLIMIT_AS, inherited by any child) and is killed when it and its children
reach that much resident memory or run past ``--timeout``: such a case is reported as having
exceeded the limit or timed out, with the documents and pairs its committed transactions stored.
Peak RSS is the larger of psutil's samples (the process and its children, every 0.1 s) and the
kernel's ``ru_maxrss`` of the process. The PostgreSQL server's memory is not counted (its shared
buffers show up in the RSS of every backend that touches them, so a sum would mislead). The goal:
under 2 GiB at the default batch size, finishing. The script exits 0 whatever the figures.

    python bench/bench_memory.py [--n 100000[,1000000]] [--cluster 100,10000] [--request 20000]
        [--one-request 100000] [--synthetic /tmp/synth1m.jsonl [--synthetic-n 1000000]] [--only 0,3]
        [--memory-limit 6G] [--timeout 600] [--db URL] [--out docs/benchmarks/memory.md]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import http.client
import io
import json
import os
import random
import resource
import signal
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

import psycopg

from _common import (
    Client,
    Report,
    child_env,
    count_formatter,
    database,
    free_port,
    header,
    healthy,
    mib,
    neardup_command,
    pyplot,
    serve_command,
    synthetic_corpus,
    tree_memory,
    truth_shingles,
)
from _options import add_db, add_out, numbers, parser, size
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
    cluster: int | None  # None: the issue's shape, or the corpus
    corpus: Path | None = None  # a make_corpus.py file of exactly the documents added

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
    samples: list[tuple[float, int]] = field(default_factory=list)  # (seconds, RSS) of the process
    read: list[float] = field(default_factory=list)  # documents read at each sample, by the CLI


def limited(limit: int) -> Callable[[], None]:
    """A preexec_fn that caps the child's address space at ``limit`` bytes: it and every process it
    starts get MemoryError (or die) there instead of taking the machine."""

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return cap


class Watched:
    """A process started in its own session under the memory limit, sampled until it ends or is
    stopped; ``stop`` kills its whole process group (it and any children it started)."""

    def __init__(self, argv: list[str], limit: int, log: Path) -> None:
        with log.open("wb") as err:
            self.proc = subprocess.Popen(
                argv,
                stdout=subprocess.DEVNULL,
                stderr=err,
                env=child_env(),
                start_new_session=True,
                preexec_fn=limited(limit),
            )
        self.started = time.perf_counter()
        self.limit = limit
        self.log = log
        self.peak_rss = self.peak_vms = 0
        self.samples: list[tuple[float, int]] = []  # (seconds since the start, RSS with its children)
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
        rss, vms = tree_memory(self.proc.pid)
        self.samples.append((time.perf_counter() - self.started, rss))
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


def jsonl_file(setup: Setup, collection: str, texts: Iterator[str]) -> Path:
    """The texts as a JSONL file for `neardup add`, ids their positions."""
    path = setup.tmp / f"{collection}.jsonl"
    with path.open("w") as f:
        for i, text in enumerate(texts):
            f.write(json.dumps({"id": str(i), "text": text}) + "\n")
    return path


def by_cli(setup: Setup, collection: str, path: Path, n: int) -> Outcome:
    """`neardup add` of the n documents of a JSONL file, under the limits; with each sample, the
    documents read so far, from the process's offset in the file (``Outcome.read``)."""
    argv = [*neardup_command(setup.url, setup.schema), "--collection", collection, "add", str(path)]
    argv += [] if setup.batch_size is None else ["--batch-size", str(setup.batch_size)]
    out = Outcome()
    t0 = time.perf_counter()
    watched = Watched(argv, setup.limit, setup.tmp / f"{collection}.log")
    deadline = t0 + setup.timeout
    file_bytes, docs = path.stat().st_size, 0.0
    while watched.sample():
        offset = _read_offset(watched.proc.pid, path)
        docs = n * offset / file_bytes if offset is not None else docs
        out.read.append(docs)
        if time.perf_counter() > deadline:
            watched.stop()
            out.status = "timed out"
            break
        time.sleep(SAMPLE_S)
    out.seconds = time.perf_counter() - t0
    return _ended(out, watched)


def _read_offset(pid: int, path: Path) -> int | None:
    """Where process pid's open file descriptor on path is, or None."""
    target = str(path.resolve())
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                    for line in Path(f"/proc/{pid}/fdinfo/{fd}").read_text().splitlines():
                        if line.startswith("pos:"):
                            return int(line.split()[1])
    except OSError:
        pass
    return None


def _ended(out: Outcome, watched: Watched, *, exits: bool = True) -> Outcome:
    """The outcome's status and peaks from how the process ended (``exits``: it was to end by
    itself, as the CLI does; the server is stopped here)."""
    out.peak_rss, out.peak_vms = watched.peak_rss, watched.peak_vms
    out.samples = watched.samples
    if out.status != "timed out" and watched.out_of_memory():
        out.status = f"exceeded {gib(watched.limit)}"
    elif exits and out.status == "finished" and watched.returncode not in (0, None):
        out.status = f"failed: exit {watched.returncode}"
    said = watched.said()
    if out.status != "finished" and said:
        out.notes.append(said[:300])
    return out


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
    bodies = list(_bodies(texts, per_request))
    out = Outcome()
    watched = Watched(
        serve_command(setup.url, setup.schema, port), setup.limit, setup.tmp / f"{collection}.log"
    )
    try:
        if not healthy(f"http://127.0.0.1:{port}", watched.sample):
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
        client = Client(f"http://127.0.0.1:{port}", setup.secret, setup.timeout + 60)
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


def cases(
    ns: Sequence[int],
    clusters: Sequence[int],
    per_request: int,
    one_request: int,
    corpus: Path | None = None,
    corpus_n: int = 0,
) -> list[Case]:
    """Each N's shapes by the CLI and over HTTP, then the issue's one large request, then the
    corpus by the CLI."""
    shapes = [Shape(f"clusters of {size:,}", size) for size in clusters]
    shapes.append(Shape("issue 39's records", None))
    out = [Case(n, s, way) for n in ns for way in (None, per_request) for s in shapes]
    if one_request:
        out.append(Case(one_request, shapes[-1], one_request))
    if corpus is not None:
        out.append(Case(corpus_n, Shape("make_corpus.py corpus", None, corpus), None))
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
    if case.per_request is not None:
        out = by_http(setup, name, case.shape.texts(case.n), case.per_request)
    elif case.shape.corpus is not None:
        out = by_cli(setup, name, case.shape.corpus, case.n)
    else:
        path = jsonl_file(setup, name, case.shape.texts(case.n))
        out = by_cli(setup, name, path, case.n)
        path.unlink()
    if out.status != "finished":
        _stop_backends(setup.url)
    info = db.info(name)
    out.documents, out.pairs = info.documents, info.pairs
    db.drop(name)  # its pairs can be many: the disk is for the next case
    return out


# -- the report -----------------------------------------------------------------------------------


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
    notes: Sequence[str] = (),
) -> None:
    """The markdown report (and the corpus's plot), echoed with the failed goals once every case
    has run; written quietly after each case before that (``left``: the cases still to run), so
    that a run cut short leaves the figures it has."""
    for case, out in done:
        if case.shape.corpus is not None:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            plot_memory(out, case.n, args.out.parent / "memory.png")
    if left:
        with contextlib.redirect_stdout(io.StringIO()):
            _report(args, url, done, similar, left, notes).write(args.out)
        return
    _report(args, url, done, similar, left, notes).write(args.out)
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
    notes: Sequence[str],
) -> Report:
    report = Report()
    batch = f"{args.batch_size:,}" if args.batch_size else f"{DEFAULT_BATCH_SIZE:,} (the default)"
    report.say(*header("The ingest's memory", url, args.db is not None, notes))
    report.say(
        f"Each case adds N documents to a fresh collection at threshold {THRESHOLD}: by the CLI "
        f"(`neardup add FILE`, batch size {batch}) or over HTTP (a fresh `neardup serve`, one "
        "uvicorn worker, POSTs sent one after the other; a request is one batch). Clusters: a base "
        f"text of {WORDS} random words, each copy with {CHANGED} of them replaced, document i a copy "
        "of cluster i mod the number of clusters. Issue 39's records: `record {i} of the large "
        "request, topic {i%997} and {i%13}`. The make_corpus.py corpus: ~1.5 KB documents, ~10% "
        "near-copies.",
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
    said = [
        f"- {case.way}, {case.shape.name}, N {case.n:,}: {note}" for case, out in done for note in out.notes
    ]
    if said:
        report.say("What the processes that did not finish said last:", "", *said, "")
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
    for case, out in done:
        if case.shape.corpus is not None:
            corpus_section(report, case, out)
    return report


def corpus_section(report: Report, case: Case, out: Outcome) -> None:
    """The corpus's memory as `neardup add` read it: the peak in each quarter of the documents."""
    read = list(zip(out.samples, out.read, strict=False))
    quarter = [
        max((rss for (_, rss), docs in read if lo * case.n <= docs < hi * case.n and rss), default=None)
        for lo, hi in ((0, 0.25), (0.25, 0.5), (0.5, 0.75), (0.75, 1.01))
    ]
    report.say("", f"## {case.n:,} documents of a make_corpus.py corpus by `neardup add`", "")
    report.table(
        [
            "documents",
            "seconds",
            "docs/s",
            "peak RSS MiB",
            "peak sampled RSS MiB, by quarter of the documents read",
        ],
        "rrrrr",
        [
            [
                f"{case.n:,}",
                f"{out.seconds:.1f}",
                f"{case.n / out.seconds:,.0f}",
                mib(out.peak_rss),
                " / ".join("-" if q is None else mib(q) for q in quarter),
            ]
        ],
    )
    report.say(
        f"Its resident memory (with any children) sampled every {SAMPLE_S} s, {len(out.samples):,} "
        "samples, against the documents read so far (from its offset in the file).",
        "",
        "![RSS of the ingest process against documents read](memory.png)",
    )


def plot_memory(out: Outcome, n: int, path: Path) -> None:
    """The process's RSS over time, with the documents read, into a PNG."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8.5, 4.2))
    live = [(t, rss) for t, rss in out.samples if rss]  # none once the process has gone
    ax.plot([t for t, _ in live], [rss / 2**20 for _, rss in live], color="#1f6fb4", linewidth=1.2)
    ax.axhline(out.peak_rss / 2**20, color="#1f6fb4", linestyle=":", linewidth=1)
    ax.text(0, out.peak_rss / 2**20, f" peak {mib(out.peak_rss)} MiB", va="bottom", fontsize=8)
    ax.set_xlim(0, max(out.seconds, 1e-9))
    ax.set_ylim(0, out.peak_rss / 2**20 * 1.25 or 1)
    ax.set_xlabel("seconds")
    ax.set_ylabel("resident memory of the client, MiB", color="#1f6fb4")
    docs = ax.twinx()
    times = [t for t, _ in out.samples][: len(out.read)]
    docs.plot(times, out.read[: len(times)], color="#e8842a", linewidth=1)
    docs.set_ylim(0, n * 1.05)
    docs.yaxis.set_major_formatter(count_formatter())
    docs.set_ylabel("documents read (from the file offset)", color="#e8842a")
    ax.set_title(f"neardup add of {n:,} documents in {out.seconds:.0f} s", fontsize=10)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def parse_args() -> argparse.Namespace:
    ap = parser(__doc__)
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
    ap.add_argument("--synthetic", type=Path, help="a make_corpus.py JSONL: used if present, else made there")
    ap.add_argument(
        "--synthetic-n", type=int, default=1_000_000, help="documents of it added (default 1,000,000)"
    )
    ap.add_argument(
        "--only", type=numbers, help="run only these cases, numbered from 0 in the order listed above"
    )
    ap.add_argument("--batch-size", type=int, help="neardup add --batch-size (default: the command's own)")
    ap.add_argument(
        "--memory-limit", type=size, default=size("6G"), help="address space and RSS limit (default 6G)"
    )
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds a case may run (default 600)")
    add_db(ap)
    add_out(ap, "memory.md")
    return ap.parse_args()


def main() -> None:
    """Run every case and write the report; exits 0 whatever the figures."""
    args = parse_args()
    todo = cases(args.n, args.cluster, args.request, args.one_request, args.synthetic, args.synthetic_n)
    if args.only:
        todo = [case for number, case in enumerate(todo) if number in args.only]
    shapes = {case.shape: case.n for case in todo if case.shape.corpus is None}
    similar = [
        f"{shape.name} " + " / ".join(f"{j:.2f}" for j in jaccard_sample(shape, n))
        for shape, n in shapes.items()
    ]
    notes: list[str] = []
    with contextlib.ExitStack() as stack:
        for k, case in enumerate(todo):
            if case.shape.corpus is not None:
                path, made = stack.enter_context(synthetic_corpus(case.shape.corpus, case.n))
                todo[k] = dataclasses.replace(case, shape=dataclasses.replace(case.shape, corpus=path))
                notes.append(f"Corpus: {made}")
        # The compiled kernels' cache filled once, so that the first case is not charged with it.
        url, schema = stack.enter_context(database(args.db, "nd_bench_memory", warm={}))
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="nd-memory-", dir="/var/tmp")))
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
            write_report(args, url, done, similar, todo[number + 1 :], notes)


if __name__ == "__main__":
    main()
