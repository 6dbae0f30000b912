"""Cost by shape: the same number of documents in clusters of 10 and in clusters of thousands
(near-copies), and in heavy-tailed (Zipf-like) cluster sizes: ingest time, documents a second,
stored pairs, bytes on disk and the ingest's peak resident memory, beside the code before dense
clusters (a checkout of ``--baseline-ref``) where it finishes within ``--timeout``.

Every document is 60 words from a vocabulary of 5,000 random words; a cluster is a base text and
its copies, each copy the base with one word replaced (J about 0.88 among copies, threshold 0.8).
Each case runs in a process of its own (its peak is its own, from the kernel's ``ru_maxrss``) in a
fresh collection. The parts:

- ``table``: ``--n`` documents (10,000) in clusters of each of ``--sizes`` (10, 1,000, 2,500), one
  ``Index.add``, this code and the baseline's;
- ``pair``: ``--pair-n`` documents (100,000) in clusters of ``--pair-size`` (10,000) against
  clusters of 10 (goals: at most 3x the time and 2x the bytes);
- ``zipf``: ``--zipf-n`` documents (1,000,000) with cluster sizes ``largest // rank`` (the largest
  ``--largest``, 100,000; the tail singletons) against clusters of 10 (goal: at most 2x the time,
  peak under 2 GiB at the default batch size), then ``--daily`` batches of ``--daily-n`` documents
  of the same shape into it (their rate);
- ``ways``: the zipf corpus by ``neardup add``, over HTTP (``neardup serve``, requests of
  ``--request`` documents), with ``--jobs 2`` and by ``rebuild`` (a re-band of the collection);
- ``template``: ``--template-n`` (100,000) short records of one template (issue 39's shape: nearly
  every pair a candidate, few a pair) added three times into one collection, each add a process
  of its own, this code's and the baseline's (in a collection of its own) in turn: their peaks
  (goal: each where the first was);
- ``query``: p50 and p99 of ``query`` and of ``check`` (``--limit``) at the zipf collection, for
  texts that match its largest cluster and for texts of the tail.

    python bench/bench_shape.py [--parts table,pair,zipf,ways,template,query] [--n 10000]
        [--sizes 10,1000,2500] [--baseline-ref main] [--timeout 1800] [--db URL]
        [--out docs/benchmarks/shape.md]

A small run that proves the script: ``--parts table,pair,zipf,ways,template,query --n 2000
--sizes 10,500 --pair-n 4000 --pair-size 1000 --zipf-n 20000 --largest 2000 --daily 2 --daily-n
1000 --template-n 3000 --out /tmp/shape.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import string
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import _options as options
from _common import REPO, Report, bench_schema, drop_schema, header, local_server, pct, serving

WORDS_PER_DOC = 60
VOCABULARY = 5_000
THRESHOLD = 0.8


# -- corpora ------------------------------------------------------------------------------------


def _vocabulary(seed: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 9))) for _ in range(VOCABULARY)]


def clustered(
    sizes: list[int], seed: int, prefix: str = "d", copies: int | None = None
) -> Iterator[tuple[str, str]]:
    """Documents in clusters of the given sizes, each cluster a base text and near-copies of it
    (the base with one word replaced), cluster by cluster, interleaved by a seeded shuffle of
    positions within windows of 50,000 (so that a batch holds parts of many clusters). The bases
    follow ``seed``, the copies ``copies`` (default: ``seed``): other copies of the same bases."""
    vocab = _vocabulary(seed)
    bases = random.Random(seed + 1)
    rng = bases if copies is None else random.Random(copies)
    window: list[tuple[str, str]] = []
    n = 0
    for c, size in enumerate(sizes):
        base = bases.choices(vocab, k=WORDS_PER_DOC)
        for _ in range(size):
            words = list(base)
            words[rng.randrange(WORDS_PER_DOC)] = rng.choice(vocab)
            window.append((f"{prefix}{n:08d}", " ".join(words)))
            n += 1
            if len(window) == 50_000:
                rng.shuffle(window)
                yield from window
                window = []
        del c
    rng.shuffle(window)
    yield from window


def uniform(n: int, size: int) -> list[int]:
    return [size] * (n // size) + ([n % size] if n % size else [])


def zipf(n: int, largest: int) -> list[int]:
    """Cluster sizes ``largest // rank`` (at least 1) until ``n`` documents."""
    sizes: list[int] = []
    total, rank = 0, 1
    while total < n:
        size = min(max(1, largest // rank), n - total)
        sizes.append(size)
        total += size
        rank += 1
    return sizes


def template(n: int, seed: int) -> Iterator[tuple[str, str]]:
    """Issue 39's records: short texts of one template, nearly every pair a candidate, few a pair."""
    for i in range(n):
        yield (f"t{seed}.{i:08d}", f"record {i + seed * n} of the large request, topic {i % 97} and {i % 13}")


# -- one case, in a process of its own ----------------------------------------------------------


def worker(args: argparse.Namespace) -> None:
    """Run one case and print its figures as one JSON line (``case`` from the driver)."""
    from neardup.index import Index
    from neardup.stages import StageClock

    case = json.loads(args.case)
    kwargs: dict[str, Any] = {"schema": case["schema"], "exist_ok": True}
    start = time.perf_counter()
    out: dict[str, Any] = {}
    with Index.create(case["url"], case["name"], THRESHOLD, **kwargs) as index:
        what = case["what"]
        if what == "add":
            docs = _docs(case)
            start = time.perf_counter()
            more: dict[str, Any] = {"batch_size": case["batch_size"]} if case.get("batch_size") else {}
            clock = StageClock()
            if case.get("stages"):
                more["clock"] = clock
            added = index.add(docs, **more)
            out["added"] = added.added + added.replaced
            out["stages"] = clock.seconds
        elif what == "rebuild":
            start = time.perf_counter()
            index.rebuild(bands=case["bands"], rows=case["rows"])
        elif what == "query":
            out.update(_latencies(index, case))
        seconds = time.perf_counter() - start
        stats = index.stats()
        out.update(
            seconds=seconds,
            documents=stats.documents,
            pairs=stats.pairs,
            clusters=stats.clusters,
            bytes=stats.bytes_on_disk,
            pairs_bytes=sum(stats.bytes_by_table.get("pairs", (0, 0))),
            dense=getattr(stats, "dense_clusters", None),
        )
    out["peak_rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps(out), flush=True)


def _docs(case: dict[str, Any]) -> Iterator[tuple[str, str]]:
    if case["shape"] == "template":
        return template(case["n"], case["seed"])
    sizes = zipf(case["n"], case["largest"]) if case["shape"] == "zipf" else uniform(case["n"], case["size"])
    return clustered(sizes, case["seed"], case.get("prefix", "d"), case.get("copies"))


def _latencies(index: Any, case: dict[str, Any]) -> dict[str, Any]:
    """p50/p99 of query and of check (one record each) for texts near the largest cluster's and
    for texts of the tail."""
    sizes = zipf(case["n"], case["largest"])
    out: dict[str, Any] = {}
    head = [t for _, t in clustered([200], case["seed"], "q")]  # the first cluster's base, as made
    tail = [t for _, t in clustered([1] * 200, case["seed"] + 7, "q")]
    del sizes
    for name, texts in (("dense", head), ("tail", tail)):
        for kind in ("query", "check"):
            times = []
            for i, text in enumerate(texts):
                t0 = time.perf_counter()
                if kind == "query":
                    index.query(text, limit=case["limit"])
                else:
                    list(index.check([(f"q{i}", text)], limit=case["limit"]))
                times.append((time.perf_counter() - t0) * 1000)
            out[f"{name}_{kind}_p50_ms"] = statistics.median(times)
            out[f"{name}_{kind}_p99_ms"] = pct(times, 99)
    return out


# -- the driver -----------------------------------------------------------------------------------


class Runner:
    """Runs cases in fresh processes, this code or the baseline checkout's."""

    def __init__(self, url: str, schema: str, baseline: Path | None, timeout: float) -> None:
        self.url, self.schema, self.baseline, self.timeout = url, schema, baseline, timeout
        self.count = 0
        self._warm: set[bool] = set()

    def run(self, case: dict[str, Any], *, old: bool = False, name: str | None = None) -> dict[str, Any]:
        """The case's figures, or {"status": ...} where it failed or ran out of time."""
        if old and self.baseline is None:
            return {"status": "no baseline"}
        if old not in self._warm:
            # Each checkout compiles (or loads) its numba kernels once: not part of any figure.
            self._warm.add(old)
            self.run({"what": "add", "shape": "uniform", "n": 300, "size": 10, "seed": 9}, old=old)
        self.count += 1
        # The baseline's own schema, migrated by its own code when its first case creates it.
        schema = f"{self.schema}_base" if old else self.schema
        case = {"url": self.url, "schema": schema, "name": name or f"c{self.count}", **case}
        env = dict(os.environ)
        src = (self.baseline if old else REPO) / "src"  # type: ignore[operator]
        env["PYTHONPATH"] = str(src)
        argv = [sys.executable, __file__, "worker", json.dumps(case)]
        try:
            done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=self.timeout)
        except subprocess.TimeoutExpired:
            return {"status": f"over {self.timeout:.0f} s"}
        if done.returncode != 0:
            last = done.stderr.strip().splitlines()[-1][:120] if done.stderr.strip() else done.returncode
            return {"status": f"failed: {last}"}
        return {"status": "ok", **json.loads(done.stdout.strip().splitlines()[-1])}


def _row(label: str, code: str, r: dict[str, Any]) -> list[object]:
    if r.get("status") != "ok":
        return [label, code, r.get("status", "?"), "", "", "", ""]
    docs_s = r.get("added", r["documents"]) / r["seconds"] if r["seconds"] else 0
    return [
        label,
        code,
        f"{r['seconds']:.1f}",
        f"{docs_s:,.0f}",
        f"{r['pairs']:,}",
        f"{r['bytes'] / 2**20:,.0f}",
        f"{r['peak_rss'] / 2**20:,.0f}",
    ]


HEAD = ["documents in clusters of", "code", "time (s)", "docs/s", "stored pairs", "MiB on disk", "peak MiB"]


def part_table(report: Report, runner: Runner, args: argparse.Namespace) -> None:
    report.say(f"## {args.n:,} documents by cluster size, one `Index.add`", "")
    rows = []
    for size in args.sizes:
        case = {"what": "add", "shape": "uniform", "n": args.n, "size": size, "seed": 1}
        rows.append(_row(f"{size:,}", "this", runner.run(case)))
        rows.append(_row(f"{size:,}", args.baseline_ref or "-", runner.run(case, old=True)))
    report.table(HEAD, "lllrrrr", rows)


def _ratio_rows(
    report: Report, runner: Runner, label: str, a: dict[str, Any], b: dict[str, Any], base_label: str
) -> None:
    rows = [_row(label, "this", a), _row(base_label, "this", b)]
    report.table(HEAD, "lllrrrr", rows)
    if a.get("status") == b.get("status") == "ok":
        report.say(
            f"Ratios ({label} / {base_label}): time {a['seconds'] / b['seconds']:.2f}x, "
            f"bytes {a['bytes'] / b['bytes']:.2f}x, peak {a['peak_rss'] / b['peak_rss']:.2f}x.",
            "",
        )


def part_pair(report: Report, runner: Runner, args: argparse.Namespace) -> None:
    report.say(f"## {args.pair_n:,} documents: clusters of {args.pair_size:,} against clusters of 10", "")
    big = runner.run({"what": "add", "shape": "uniform", "n": args.pair_n, "size": args.pair_size, "seed": 2})
    small = runner.run({"what": "add", "shape": "uniform", "n": args.pair_n, "size": 10, "seed": 2})
    _ratio_rows(report, runner, f"{args.pair_size:,}", big, small, "10")
    report.say("Goal: at most 3x the time and 2x the bytes.", "")


def _zipf_case(args: argparse.Namespace, **more: Any) -> dict[str, Any]:
    return {"what": "add", "shape": "zipf", "n": args.zipf_n, "largest": args.largest, "seed": 3, **more}


def part_zipf(report: Report, runner: Runner, args: argparse.Namespace) -> None:
    report.say(f"## {args.zipf_n:,} documents, Zipf-like cluster sizes (largest {args.largest:,})", "")
    heavy = runner.run(_zipf_case(args), name="zipf")
    tens = runner.run({"what": "add", "shape": "uniform", "n": args.zipf_n, "size": 10, "seed": 3})
    _ratio_rows(report, runner, f"Zipf, largest {args.largest:,}", heavy, tens, "10")
    report.say("Goal: at most 2x the time; peak under 2 GiB at the default batch size.", "")
    rows = []
    for day in range(args.daily):
        # New copies of the same clusters (same seed: the same bases) and new texts of the tail.
        case = _zipf_case(args, n=args.daily_n, largest=max(1, args.largest * args.daily_n // args.zipf_n))
        case.update(prefix=f"day{day}.", seed=3, copies=100 + day, stages=True)
        r = runner.run(case, name="zipf")
        reading = r.get("stages", {}).get("probe stored buckets: a chunk", 0.0)
        rows.append([*_row(f"day {day + 1}: {args.daily_n:,} more", "this", r), f"{reading:.1f}"])
    if rows:
        report.say("Daily batches into it (rate should hold):", "")
        report.table([*HEAD, "reading stored members in chunks (s)"], "lllrrrrr", rows)


def part_ways(report: Report, runner: Runner, args: argparse.Namespace) -> None:
    """The Zipf corpus by `neardup add`, with --jobs 2, over HTTP and in a rebuild, each beside the
    same way into the same number of documents in clusters of 10."""
    report.say(f"## The Zipf corpus by other ways ({args.zipf_n:,} documents)", "")
    shapes = {
        "zipf": {"shape": "zipf", "n": args.zipf_n, "largest": args.largest, "seed": 3},
        "tens": {"shape": "uniform", "n": args.zipf_n, "size": 10, "seed": 3},
    }
    times: dict[str, dict[str, list[object]]] = {}
    # The command line's processes load the kernels the runner's first case compiles.
    runner.run({"what": "add", "shape": "uniform", "n": 300, "size": 10, "seed": 9}, name="waywarm")
    for shape, corpus in shapes.items():
        with tempfile.TemporaryDirectory(prefix="nd-shape-") as tmp:
            path = Path(tmp) / f"{shape}.jsonl"
            with path.open("w") as f:
                for doc_id, text in _docs(corpus):
                    f.write(json.dumps({"id": doc_id, "text": text}) + "\n")
            ways = times.setdefault(shape, {})
            for label, extra in (("neardup add", []), ("neardup add --jobs 2", ["--jobs", "2"])):
                ways[label] = _cli(runner, f"way{shape}{len(ways)}", ["add", str(path), *extra])
            ways["HTTP"] = _http(runner, path, args.request, f"http{shape}")
            rebuilt = runner.run({"what": "rebuild", "bands": 15, "rows": 8}, name=f"way{shape}0")
            ways["rebuild (re-band)"] = [f"{rebuilt.get('seconds', 0):.1f}", rebuilt.get("status", "")]
    rows: list[list[object]] = []
    for label, (heavy, status) in times["zipf"].items():
        tens, tens_status = times["tens"][label]
        ratio = f"{float(heavy) / float(tens):.2f}x" if status == tens_status == "ok" else ""  # type: ignore[arg-type]
        rows.append([label, heavy, tens, ratio, status if status != "ok" else tens_status])
    report.table(["way", "Zipf (s)", "clusters of 10 (s)", "ratio", "status"], "lrrrl", rows)
    report.say("Goal: at most 2x the time of the same way into clusters of 10.", "")


def _cli(runner: Runner, name: str, argv: list[str]) -> list[object]:
    base = [sys.executable, "-m", "neardup", "--db", runner.url, "--schema", runner.schema]
    base += ["--collection", name]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    subprocess.run([*base, "init", "--exist-ok"], check=True, env=env, capture_output=True)
    start = time.perf_counter()
    try:
        done = subprocess.run([*base, *argv], env=env, capture_output=True, text=True, timeout=runner.timeout)
    except subprocess.TimeoutExpired:
        return ["", f"over {runner.timeout:.0f} s"]
    return [f"{time.perf_counter() - start:.1f}", "ok" if done.returncode == 0 else done.stderr[-200:]]


def _http(runner: Runner, path: Path, request: int, name: str) -> list[object]:
    import httpx

    from neardup.database import Database

    with Database(runner.url, runner.schema) as db:
        token = db.tokens.create("admin", None, "bench-shape")[1]
    with serving(runner.url, runner.schema) as served:
        headers = {"Authorization": f"Bearer {token}"}
        client = httpx.Client(base_url=served.base, trust_env=False, timeout=runner.timeout, headers=headers)
        client.post("/v1/collections", json={"name": name, "threshold": THRESHOLD}).raise_for_status()
        start = time.perf_counter()
        batch: list[dict[str, str]] = []
        with path.open() as f:
            for line in f:
                batch.append(json.loads(line))
                if len(batch) == request:
                    client.post(f"/v1/collections/{name}/documents", json=batch).raise_for_status()
                    batch = []
        if batch:
            client.post(f"/v1/collections/{name}/documents", json=batch).raise_for_status()
        return [f"{time.perf_counter() - start:.1f}", "ok"]


def part_template(report: Report, runner: Runner, args: argparse.Namespace) -> None:
    report.say(f"## {args.template_n:,} short records of one template, added three times", "")
    ours, theirs = [], []
    for k in range(3):
        # Each add of this code, then of the baseline's (a collection of its own): the two see
        # about the same load.
        case = {"what": "add", "shape": "template", "n": args.template_n, "seed": k}
        ours.append(_row(f"add {k + 1}", "this", runner.run(case, name="template")))
        theirs.append(
            _row(f"add {k + 1}", args.baseline_ref or "-", runner.run(case, old=True, name="template"))
        )
    report.table(HEAD, "lllrrrr", ours + theirs)
    report.say("Goal: each add peaks where the first did.", "")


def part_query(report: Report, runner: Runner, args: argparse.Namespace) -> None:
    report.say(f"## query and check at the Zipf collection ({args.zipf_n:,} documents)", "")
    case = {"what": "query", "n": args.zipf_n, "largest": args.largest, "seed": 3, "limit": args.limit}
    r = runner.run(case, name="zipf")
    if r.get("status") != "ok":
        report.say(f"failed: {r.get('status')}", "")
        return
    rows = [
        [f"{who} {kind}", f"{r[f'{who}_{kind}_p50_ms']:.1f}", f"{r[f'{who}_{kind}_p99_ms']:.1f}"]
        for who in ("dense", "tail")
        for kind in ("query", "check")
    ]
    report.table(["texts, call", "p50 (ms)", "p99 (ms)"], "lrr", rows)


PARTS = {
    "table": part_table,
    "pair": part_pair,
    "zipf": part_zipf,
    "ways": part_ways,
    "template": part_template,
    "query": part_query,
}


def _baseline(ref: str | None) -> Iterator[Path | None]:
    if not ref:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="nd-baseline-") as tmp:
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", tmp, ref], check=True)
        try:
            yield Path(tmp)
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", tmp], check=False)


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "worker":
        worker(argparse.Namespace(case=sys.argv[2]))
        return
    ints = lambda s: [int(x) for x in s.split(",")]  # noqa: E731
    p = options.parser(__doc__)
    p.add_argument("--parts", default="table,pair,zipf,ways,template,query")
    p.add_argument("--n", type=int, default=10_000)
    p.add_argument("--sizes", type=ints, default=[10, 1_000, 2_500])
    p.add_argument("--pair-n", type=int, default=100_000)
    p.add_argument("--pair-size", type=int, default=10_000)
    p.add_argument("--zipf-n", type=int, default=1_000_000)
    p.add_argument("--largest", type=int, default=100_000)
    p.add_argument("--daily", type=int, default=3)
    p.add_argument("--daily-n", type=int, default=10_000)
    p.add_argument("--request", type=int, default=10_000)
    p.add_argument("--template-n", type=int, default=100_000)
    p.add_argument("--limit", type=int, default=10)
    p.add_argument("--baseline-ref", default="main", help="git ref of the code to compare with ('' for none)")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds a case may run")
    options.add_db(p)
    p.add_argument("--out", type=Path, default=REPO / "docs" / "benchmarks" / "shape.md")
    args = p.parse_args()
    report = Report()
    servers = [args.db] if args.db else None
    with contextlib_server(servers) as url, bench_schema(url, "nd_shape") as schema:
        report.say(*header("Cost by cluster shape", url, bool(args.db)))
        for baseline in _baseline(args.baseline_ref):
            runner = Runner(url, schema, baseline, args.timeout)
            try:
                for part in args.parts.split(","):
                    PARTS[part](report, runner, args)
            finally:
                drop_schema(url, f"{schema}_base")
    report.write(args.out)


def contextlib_server(given: list[str] | None) -> Any:
    import contextlib

    if given:
        return contextlib.nullcontext(given[0])
    return local_server()


if __name__ == "__main__":
    main()
