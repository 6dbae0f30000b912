"""Quality on Debian bookworm against its exact ground truth: neardup and datasketch MinHashLSH.

    python bench/bench_quality.py [CORPUS] [--truth TSV] [--limit N] [--thresholds 0.5,0.7,0.8,0.9]
                                  [--db URL] [--out-dir docs/benchmarks]

CORPUS defaults to ../shared/data/debian_bookworm.jsonl.gz beside the checkout, the truth to
debian_bookworm_pairs_j50_k5.tsv.gz beside it (every pair with exact 5-shingle Jaccard >= 0.5).
For each threshold t:

- neardup: ``Index.create(url, name, threshold=t)`` with its default tuned bands x rows and the
  ground truth's normalisation (lowercase, collapsed whitespace), every document added, then
  ``pairs()``: verified pairs with exact Jaccard >= t, copies of one text included;
- datasketch ``MinHashLSH(threshold=t, num_perm=128)`` (it picks its own b and r) over MinHash
  signatures of the same shingle strings (computed once, reused for every t); its pairs are all
  pairs of documents that share a bucket, unverified, as its users get them;
- datasketch + estimate filter: those candidates kept when their MinHash estimate is >= t.

Recall per Jaccard band = truth pairs of the band that a method reports / truth pairs of the band.
At the threshold: positives = truth pairs with J >= t; precision = reported pairs that are
positives / reported pairs (a reported pair below t, or absent from the truth file and so below
0.5, is false); F1 = their harmonic mean. With --limit, only the first N documents are used and
the truth is restricted to pairs among them.

Writes quality.md and quality.png into --out-dir.
"""

from __future__ import annotations

import gzip
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from _common import (
    NUM_PERM,
    TRUTH_CONFIG,
    Report,
    database,
    header,
    pyplot,
    read_jsonl,
    timed,
    truth_normalize,
)
from _options import add_db, add_debian, add_out_dir, fractions, parser, truth_file
from _rivals import datasketch_minhash
from neardup.core import normalize
from neardup.core.distinct import distinct
from neardup.index import Index
from neardup.plot import plot_evaluation

# The threshold whose neardup eval report is drawn (eval.png): the default one.
EVAL_PLOT_THRESHOLD = 0.8
BANDS: list[tuple[float, float]] = [(0.5, 0.6), (0.6, 0.7), (0.7, 0.8), (0.8, 0.9), (0.9, 1.0)]
BAND_LABELS = ["[0.5,0.6)", "[0.6,0.7)", "[0.7,0.8)", "[0.8,0.9)", "[0.9,1.0]"]
Keys = npt.NDArray[np.int64]


@dataclass
class Truth:
    """Every truth pair among the documents: sorted keys (lo * n + hi) and their exact Jaccard."""

    keys: Keys
    jaccard: npt.NDArray[np.float64]

    def band_mask(self, lo: float, hi: float) -> npt.NDArray[np.bool_]:
        upper = self.jaccard <= hi if hi >= 1.0 else self.jaccard < hi
        return (self.jaccard >= lo) & upper


@dataclass
class Score:
    method: str
    threshold: float
    banding: str
    reported: int
    true_pos: int
    false_below: int  # in the truth, with 0.5 <= J < t
    false_unlisted: int  # not in the truth: J < 0.5
    positives: int
    band_recall: list[float]
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def precision(self) -> float:
        return self.true_pos / self.reported if self.reported else float("nan")

    @property
    def recall(self) -> float:
        return self.true_pos / self.positives if self.positives else float("nan")

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r > 0 else float("nan")


def read_truth(path: Path, position: dict[str, int]) -> Truth:
    """Truth pairs whose two documents are both among ``position`` (id -> row), J = |A∩B| / |A∪B|
    from the exact counts (not the rounded printed value)."""
    n = len(position)
    keys: list[int] = []
    jac: list[float] = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        next(f)
        for line in f:
            a, b, _, inter, union = line.rstrip("\n").split("\t")
            i, j = position.get(a), position.get(b)
            if i is None or j is None:
                continue
            lo, hi = (i, j) if i < j else (j, i)
            keys.append(lo * n + hi)
            jac.append(int(inter) / int(union))
    k = np.array(keys, dtype=np.int64)
    order = np.argsort(k, kind="stable")
    return Truth(k[order], np.array(jac, dtype=np.float64)[order])


