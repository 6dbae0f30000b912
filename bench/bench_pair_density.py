"""Where the pairs of a threshold's bin [t, t + 0.05) lie: the measurements behind the tuner's prior.

    python bench/bench_pair_density.py [TRUTH ...] [--thresholds 0.5,0.55,...,0.9] [--out FILE]

Its report is the section "pair density" of docs/benchmarks/threshold-unseen.md.

Each TRUTH is a ground-truth TSV (``id_a id_b jaccard intersection union``: Debian's in
../shared/data, or one written by ``bench/exact_truth.py``); by default Debian's. No index is
built: for each corpus and each threshold t, the truth pairs with J in [t, t + 0.05) (document
pairs, as ``bench_threshold.py`` counts recall) are described by

- their counts in ten sub-bins of the bin, and their mean position in it (0 at t, 1 at its top);
- the linear density with the same effect on recall: for the tuner's banding at t (128
  permutations, the default target), the share ``top`` at the bin's top of the density at t
  such that a linear density falling from t to ``top`` gives the expected recall (the S-curve's
  mean) these pairs have. 1 is an even spread, 0 a triangle; below 0, more bunched at t than any
  linear density;
- the expected recall of the banding under the pairs themselves, under an even spread and under
  the prior (``tuning.PRIOR_TOP``), and P(t).

The prior must lie at or below the lowest ``top`` met, so that on these corpora it never promises
more recall than the pairs' own spread gives.
"""

from __future__ import annotations

import gzip
import sys
from pathlib import Path

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _options
from _common import DEBIAN, DEBIAN_TRUTH_NAME, Report, header
from neardup.config import FN_WEIGHT, FP_WEIGHT
from neardup.core.tuning import (
    DEFAULT_RECALL_AT_THRESHOLD,
    PRIOR_TOP,
    THRESHOLD_BIN,
    candidate_probability,
    optimal_params,
    prior_density,
)

SUB_BINS = 10


# The page this report is a section of: recall at the threshold on corpora not tuned on.
PAGE_TITLE = "Recall at the threshold on corpora the tuner was not tuned on"


def read_jaccard(path: Path) -> npt.NDArray[np.float64]:
    """Every truth pair's exact Jaccard, from its intersection and union."""
    values: list[float] = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        next(f)
        for line in f:
            *_, inter, union = line.rstrip("\n").split("\t")
            values.append(int(inter) / int(union))
    return np.array(values)


def equivalent_top(t: float, bands: int, rows: int, observed: float) -> float:
    """The top of the linear density f(x) = 1 + a (1 - 2x) whose mean of P equals ``observed``
    (recall is linear in a), as the density at the top over that at t: (1 - a) / (1 + a); -inf
    past the triangle's a = 1."""
    even = float(prior_density(t, 128, 1.0).recall(bands, rows)[0])
    triangle = float(prior_density(t, 128, 0.0).recall(bands, rows)[0])
    slope = triangle - even  # the change of the mean for a = 1
    if slope == 0:
        return 1.0
    a = (observed - even) / slope
    return float("-inf") if a >= 1 else (1 - a) / (1 + a)


def rows_for(name: str, jaccard: npt.NDArray[np.float64], thresholds: list[float]) -> list[list[object]]:
    rows = []
    for t in thresholds:
        inside = jaccard[(jaccard >= t) & (jaccard < t + THRESHOLD_BIN)]
        if not inside.size:
            rows.append([name, t, 0, "", "", "", "", "", "", "", ""])
            continue
        x = (inside - t) / THRESHOLD_BIN
        counts = np.histogram(x, bins=SUB_BINS, range=(0, 1))[0]
        b = optimal_params(t, 128, FP_WEIGHT, FN_WEIGHT, recall_at_threshold=DEFAULT_RECALL_AT_THRESHOLD)
        observed = float(candidate_probability(inside, b.bands, b.rows).mean())
        top = equivalent_top(t, b.bands, b.rows, observed)
        rows.append(
            [
                name,
                t,
                f"{inside.size:,}",
                " ".join(f"{c / counts.mean():.2f}" for c in counts),
                f"{x.mean():.3f}",
                f"{b.bands}x{b.rows}",
                "past the triangle" if top == float("-inf") else f"{top:.2f}",
                f"{observed:.4f}",
                f"{float(prior_density(t, 128, 1.0).recall(b.bands, b.rows)[0]):.4f}",
                f"{b.threshold_bin_recall:.4f}",
                f"{b.candidate_probability_at_threshold:.4f}",
            ]
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = _options.parser(__doc__)
    parser.add_argument("truth", nargs="*", type=Path, default=[DEBIAN.parent / DEBIAN_TRUTH_NAME])
    parser.add_argument("--thresholds", default=",".join(f"{0.5 + 0.05 * i:.2f}" for i in range(9)))
    _options.add_out(parser, "threshold-unseen.md")
    args = parser.parse_args(argv)
    thresholds = [float(x) for x in args.thresholds.split(",")]
    report = Report()
    report.say(*header("Where the pairs of the threshold's bin lie", None, False, level=2))
    report.say(
        f"Per bin [t, t + {THRESHOLD_BIN:g}): the truth pairs (documents), their counts in {SUB_BINS} "
        "sub-bins over the mean count (1.00 is an even spread), their mean position (0 at t, 1 at "
        "the top; 0.5 even), and for the tuner's banding at t: the linear density's top with the "
        "same expected recall (1 even, 0 a triangle), the expected recall under the pairs "
        f"themselves, under an even spread and under the prior (top {PRIOR_TOP:g}), and P(t).",
        "",
    )
    table = []
    for path in args.truth:
        print(f"reading {path} ...", file=sys.stderr)
        table += rows_for(path.name.split(".")[0], read_jaccard(path), thresholds)
    report.table(
        [
            "corpus",
            "t",
            "pairs",
            "sub-bins / mean",
            "mean position",
            "banding",
            "equivalent top",
            "recall, the pairs",
            "even",
            "prior",
            "P(t)",
        ],
        "lrrlrlrrrrr",
        table,
    )
    report.write(args.out, section="pair density", title=PAGE_TITLE)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
