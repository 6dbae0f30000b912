"""Recall right at the threshold, expected against realised, and what it costs: the bandings side by side.

    python bench/bench_threshold.py [CORPUS] [--truth TSV] [--limit N] [--thresholds 0.5,0.6,0.7,0.8,0.9]
                                    [--variants old,new,perms256] [--repeats 1] [--queries 200]
                                    [--alternatives old,even,new,...] [--seeds 1,2,3,4,5,6]
                                    [--db URL] [--out docs/benchmarks/threshold.md]

CORPUS defaults to the Debian bookworm descriptions in ../shared/data, the truth to every pair
with exact 5-shingle Jaccard >= 0.5 beside it (any corpus with a truth file of the same columns,
id_a id_b jaccard intersection union, can be given: ``bench/build_license_corpus.py`` writes one
for ScanCode's license texts and rules, ``bench/exact_truth.py`` for any corpus). For each
threshold t and each banding variant (built in turn, alternated over ``--repeats`` rounds, in one
run and one server):

- old: the tuner before the recall target (FP/FN weights 0.2/0.8 only), 128 permutations;
- even: the recall target (0.99 in [t, t + 0.05)) with the pairs taken as spread evenly over the
  bin (the default before the prior);
- new: the default now (the same target, the pairs' density falling across the bin as the prior
  has it, ``tuning.PRIOR_TOP``);
- perms256: the default's target with 256 permutations (more bands of more rows: fewer
  candidates, more bucket rows and signature bytes).

Each builds a collection with the ground truth's normalisation, adds every document (timed:
documents to all verified pairs), lists its pairs and reports, for the threshold's own bin
[t, t + 0.05): the recall realised (truth pairs stored, with Wilson's 95% interval) against what
was expected of it: by the tuner's prior (what ``tune`` and ``stats`` promise before any pair is
stored), by the collection's own stored pairs (``stats``' check, each pair weighted 1 / P), and by
the S-curve over the truth pairs themselves (ideal MinHash on exactly these pairs); then recall
and precision at t; bytes a document on disk (``stats``); query p50 over ``--queries`` corpus
texts, after a VACUUM ANALYZE and a CHECKPOINT (``settle``), the round's builds taking turns text
by text (``time_queries``); and LSH candidates per stored pair (distinct candidate pairs of
distinct texts, from the same signatures computed here, over the stored pairs of distinct texts).
Ratios are against the first variant.

The alternatives' table needs no build: each banding's bucket keys from the signatures of every
``--seeds`` seed (the seed of the hash functions; 1 is the default), the share of the bin's truth
pairs that share one (what exact verification then keeps), its smallest and median over the
seeds: the pairs of one family share their fate, so one seed's recall scatters around the
expected more than independent pairs would. ``--variants ''`` skips the builds (no database).
"""

from __future__ import annotations

import contextlib
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import psycopg

import _options as options
from _common import (
    DEBIAN,
    DEBIAN_TRUTH_NAME,
    TRUTH_CONFIG,
    Report,
    bench_schema,
    header,
    local_server,
    timed,
    warm_up,
)
from bench_core import candidate_pairs
from bench_quality import Truth, read_corpus
from neardup.config import FN_WEIGHT, FP_WEIGHT
from neardup.core import (
    Params,
    Sketcher,
    candidate_probability,
    evaluate_banding,
    optimal_params,
    threshold_bin_recall,
)
from neardup.core.intervals import wilson
from neardup.core.tuning import DEFAULT_RECALL_AT_THRESHOLD, THRESHOLD_BIN, BinDensity, prior_density
from neardup.database import Database
from neardup.index import Index
from neardup.storage.connect import libpq_url