def read_corpus(
    corpus: Path, truth_path: Path, limit: int | None
) -> tuple[list[tuple[str, str]], Truth, npt.NDArray[np.int64], list[str]]:
    """The documents (the first ``limit``), their truth, each one's distinct normalised text (its
    content, numbered in order of appearance) and those texts."""
    docs = list(read_jsonl(corpus, limit))
    position = {doc_id: i for i, (doc_id, _) in enumerate(docs)}
    if len(position) != len(docs):
        raise SystemExit(f"{corpus}: ids repeat")
    truth = read_truth(truth_path, position)
    seen: dict[str, int] = {}
    numbered = (seen.setdefault(truth_normalize(text), len(seen)) for _, text in docs)
    content = np.fromiter(numbered, dtype=np.int64, count=len(docs))
    return docs, truth, content, list(seen)


def score(method: str, banding: str, t: float, reported: Keys, truth: Truth) -> Score:
    """Precision, recall and F1 at t, and recall per Jaccard band, of distinct reported pair keys."""
    reported = distinct(reported)
    pos = np.searchsorted(truth.keys, reported)
    listed = pos < truth.keys.size
    listed[listed] = truth.keys[pos[listed]] == reported[listed]
    j_reported = truth.jaccard[pos[listed]]
    found = np.isin(truth.keys, reported, assume_unique=True)
    recalls = []
    for lo, hi in BANDS:
        mask = truth.band_mask(lo, hi)
        recalls.append(float(found[mask].sum() / mask.sum()) if mask.any() else float("nan"))
    return Score(
        method=method,
        threshold=t,
        banding=banding,
        reported=int(reported.size),
        true_pos=int((j_reported >= t).sum()),
        false_below=int((j_reported < t).sum()),
        false_unlisted=int((~listed).sum()),
        positives=int((truth.jaccard >= t).sum()),
        band_recall=recalls,
    )


@dataclass
class EvalCheck:
    """neardup eval's recall estimate for one collection, next to the recall the truth gives."""

    threshold: float
    sample: int
    contents: int
    estimate: float
    low: float
    high: float
    sampled_true: int
    truth_recall: float
    truth_pairs: int
    seconds: float


