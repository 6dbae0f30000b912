"""Signature throughput from raw text, neardup against datasketch and rensa, on one core.

    python bench/bench_core.py [--data ../shared/data] [--sample 5000] [--repeats 5] [--out FILE]

Every method turns the same raw texts into 128-value MinHash signatures of character 5-shingles,
normalisation included, in the same run. Each is timed ``--repeats`` times after one warm-up
(numba's compile or cache load is reported apart as the cold start); the median is reported, and
ratios are taken against neardup's default scheme. The process is pinned to one core.

Estimation error: on pairs drawn from the Debian ground truth (J >= 0.5, exact) plus random
pairs (exact J computed here), the mean absolute error and the bias of each neardup scheme over
``--seeds`` seeds, with the ground truth's own normalisation (lowercase, collapsed whitespace).

LSH candidates: for several bandings at threshold 0.8, the share of ground-truth pairs with
J >= 0.8 that share a bucket, the naive self-join size and the distinct candidate pairs.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import numpy as np

from _common import (
    DATA_DIR,
    DEBIAN,
    DEBIAN_TRUTH_NAME,
    NUM_PERM,
    SEED,
    K,
    Report,
    alternated,
    corpus_file,
    header,
    read_jsonl,
    read_truth,
    seconds_of,
    truth_shingles,
)
from _options import add_out, add_rounds, parser
from _rivals import datasketch_minhash, rensa_minhash
from neardup.core import (
    SCHEMES,
    Params,
    Sketcher,
    agreement,
    candidate_probability,
    optimal_params,
    shingle_batch,
)
from neardup.core.distinct import distinct

Method = Callable[[Sequence[str]], object]


def datasketch_method() -> Method:
    return lambda texts: [datasketch_minhash(text).hashvalues for text in texts]


def rensa_method() -> Method:
    return lambda texts: [rensa_minhash(text).digest() for text in texts]


def rensa_flat_method() -> Method:
    """neardup's vectorised shingle hashing feeding rensa's flat batch kernel."""
    from rensa import RMinHash

    def run(texts: Sequence[str]) -> object:
        batch = shingle_batch(texts, "char", K, unique=False)
        return RMinHash.digest_matrix_from_flat_token_hashes(
            batch.values.astype(np.uint64), batch.offsets.astype(np.uint64), NUM_PERM, SEED
        )

    return run


def neardup_method(scheme: str) -> Method:
    sketcher = Sketcher(Params(bands=16, rows=8, num_perm=NUM_PERM, scheme=scheme, seed=SEED))  # type: ignore[arg-type]
    return sketcher.signatures


def time_method(method: Method, texts: Sequence[str], repeats: int) -> list[float]:
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        method(texts)
        rates.append(len(texts) / (time.perf_counter() - start))
    return rates


def cold_start_seconds(scheme: str) -> float:
    """Seconds for a fresh interpreter to import neardup and sign one text (compile or cache load)."""
    code = (
        "import time; t = time.perf_counter(); from neardup.core import Params, Sketcher;"
        f"Sketcher(Params(bands=16, rows=8, scheme={scheme!r})).signatures(['warm up text']);"
        "print(time.perf_counter() - t)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout)


def throughput_table(report: Report, name: str, texts: list[str], sample: int, repeats: int) -> None:
    subset = texts[:sample]
    mean_len = sum(map(len, subset)) / len(subset)
    methods: dict[str, Method] = {
        "neardup oph (default)": neardup_method("oph"),
        "neardup classic": neardup_method("classic"),
        "neardup shingles + rensa flat kernel": rensa_flat_method(),
        "rensa RMinHash per document": rensa_method(),
        "datasketch MinHash.update_batch": datasketch_method(),
    }
    results = {}
    for label, method in methods.items():
        method(subset[:200])  # warm-up: compile or load cached kernels, fill caches
        results[label] = time_method(method, subset, repeats)
        print(f"  {name}: {label}: median {statistics.median(results[label]):,.0f} docs/s", file=sys.stderr)
    base = statistics.median(results["neardup oph (default)"])
    report.say(f"### {name}: {len(subset):,} documents, mean {mean_len:,.0f} characters", "")
    report.table(
        ["method", "median docs/s", "min-max docs/s", "neardup oph is x faster"],
        "lrrr",
        [
            (label, f"{med:,.0f}", f"{min(rates):,.0f}-{max(rates):,.0f}", f"{base / med:.1f}")
            for label, rates in results.items()
            for med in [statistics.median(rates)]
        ],
    )
    full = neardup_method("oph")
    full_rates = time_method(
        lambda ts: [full(ts[i : i + 10_000]) for i in range(0, len(ts), 10_000)], texts, 3
    )
    report.say(
        f"Whole corpus ({len(texts):,} documents, batches of 10,000), neardup oph: median "
        f"{statistics.median(full_rates):,.0f} docs/s.",
        "",
    )


def two_core_table(report: Report, name: str, texts: list[str], repeats: int, cores: set[int]) -> None:
    """Signatures of the whole corpus on one thread and on two, both cores allowed (same signatures)."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, cores)
    sketcher = Sketcher(Params(bands=16, rows=8, num_perm=NUM_PERM, seed=SEED))
    sketcher.signatures(texts[:5000], threads=2)  # warm-up
    ways = {threads: seconds_of(partial(sketcher.signatures, texts, threads=threads)) for threads in (1, 2)}
    # Alternated, so that a slow spell of the machine hits both.
    rates = {threads: [len(texts) / s for s in runs] for threads, runs in alternated(ways, repeats).items()}
    same = np.array_equal(sketcher.signatures(texts, threads=2), sketcher.signatures(texts))
    one, two = statistics.median(rates[1]), statistics.median(rates[2])
    print(f"  {name}: 1 thread {one:,.0f}, 2 threads {two:,.0f} docs/s", file=sys.stderr)
    report.say(f"### Both cores ({len(cores)} allowed): {name}, {len(texts):,} documents, one batch", "")
    report.table(
        ["threads", "median docs/s", "min-max docs/s"],
        "rrr",
        [
            (threads, f"{statistics.median(r):,.0f}", f"{min(r):,.0f}-{max(r):,.0f}")
            for threads, r in rates.items()
        ],
    )
    report.say(f"Two threads give {two / one:.2f}x one thread's rate; signatures identical: {same}.", "")