# Each variant: (bands, rows, num_perm) for a threshold.
VARIANTS: dict[str, Callable[[float], tuple[int, int, int]]] = {
    "old": lambda t: _pick(t, 128, None),
    "even": lambda t: _pick(t, 128, DEFAULT_RECALL_AT_THRESHOLD, prior_density(t, 128, 1.0)),
    "new": lambda t: _pick(t, 128, DEFAULT_RECALL_AT_THRESHOLD),
    "perms256": lambda t: _pick(t, 256, DEFAULT_RECALL_AT_THRESHOLD),
    # The same target asked of the point P(t) instead of the bin's mean.
    "point": lambda t: _point(t, 128, DEFAULT_RECALL_AT_THRESHOLD),
    # A lower candidate gate: the old tuner for t - 0.05, pairs still verified at t.
    "gate": lambda t: _pick(round(t - THRESHOLD_BIN, 10), 128, None),
}


def _pick(
    t: float, num_perm: int, recall: float | None, density: BinDensity | None = None
) -> tuple[int, int, int]:
    b = optimal_params(t, num_perm, FP_WEIGHT, FN_WEIGHT, recall_at_threshold=recall, density=density)
    return b.bands, b.rows, num_perm


def _point(t: float, num_perm: int, recall: float) -> tuple[int, int, int]:
    """The least weighted FP and FN rates among b*r <= num_perm with P(t) >= recall."""
    best: tuple[float, int, int] | None = None
    for b in range(1, num_perm + 1):
        for r in range(1, num_perm // b + 1):
            if float(candidate_probability(t, b, r)) >= recall:
                e = evaluate_banding(t, b, r, num_perm)
                cost = FP_WEIGHT * e.false_positive_rate + FN_WEIGHT * e.false_negative_rate
                if best is None or cost < best[0]:
                    best = (cost, b, r)
    if best is None:
        raise SystemExit(f"no banding of {num_perm} permutations has P({t}) >= {recall}")
    return best[1], best[2], num_perm


@dataclass
class Run:
    """One variant at one threshold: its quality (the same every round) and each round's costs."""

    variant: str
    threshold: float
    banding: tuple[int, int, int]
    bin_found: int = 0
    bin_pairs: int = 0
    bin_curve: float = float("nan")
    own_expected: float | None = None
    recall: float = 0.0
    precision: float = 0.0
    candidates: int = 0
    stored_content_pairs: int = 0
    seconds: list[float] = field(default_factory=list)
    bytes_per_doc: list[float] = field(default_factory=list)
    query_p50_ms: list[float] = field(default_factory=list)

    @property
    def label(self) -> str:
        b, r, n = self.banding
        return f"{b}x{r}" + ("" if n == 128 else f" of {n}")


def stored_keys(index: Index, position: dict[str, int]) -> np.ndarray:
    """The pairs a user can get, as sorted keys lo * n + hi over document positions: the stored
    pairs, and each dense cluster's complete pairs (verified on demand: it stores only a subset
    that connects it, so its stored pairs alone would count its other pairs as missed)."""
    n = len(position)
    listed = [(position[a], position[b]) for a, b, _ in index.pairs()]
    for cluster in index.clusters():
        if cluster.dense:
            listed.extend((position[a], position[b]) for a, b, _ in index.cluster_pairs(cluster.id))
    keys = np.array([min(a, b) * n + max(a, b) for a, b in listed], dtype=np.int64)
    return np.unique(keys)


def build(
    run: Run,
    url: str,
    schema: str,
    docs: list[tuple[str, str]],
    truth: Truth,
    content: np.ndarray,
    first: bool,
) -> Index:
    """Build the variant's collection, time it, settle it, and (the first round) score its pairs."""
    bands, rows, num_perm = run.banding
    t = run.threshold
    name = f"thr_{run.variant}_{round(t * 100)}"
    index = Index.create(
        url, name, t, schema=schema, bands=bands, rows=rows, num_perm=num_perm, **TRUTH_CONFIG
    )
    seconds, _ = timed(lambda: index.add(docs))
    run.seconds.append(seconds)
    stats = index.stats()
    if first and stats.recall_check is not None:
        run.own_expected = stats.recall_check.own_recall
    run.bytes_per_doc.append(stats.bytes_on_disk / max(stats.documents, 1))
    settle(url, schema)
    if first:
        score(run, stored_keys(index, {d: i for i, (d, _) in enumerate(docs)}), truth, content, len(docs))
    print(
        f"  {seconds:.1f} s, {run.bytes_per_doc[-1]:,.0f} bytes a document; in bin {run.bin_found:,} of "
        f"{run.bin_pairs:,}",
        file=sys.stderr,
    )
    return index


def time_queries(built: list[tuple[Run, Index]], queries: list[str]) -> None:
    """Each build's query p50 over the same texts, the builds taking turns text by text: this
    machine's speed drifts within a minute by more than the bandings differ, which timing each
    build in a pass of its own took for a difference between them."""
    times: list[list[float]] = [[] for _ in built]
    for i, text in enumerate(queries):
        turns = list(enumerate(built))
        for k, (_, index) in turns if i % 2 == 0 else turns[::-1]:
            t0 = time.perf_counter()
            index.query(text)
            times[k].append(1000 * (time.perf_counter() - t0))
    for (run, _), each in zip(built, times, strict=True):
        # The first texts warm each collection's statements up.
        run.query_p50_ms.append(statistics.median(each[20:] or each))
        print(f"  {run.variant}: query p50 {run.query_p50_ms[-1]:.2f} ms", file=sys.stderr)


def settle(url: str, schema: str) -> None:
    """VACUUM ANALYZE the schema's tables (the collections of the round being measured), as
    autovacuum leaves a collection some time after a load, then CHECKPOINT: queries are timed in
    that steady state, so that a figure depends neither on what the load left undone (hint bits,
    the visibility map, statistics, dirty pages to write) nor on autovacuum or a checkpoint
    starting during the timing."""
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute(
            f'VACUUM ANALYZE "{schema}".buckets, "{schema}".signatures, "{schema}".documents, '
            f'"{schema}".contents, "{schema}".pairs'
        )
        conn.execute("CHECKPOINT")


def score(run: Run, keys: np.ndarray, truth: Truth, content: np.ndarray, n: int) -> None:
    t = run.threshold
    found = np.isin(truth.keys, keys, assume_unique=True)
    in_bin = (truth.jaccard >= t) & (truth.jaccard < t + THRESHOLD_BIN) if t < 1 else truth.jaccard >= 1
    run.bin_pairs, run.bin_found = int(in_bin.sum()), int(found[in_bin].sum())
    bands, rows, _ = run.banding
    if in_bin.any():
        run.bin_curve = float(candidate_probability(truth.jaccard[in_bin], bands, rows).mean())
    above = truth.jaccard >= t
    run.recall = float(found[above].mean()) if above.any() else float("nan")
    pos = np.minimum(np.searchsorted(truth.keys, keys), truth.keys.size - 1)
    true = (truth.keys[pos] == keys) & (truth.jaccard[pos] >= t)
    run.precision = float(true.mean()) if keys.size else float("nan")
    a, b = content[keys // n], content[keys % n]
    differ = a != b
    run.stored_content_pairs = int(np.unique(np.minimum(a, b)[differ] * n + np.maximum(a, b)[differ]).size)


def count_candidates(run: Run, distinct_texts: list[str]) -> None:
    """Distinct LSH candidate pairs among the distinct texts, from the variant's band keys."""
    bands, rows, num_perm = run.banding
    sketcher = Sketcher(Params(bands=bands, rows=rows, num_perm=num_perm, **TRUTH_CONFIG))
    keys = sketcher.band_keys(sketcher.signatures(distinct_texts))
    _, found = candidate_pairs(keys)
    run.candidates = int(found.size)


class Signatures:
    """The distinct texts' signatures for each (seed, permutations), computed once."""

    def __init__(self, distinct: list[str]) -> None:
        self.distinct = distinct
        self.cache: dict[tuple[int, int], np.ndarray] = {}

    def keys(self, bands: int, rows: int, num_perm: int, seed: int) -> np.ndarray:
        sketcher = Sketcher(Params(bands=bands, rows=rows, num_perm=num_perm, seed=seed, **TRUTH_CONFIG))
        if (seed, num_perm) not in self.cache:
            self.cache[seed, num_perm] = sketcher.signatures(self.distinct)
        return sketcher.band_keys(self.cache[seed, num_perm])


def offline_row(
    variant: str,
    t: float,
    docs: list[tuple[str, str]],
    truth: Truth,
    content: np.ndarray,
    signatures: Signatures,
    seeds: list[int],
) -> list[object]:
    """A variant judged from its signatures alone, without a build: the share of the bin's truth
    pairs that share a bucket key (what exact verification then keeps) for the first seed, and
    its least and median over ``seeds``, beside what the prior and the S-curve over these pairs
    expect; its bucket rows and signature bytes a document, and (first seed) its distinct
    candidates per true pair of distinct texts found."""
    bands, rows, num_perm = VARIANTS[variant](t)
    n = len(docs)
    lo, hi = content[truth.keys // n], content[truth.keys % n]
    in_bin = (truth.jaccard >= t) & (truth.jaccard < t + THRESHOLD_BIN)
    realised = []
    for seed in seeds:
        keys = signatures.keys(bands, rows, num_perm, seed)
        shared = (keys[lo] == keys[hi]).any(axis=1) | (lo == hi)
        realised.append(int(shared[in_bin].sum()))
        if seed == seeds[0]:
            above = (truth.jaccard >= t) & (lo != hi) & shared
            true_found = np.unique(np.minimum(lo, hi)[above] * n + np.maximum(lo, hi)[above]).size
            _, candidates = candidate_pairs(keys)
    pairs = int(in_bin.sum())
    low, high = wilson(realised[0], pairs)
    curve = float(candidate_probability(truth.jaccard[in_bin], bands, rows).mean()) if pairs else float("nan")
    return [
        t,
        variant,
        f"{bands}x{rows}" + ("" if num_perm == 128 else f" of {num_perm}"),
        f"{pairs:,}",
        f"{threshold_bin_recall(t, bands, rows):.4f}",
        f"{curve:.4f}",
        f"{realised[0] / max(pairs, 1):.4f} ({low:.4f}-{high:.4f})",
        f"{min(realised) / max(pairs, 1):.4f}",
        f"{statistics.median(realised) / max(pairs, 1):.4f}",
        bands,
        4 * num_perm,
        f"{candidates.size:,}",
        f"{candidates.size / max(true_found, 1):.2f}",
    ]


def fmt_ratio(new: float, old: float) -> str:
    return f"{new / old:.2f}x" if old else "n/a"


def main() -> None:
    ap = options.parser(__doc__)
    ap.add_argument("corpus", nargs="?", type=Path, default=DEBIAN, help="JSONL(.gz) of {id, text}")
    ap.add_argument("--truth", type=Path, help=f"truth TSV (default: {DEBIAN_TRUTH_NAME} beside CORPUS)")
    ap.add_argument("--limit", type=int, help="use only the first N documents (for a quick check)")
    ap.add_argument("--thresholds", default="0.5,0.6,0.7,0.8,0.9")
    ap.add_argument(
        "--variants", default="old,new,perms256", help=f"of {', '.join(VARIANTS)}; the first is the base"
    )
    ap.add_argument("--repeats", type=int, default=1, help="rounds of builds, variants alternated")
    ap.add_argument(
        "--alternatives",
        default="old,even,new,point,gate,perms256",
        help="variants also judged from their signatures alone, without a build ('' for none)",
    )
    ap.add_argument("--seeds", default="1,2,3,4,5,6", help="seeds the alternatives are judged with")
    ap.add_argument("--queries", type=int, default=200, help="query texts timed per collection")
    options.add_db(ap)
    ap.add_argument("--out", type=Path, default=Path("docs/benchmarks/threshold.md"))
    args = ap.parse_args()
    thresholds = [float(x) for x in args.thresholds.split(",")]
    variants = [v for v in args.variants.split(",") if v]
    alternatives = [a for a in args.alternatives.split(",") if a]
    if unknown := (set(variants) | set(alternatives)) - set(VARIANTS):
        raise SystemExit(f"unknown variants: {', '.join(sorted(unknown))}")
    seeds = [int(x) for x in args.seeds.split(",")]
    truth_path = args.truth or args.corpus.parent / DEBIAN_TRUTH_NAME

    docs, truth, content, distinct_texts = read_corpus(args.corpus, truth_path, args.limit)
    queries = [text for _, text in random.Random(1).sample(docs, min(args.queries, len(docs)))]
    print(f"{len(docs):,} documents, {truth.keys.size:,} truth pairs", file=sys.stderr)

    runs = {(v, t): Run(v, t, VARIANTS[v](t)) for t in thresholds for v in variants}
    report = Report()
    notes = [
        f"Corpus: `{args.corpus.name}`, {len(docs):,} documents"
        + (f" (the first {args.limit:,})" if args.limit else "")
        + f" ({len(distinct_texts):,} distinct texts); truth `{truth_path.name}`: "
        f"{truth.keys.size:,} pairs with J >= 0.5 among them",
        "Character 5-shingles of the ground truth's normalisation (lowercase, collapsed "
        "whitespace), one-permutation MinHash"
        + (
            f"; every variant built in the same run and server, {args.repeats} round(s), variants "
            "alternated; times are medians"
            if variants
            else "; no build (signatures alone)"
        ),
    ]
    with contextlib.ExitStack() as stack:
        url: str | None = None
        if variants:
            url = args.db or stack.enter_context(local_server())
            schema = stack.enter_context(bench_schema(url, "nd_threshold"))
            warm_up(url, schema, **TRUTH_CONFIG)
        for t in thresholds:
            if url is None:
                break
            for round_ in range(args.repeats):
                built = []
                for v in variants if round_ % 2 == 0 else reversed(variants):
                    print(f"t = {t}, {v} ({runs[v, t].label}), round {round_ + 1} ...", file=sys.stderr)
                    built.append(
                        (runs[v, t], build(runs[v, t], url, schema, docs, truth, content, round_ == 0))
                    )
                time_queries(built, queries)
                for _, index in built:
                    index.close()
                    Database(url, schema).drop(index.name)
        report.say(*header("Recall at the threshold and its cost", url, args.db is not None, notes))
    if variants:
        report_builds(report, runs, variants, distinct_texts)
    if alternatives:
        report.say("## Expected and realised from the signatures alone, every seed", "")
        report.say(
            "No build: each banding's bucket keys computed here from the same texts, with the hash "
            f"functions of each seed {', '.join(map(str, seeds))} (seed {seeds[0]} first; 1 is the "
            "default). Realised: the share of the bin's truth pairs (documents) sharing a bucket key "
            "(exact verification keeps them all but the rare one its signature prefilter drops), for "
            f"seed {seeds[0]} with its 95% Wilson interval, then the least and the median over the "
            "seeds. Expected: by the tuner's prior (what `tune` and `stats` promise for the bin) and "
            "by the S-curve over the bin's truth pairs themselves. Bucket rows and signature bytes are "
            "a document's; candidates (first seed): distinct candidate pairs of distinct texts, and "
            "over the true pairs (J >= t) of distinct texts that are candidates. even: the target "
            "with the pairs spread evenly over the bin; new: with the prior (today's default); point: "
            "P(t) >= 0.99; gate: the old tuner for t - 0.05; perms256: the target with 256 "
            "permutations.",
            "",
        )
        signatures = Signatures(distinct_texts)
        offline = []
        for t in thresholds:
            for a in alternatives:
                print(f"alternative {a} at {t} ...", file=sys.stderr)
                offline.append(offline_row(a, t, docs, truth, content, signatures, seeds))
        report.table(
            [
                "t",
                "variant",
                "b×r",
                "pairs in bin",
                "expected, prior",
                "expected, S-curve over the pairs",
                f"realised, seed {seeds[0]} (95% Wilson)",
                "least over seeds",
                "median over seeds",
                "bucket rows a document",
                "signature bytes",
                "candidates",
                "candidates per true pair",
            ],
            "rllrrrrrrrrrr",
            offline,
        )
    report.write(args.out)


def report_builds(
    report: Report, runs: dict[tuple[str, float], Run], variants: list[str], distinct: list[str]
) -> None:
    """The built variants' tables: recall in the bin, expected against realised, then the costs."""
    for run in runs.values():
        print(f"candidates for {run.variant} at {run.threshold} ...", file=sys.stderr)
        count_candidates(run, distinct)
    base = variants[0]
    report.say(f"## Recall in the threshold's own bin [t, t + {THRESHOLD_BIN:g}), expected and realised", "")
    report.say(
        "Expected: by the tuner's prior (what `tune` and `stats` promise before a pair is stored), "
        "by the collection's own stored pairs of the bin (`stats`' check: each weighted 1 / P of "
        "its similarity) and by the S-curve over the bin's truth pairs (ideal MinHash on exactly "
        "these pairs). Realised: the truth pairs of the bin (documents) that the collection stores.",
        "",
    )
    report.table(
        [
            "t",
            "variant",
            "b×r",
            "pairs in bin",
            "expected, prior",
            "expected, own pairs",
            "expected, S-curve over the pairs",
            "realised (95% Wilson)",
            "recall J >= t",
            "precision",
        ],
        "rllrrrrrrr",
        [
            [
                run.threshold,
                run.variant,
                run.label,
                f"{run.bin_pairs:,}",
                f"{threshold_bin_recall(run.threshold, run.banding[0], run.banding[1]):.4f}",
                "n/a" if run.own_expected is None else f"{run.own_expected:.4f}",
                f"{run.bin_curve:.4f}",
                f"{run.bin_found / run.bin_pairs:.4f} ({low:.4f}-{high:.4f})" if run.bin_pairs else "n/a",
                f"{run.recall:.4f}",
                f"{run.precision:.4f}",
            ]
            for run in runs.values()
            for low, high in [wilson(run.bin_found, run.bin_pairs)]
        ],
    )
    report.say(f"## Cost, each variant against `{base}` at the same threshold", "")
    report.say(
        "Time: documents to all verified pairs (`add` of every document into an empty collection). "
        "Bytes a document: `stats` bytes on disk / documents. Query p50: `query` of corpus texts, "
        "after a VACUUM ANALYZE and a CHECKPOINT, the round's builds taking turns text by text. "
        "Candidates per stored pair: distinct LSH candidate pairs of distinct texts / stored pairs "
        "of distinct texts.",
        "",
    )
    rows = []
    for (v, t), run in runs.items():
        ref = runs[base, t]
        sec, ref_sec = statistics.median(run.seconds), statistics.median(ref.seconds)
        byt, ref_byt = statistics.median(run.bytes_per_doc), statistics.median(ref.bytes_per_doc)
        q, ref_q = statistics.median(run.query_p50_ms), statistics.median(ref.query_p50_ms)
        per_pair = run.candidates / max(run.stored_content_pairs, 1)
        ref_per_pair = ref.candidates / max(ref.stored_content_pairs, 1)
        rows.append(
            [
                t,
                v,
                run.label,
                f"{sec:.1f} s ({fmt_ratio(sec, ref_sec)})",
                f"{byt:,.0f} ({fmt_ratio(byt, ref_byt)})",
                f"{q:.2f} ms ({fmt_ratio(q, ref_q)})",
                f"{run.candidates:,}",
                f"{per_pair:.2f} ({fmt_ratio(per_pair, ref_per_pair)})",
            ]
        )
    report.table(
        [
            "t",
            "variant",
            "b×r",
            "time to all pairs",
            "bytes a document",
            "query p50",
            "candidates",
            "candidates per stored pair",
        ],
        "rllrrrrr",
        rows,
    )


if __name__ == "__main__":
    main()