def content_recall(
    found: Keys, truth: Truth, content: npt.NDArray[np.int64], n: int, t: float
) -> tuple[float, int]:
    """Recall at t over pairs of distinct contents (documents with different normalised texts), the
    unit neardup eval samples: identical copies are left out on both sides."""
    lo, hi = truth.keys // n, truth.keys % n
    keep = (truth.jaccard >= t) & (content[lo] != content[hi])
    a, b = content[lo[keep]], content[hi[keep]]
    true_pairs = distinct(np.minimum(a, b) * n + np.maximum(a, b))
    fa, fb = content[found // n], content[found % n]
    got = distinct(np.minimum(fa, fb) * n + np.maximum(fa, fb))
    return float(np.isin(true_pairs, got).mean()), int(true_pairs.size)


def run_neardup(
    url: str, schema: str, docs: list[tuple[str, str]], t: float, eval_sample: int = 0
) -> tuple[Keys, str, dict[str, float], Any]:
    position = {doc_id: i for i, (doc_id, _) in enumerate(docs)}
    n = len(docs)
    ingest_s, index = timed(
        lambda: Index.create(url, f"quality_{round(t * 100)}", t, schema=schema, **TRUTH_CONFIG)
    )
    with index:
        seconds, _ = timed(lambda: index.add(docs))
        ingest_s += seconds
        pairs_s, listed = timed(lambda: list(index.pairs()))
        banding = f"{index.params.bands}x{index.params.rows}"
        evaluation = timed(lambda: index.evaluate(eval_sample, seed=1)) if eval_sample else None
    lo = np.fromiter((position[a] for a, _, _ in listed), dtype=np.int64, count=len(listed))
    hi = np.fromiter((position[b] for _, b, _ in listed), dtype=np.int64, count=len(listed))
    keys = np.minimum(lo, hi) * n + np.maximum(lo, hi)
    return keys, banding, {"ingest with pairs": ingest_s, "list pairs": pairs_s}, evaluation


def datasketch_signatures(texts: Sequence[str]) -> list[Any]:
    """datasketch MinHash of each text over the truth's shingle strings (UTF-8), as its users do."""
    return [datasketch_minhash(text) for text in texts]


def datasketch_candidates(minhashes: Sequence[Any], t: float) -> tuple[Keys, str, dict[str, float]]:
    """Every pair of documents sharing a bucket of MinHashLSH(threshold=t), as pair keys."""
    from datasketch import MinHashLSH

    n = len(minhashes)
    lsh = MinHashLSH(threshold=t, num_perm=NUM_PERM)

    def insert() -> None:
        with lsh.insertion_session() as session:
            for i, m in enumerate(minhashes):
                session.insert(i, m, check_duplication=False)

    def candidates() -> Keys:
        chunks = [np.empty(0, np.int64)]
        for i, m in enumerate(minhashes):
            others = np.fromiter(lsh.query(m), dtype=np.int64)
            chunks.append(i * n + others[others > i])
        return distinct(np.concatenate(chunks))

    insert_s, _ = timed(insert)
    query_s, keys = timed(candidates)
    return keys, f"{lsh.b}x{lsh.r}", {"insert": insert_s, "candidates": query_s}


def estimate_filter(keys: Keys, hashvalues: npt.NDArray[np.uint64], t: float) -> Keys:
    """The candidate pairs whose MinHash estimate (share of equal rows) is >= t."""
    n = hashvalues.shape[0]
    keep = np.zeros(keys.size, dtype=np.bool_)
    step = 200_000
    for s in range(0, keys.size, step):
        a, b = keys[s : s + step] // n, keys[s : s + step] % n
        keep[s : s + step] = (hashvalues[a] == hashvalues[b]).mean(axis=1) >= t
    return keys[keep]


def fmt(x: float, digits: int = 4) -> str:
    return "-" if x != x else f"{x:.{digits}f}"


def plot(scores: list[Score], thresholds: list[float], truth_counts: list[int], path: Path) -> None:
    plt = pyplot()
    methods = list(dict.fromkeys(s.method for s in scores))
    colors = ["#1f6fb4", "#e8842a", "#9ac36b", "#888888"]
    cols = 2 if len(thresholds) > 1 else 1
    rows = (len(thresholds) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(6.2 * cols, 3.6 * rows), squeeze=False, sharey=True)
    x = np.arange(len(BANDS))
    width = 0.8 / len(methods)
    for ax, t in zip(axes.flat, thresholds, strict=False):
        bandings = []
        for m, method in enumerate(methods):
            s = next(s for s in scores if s.threshold == t and s.method == method)
            offset = (m - (len(methods) - 1) / 2) * width
            ax.bar(x + offset, s.band_recall, width, label=method, color=colors[m % len(colors)])
            bandings.append(s.banding)
        edge = next((i for i, (lo, _) in enumerate(BANDS) if lo >= t), len(BANDS)) - 0.5
        ax.axvline(edge, color="black", linestyle="--", linewidth=1)
        # One banding per tool (both datasketch variants share theirs).
        per_tool = {m.split()[0]: b for m, b in zip(methods, bandings, strict=True)}
        ax.set_title(f"t = {t}: " + ", ".join(f"{k} {v}" for k, v in per_tool.items()), fontsize=10)
        ax.set_xticks(x, [f"{b}\n{c:,}" for b, c in zip(BAND_LABELS, truth_counts, strict=True)], fontsize=8)
        ax.set_ylim(0, 1.05)
        ax.set_ylabel("recall in band")
        ax.grid(axis="y", alpha=0.3)
    for ax in list(axes.flat)[len(thresholds) :]:
        ax.set_visible(False)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(methods), fontsize=9, frameon=False)
    fig.suptitle(
        "Share of ground-truth pairs reported per exact Jaccard band (truth pairs below each band);\n"
        "pairs right of the dashed line are positives at that threshold",
        fontsize=11,
    )
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    ap = parser(__doc__)
    add_debian(ap, truth=True)
    ap.add_argument("--thresholds", type=fractions, default=fractions("0.5,0.7,0.8,0.9"))
    add_db(ap)
    ap.add_argument("--no-filter", action="store_true", help="skip the datasketch + estimate filter variant")
    ap.add_argument(
        "--eval-sample", type=int, default=1000, help="contents neardup eval samples per collection (0: skip)"
    )
    add_out_dir(ap)
    args = ap.parse_args()
    thresholds = args.thresholds
    args.out_dir.mkdir(parents=True, exist_ok=True)
    truth_path = truth_file(args)

    docs, truth, content, _ = read_corpus(args.corpus, truth_path, args.limit)
    differ = sum(normalize(text) != truth_normalize(text) for _, text in docs)
    truth_counts = [int(truth.band_mask(lo, hi).sum()) for lo, hi in BANDS]
    print(f"{len(docs):,} documents, {truth.keys.size:,} truth pairs", file=sys.stderr)

    report = Report()
    scores: list[Score] = []
    checks: list[EvalCheck] = []
    with database(args.db, "nd_quality", warm=TRUTH_CONFIG) as (url, schema):
        for t in thresholds:
            print(f"neardup at {t} ...", file=sys.stderr)
            keys, banding, seconds, evaluated = run_neardup(url, schema, docs, t, args.eval_sample)
            scores.append(score("neardup", banding, t, keys, truth))
            scores[-1].seconds = seconds
            if evaluated is not None:
                eval_s, ev = evaluated
                if t == EVAL_PLOT_THRESHOLD:
                    plot_evaluation(ev, args.out_dir / "eval.png")
                recall, truth_pairs = content_recall(keys, truth, content, len(docs), t)
                checks.append(
                    EvalCheck(
                        t,
                        ev.sampled,
                        ev.contents,
                        ev.recall if ev.recall is not None else float("nan"),
                        ev.recall_low,
                        ev.recall_high,
                        ev.true_pairs,
                        recall,
                        truth_pairs,
                        eval_s,
                    )
                )
        report.say(
            *header(
                "Quality against the exact ground truth: Debian bookworm",
                url,
                args.db is not None,
                [
                    f"Corpus: `{args.corpus.name}`, {len(docs):,} documents"
                    + (f" (the first {args.limit:,})" if args.limit else "")
                    + f"; truth `{truth_path.name}`: {truth.keys.size:,} pairs with J >= 0.5 among them",
                    f"{NUM_PERM} permutations, character 5-shingles of the ground truth's normalisation "
                    "(lowercase, collapsed whitespace) for every method, so that neardup's verified "
                    "Jaccard is the truth's; neardup's own default (NFKC + case folding) normalises "
                    f"{differ:,} of these documents differently",
                ],
            )
        )

    print("datasketch signatures ...", file=sys.stderr)
    sign_s, minhashes = timed(lambda: datasketch_signatures([text for _, text in docs]))
    hashvalues: npt.NDArray[np.uint64] = np.stack([m.hashvalues for m in minhashes]).astype(np.uint64)
    for t in thresholds:
        print(f"datasketch at {t} ...", file=sys.stderr)
        keys, banding, seconds = datasketch_candidates(minhashes, t)
        scores.append(score("datasketch MinHashLSH", banding, t, keys, truth))
        scores[-1].seconds = seconds
        if not args.no_filter:
            filter_s, kept = timed(partial(estimate_filter, keys, hashvalues, t))
            scores.append(score("datasketch + estimate >= t", banding, t, kept, truth))
            scores[-1].seconds = {**seconds, "filter": filter_s}
        del keys

    report.say("## At the threshold", "")
    report.say(
        "Positives are the truth pairs with exact J >= t. A reported pair is false when its exact J "
        "is below t: between 0.5 and t (listed in the truth file) or below 0.5 (not listed).",
        "",
    )
    rows = []
    for t in thresholds:
        for s in (s for s in scores if s.threshold == t):
            rows.append(
                [
                    t,
                    s.method,
                    s.banding,
                    f"{s.positives:,}",
                    f"{s.reported:,}",
                    f"{s.true_pos:,}",
                    f"{s.false_below:,}",
                    f"{s.false_unlisted:,}",
                    fmt(s.precision),
                    fmt(s.recall),
                    fmt(s.f1),
                ]
            )
    report.table(
        [
            "t",
            "method",
            "b×r",
            "positives",
            "reported",
            "true",
            "false, 0.5 <= J < t",
            "false, J < 0.5",
            "precision",
            "recall",
            "F1",
        ],
        "rllrrrrrrrr",
        rows,
    )

    report.say("## Recall per Jaccard band", "")
    report.say(
        "Share of the truth pairs in each band of exact Jaccard that the method reports. Bands "
        "below t are not positives at that threshold: neardup reports none of them by design "
        "(verified >= t), datasketch's share there is the candidates it reports that are too "
        "dissimilar.",
        "",
    )
    band_rows: list[list[object]] = [["", "truth pairs", "", *[f"{c:,}" for c in truth_counts]]]
    for t in thresholds:
        for s in (s for s in scores if s.threshold == t):
            band_rows.append([t, s.method, s.banding, *[fmt(r) for r in s.band_recall]])
    report.table(["t", "method", "b×r", *BAND_LABELS], "rll" + "r" * len(BANDS), band_rows)

    if checks:
        report.say("## `neardup eval` against the truth", "")
        report.say(
            f"`Index.evaluate(sample={args.eval_sample}, seed=1)` (what `neardup eval` runs) on each "
            "neardup collection above: its recall estimate from the sampled contents, with a 95% "
            "bootstrap interval, next to the recall the ground truth gives over every pair of distinct "
            "contents (documents with the same normalised text are one content, as in eval).",
            "",
        )
        report.table(
            [
                "t",
                "sampled contents",
                "true pairs touching the sample",
                "eval recall (95% interval)",
                "truth recall, all content pairs",
                "truth pairs",
                "inside the interval",
                "eval s",
            ],
            "rrrrrrlr",
            [
                [
                    c.threshold,
                    f"{c.sample:,} of {c.contents:,}",
                    f"{c.sampled_true:,}",
                    f"{fmt(c.estimate)} ({fmt(c.low)}-{fmt(c.high)})",
                    fmt(c.truth_recall),
                    f"{c.truth_pairs:,}",
                    "yes" if c.low <= c.truth_recall <= c.high else "no",
                    f"{c.seconds:.1f}",
                ]
                for c in checks
            ],
        )

        if EVAL_PLOT_THRESHOLD in thresholds:
            report.say(
                f"The report of `neardup eval --sample {args.eval_sample} --seed 1 --plot` at "
                f"t = {EVAL_PLOT_THRESHOLD}: the stored pairs' similarities, and the share of sampled "
                "pairs that became LSH candidates per similarity bin against the S-curve.",
                "",
                "![neardup eval at 0.8](eval.png)",
                "",
            )

    report.say("## Time (for orientation; bench_speed.py measures speed)", "")
    time_rows: list[list[object]] = []
    for t in thresholds:
        for s in (s for s in scores if s.threshold == t):
            time_rows.append([t, s.method, ", ".join(f"{k} {v:.2f} s" for k, v in s.seconds.items())])
    report.table(["t", "method", "seconds"], "rll", time_rows)
    report.say(
        f"datasketch's MinHash signatures were computed once for all thresholds: {sign_s:.1f} s "
        f"({len(docs) / max(sign_s, 1e-9):,.0f} docs/s). neardup's time includes its signatures and "
        "verification, once per threshold (each threshold is its own collection).",
        "",
        "![recall per Jaccard band](quality.png)",
    )

    args.out_dir.mkdir(parents=True, exist_ok=True)
    report.write(args.out_dir / "quality.md")
    plot(scores, thresholds, truth_counts, args.out_dir / "quality.png")
    print(f"wrote {args.out_dir / 'quality.png'}", file=sys.stderr)


if __name__ == "__main__":
    main()