TruthRow = tuple[str, str, float]


def sample_truth_pairs(rows: list[TruthRow], count: int, rng: np.random.Generator) -> list[TruthRow]:
    picks = rng.choice(len(rows), size=min(count, len(rows)), replace=False)
    return [rows[i] for i in picks]


def estimation_table(
    report: Report, ids: list[str], texts: list[str], truth: list[TruthRow], pairs: int, seeds: int
) -> None:
    rng = np.random.default_rng(2026)
    sampled = sample_truth_pairs(truth, pairs, rng)
    index = {doc_id: i for i, doc_id in enumerate(ids)}
    left = [index[a] for a, _, _ in sampled]
    right = [index[b] for _, b, _ in sampled]
    exact = [j for _, _, j in sampled]
    # Random pairs cover low similarities; their exact J is computed from the shingle strings.
    for a, b in rng.integers(0, len(texts), size=(pairs // 4, 2)):
        sa, sb = truth_shingles(texts[a]), truth_shingles(texts[b])
        if a != b and sa and sb:
            left.append(int(a))
            right.append(int(b))
            exact.append(len(sa & sb) / len(sa | sb))
    truth_j = np.array(exact)
    high = truth_j >= 0.5
    se = np.sqrt(truth_j * (1 - truth_j) / NUM_PERM)
    report.say(
        f"### Estimation error: {len(truth_j):,} Debian pairs ({len(sampled):,} from the ground truth, "
        f"J >= 0.5; the rest random), exact J against the {NUM_PERM}-row estimate, {seeds} seeds",
        "",
        "Pairs within a package family share text, so one seed's errors move together: a single seed's",
        "mean signed error swings by about 0.01 either way. The bias column is therefore the mean over",
        "seeds with its standard error; the other columns are averaged over seeds too.",
        "",
    )
    rows = []
    for scheme in SCHEMES:
        abs_err, abs_high, inside, bias = [], [], [], []
        for seed in range(1, seeds + 1):
            params = Params(bands=16, rows=8, scheme=scheme, seed=seed, unicode_form="none", case="lower")
            sigs = Sketcher(params).signatures(texts)
            err = agreement(sigs[left], sigs[right]) - truth_j
            abs_err.append(np.abs(err).mean())
            abs_high.append(np.abs(err[high]).mean())
            inside.append(np.mean(np.abs(err) <= 3 * se + 1e-12))
            bias.append(err.mean())
        bias_se = np.std(bias, ddof=1) / np.sqrt(seeds)
        rows.append(
            (
                scheme,
                f"{np.mean(abs_err):.4f}",
                f"{np.mean(abs_high):.4f}",
                f"{np.mean(inside):.3f}",
                f"{np.mean(bias):+.4f} ± {bias_se:.4f}",
            )
        )
    report.table(
        ["scheme", "mean abs error", "abs error, J >= 0.5", "share within 3 SE", "bias (mean signed error)"],
        "lrrrr",
        rows,
    )


def candidate_pairs(keys: np.ndarray) -> tuple[int, np.ndarray]:
    """Naive self-join rows (same band, same key) and the distinct candidate pairs (i * 2**32 + j)."""
    n_docs = keys.shape[0]
    rows, found = 0, []
    for band in range(keys.shape[1]):
        order = np.argsort(keys[:, band], kind="stable")
        sorted_keys = keys[order, band]
        starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])
        sizes = np.diff(np.r_[starts, n_docs])
        rows += int((sizes * (sizes - 1) // 2).sum())
        for start, size in zip(starts[sizes > 1].tolist(), sizes[sizes > 1].tolist(), strict=True):
            members = np.sort(order[start : start + size]).astype(np.int64)
            i, j = np.triu_indices(size, 1)
            found.append(members[i] * 2**32 + members[j])
    return rows, distinct(np.concatenate(found)) if found else np.empty(0, dtype=np.int64)


def banding_table(report: Report, ids: list[str], texts: list[str], truth: list[TruthRow]) -> None:
    """Candidate recall of the ground-truth pairs with J >= 0.8, and candidate counts, per banding."""
    index = {doc_id: i for i, doc_id in enumerate(ids)}
    high = [(index[a], index[b]) for a, b, j in truth if j >= 0.8]
    truth_codes = np.array([min(a, b) * 2**32 + max(a, b) for a, b in high], dtype=np.int64)
    equal, fn_heavy = optimal_params(0.8, NUM_PERM), optimal_params(0.8, NUM_PERM, 0.2, 0.8)
    bandings: dict[str, tuple[int, int]] = {
        f"tuned, equal weights ({equal.bands}x{equal.rows})": (equal.bands, equal.rows),
        f"tuned, fn_weight 0.8 ({fn_heavy.bands}x{fn_heavy.rows})": (fn_heavy.bands, fn_heavy.rows),
        "datasketch's pick (9x13)": (9, 13),
        "32x4": (32, 4),
    }
    report.say(f"### LSH candidates on Debian at t = 0.8: {len(high):,} ground-truth pairs with J >= 0.8", "")
    rows = []
    for label, (b, r) in bandings.items():
        for scheme in SCHEMES:
            params = Params(bands=b, rows=r, scheme=scheme, unicode_form="none", case="lower")
            sketcher = Sketcher(params)
            keys = sketcher.band_keys(sketcher.signatures(texts))
            join_rows, candidates = candidate_pairs(keys)
            recall = np.isin(truth_codes, candidates).mean()
            rows.append(
                (
                    label,
                    scheme,
                    f"{recall:.4f}",
                    f"{float(candidate_probability(0.8, b, r)):.3f}",
                    f"{join_rows:,}",
                    f"{candidates.size:,}",
                )
            )
    report.table(
        ["banding", "scheme", "recall J >= 0.8", "S-curve at 0.8", "self-join rows", "distinct candidates"],
        "llrrrr",
        rows,
    )


def main(argv: list[str] | None = None) -> int:
    ap = parser(__doc__)
    ap.add_argument("--data", type=Path, default=DATA_DIR, help="shared data folder")
    ap.add_argument("--sample", type=int, default=5000, help="documents every method signs")
    add_rounds(ap, 5, flag="--repeats")
    ap.add_argument("--synthetic", type=int, default=20_000, help="size of the make_corpus.py corpus")
    ap.add_argument("--pairs", type=int, default=20_000, help="ground-truth pairs for the error table")
    ap.add_argument("--seeds", type=int, default=10, help="seeds averaged in the error table")
    add_out(ap, None)
    args = ap.parse_args(argv)
    cores = set(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else set()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(cores)})

    debian = list(read_jsonl(args.data / DEBIAN.name))
    ids, texts = [i for i, _ in debian], [t for _, t in debian]
    with corpus_file(None, args.synthetic) as (synthetic, _):
        syn_texts = [t for _, t in read_jsonl(synthetic)]

    report = Report()
    report.say(
        *header(
            "Signature throughput",
            None,
            False,
            [
                f"Pinned to one core; {NUM_PERM} permutations, character {K}-shingles, from raw text; "
                f"median of {args.repeats} runs"
            ],
            packages=("datasketch", "rensa"),
        ),
        f"Cold start (fresh process: import, load or compile kernels, sign one text): oph "
        f"{cold_start_seconds('oph'):.2f} s, classic {cold_start_seconds('classic'):.2f} s.",
        "",
    )
    throughput_table(report, "Debian bookworm descriptions", texts, args.sample, args.repeats)
    synthetic_name = f"make_corpus.py synthetic (--n {args.synthetic} --seed 1)"
    throughput_table(report, synthetic_name, syn_texts, args.sample, args.repeats)
    if len(cores) > 1:
        two_core_table(report, synthetic_name, syn_texts, args.repeats, cores)
        os.sched_setaffinity(0, {min(cores)})
    truth = read_truth(args.data / DEBIAN_TRUTH_NAME)  # 1M rows: read once
    estimation_table(report, ids, texts, truth, args.pairs, args.seeds)
    banding_table(report, ids, texts, truth)
    if args.out:
        report.write(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
