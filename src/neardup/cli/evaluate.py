"""Commands that measure: eval (recall and precision of a collection) and tune (bands and rows)."""

from __future__ import annotations

import argparse
import json
import math
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neardup.cli.command import command
from neardup.cli.connect import open_database
from neardup.cli.options import (
    FLOOR,
    NUM_PERM,
    POSITIVE,
    RECALL_AT_THRESHOLD,
    SEED,
    THRESHOLD,
    WEIGHT,
    library_default,
    plot,
)
from neardup.cli.output import check_writable, emit, rounded, written

if TYPE_CHECKING:
    from neardup.core.tuning import Banding

EVAL_COLUMNS = (
    "low",
    "high",
    "pairs",
    "candidates",
    "found",
    "recall",
    "recall_low",
    "recall_high",
    "expected",
    "mean_jaccard",
    "empirical",
    "stderr",
    "theoretical",
    "stored",
)


def _eval_options(p: argparse.ArgumentParser) -> None:
    from neardup.index import Index

    sample, seed = library_default(Index.evaluate, "sample"), library_default(Index.evaluate, "seed")
    p.add_argument("--sample", type=POSITIVE, default=sample, help=f"contents to sample (default {sample})")
    p.add_argument("--seed", type=SEED, default=seed, help=f"seed of the sample (default {seed})")
    p.add_argument(
        "--floor",
        type=FLOOR,
        help="lowest similarity evaluated, in (0, threshold] (default: half the threshold)",
    )
    plot(p, "also draw the similarity histogram and the S-curve")


@command("eval", _eval_options)
def cmd_eval(args: argparse.Namespace) -> int:
    """Measure recall and precision against exact truth on a sample (needs stored texts).

    Each sampled content is compared exactly with every stored one. The recall of the pairs in
    the threshold's own bin [t, t + 0.05) with its 95% Wilson interval beside the S-curve's value,
    the recall of all pairs at or above the threshold with its 95% interval, and precision go to
    standard error, with what people's labels say: their precision and the lowest threshold they
    support (as `labels --advise` reports it). Standard output has one row per similarity bin,
    the threshold's bin first:
    the sampled pairs, how many of them are LSH candidates and how many are stored, the recall
    (stored / pairs, at or above the threshold) with its Wilson interval and the S-curve's mean
    over these pairs (expected), the empirical and theoretical (S-curve) candidate probability
    with its standard error, and the stored pairs of the whole collection; --format json gives it
    all as one object (its bins ascending, the threshold's bin also under threshold_bin).

    Example: neardup eval --sample 2000 --seed 7 --plot report.png
    """
    if args.plot:
        from neardup.plot import pyplot

        pyplot()  # refuse before the work, not after it, when matplotlib is missing
        check_writable(args.plot, "--plot")
    with ExitStack() as stack:
        db = open_database(args, stack)
        index = stack.enter_context(db.open(args.collection))
        ev = index.evaluate(args.sample, seed=args.seed, floor=args.floor)
        duplicates, not_duplicates = db.labels.verdicts(args.collection)
        advice = db.labels.advise(args.collection)
    print(str(ev), file=sys.stderr)
    labelled = duplicates + not_duplicates
    if labelled:
        print(
            f"precision by labels: {duplicates / labelled:.4f} ({duplicates} of {labelled} labelled stored "
            "pairs are duplicates)",
            file=sys.stderr,
        )
        print(f"threshold by labels: {advice.summary()}", file=sys.stderr)
    if args.plot:
        from neardup.plot import plot_evaluation

        with written(args.plot, "--plot"):
            plot_evaluation(ev, Path(args.plot))
        print(f"report written to {args.plot}", file=sys.stderr)
    if args.format == "json":
        json.dump(
            {
                **ev.to_dict(),
                "labelled_pairs": labelled,
                "labelled_duplicates": duplicates,
                "label_advice": advice.to_dict(),
            },
            sys.stdout,
        )
        sys.stdout.write("\n")
        return 0

    def cell(v: Any) -> Any:
        return rounded(v) if isinstance(v, float) else v

    rows = ([cell(getattr(b, c)) for c in EVAL_COLUMNS] for b in ev.bins_threshold_first())
    emit(args.format, EVAL_COLUMNS, rows)
    return 0


def _tune_options(p: argparse.ArgumentParser) -> None:
    from neardup.config import FN_WEIGHT, FP_WEIGHT, PARAMETERS

    num_perm, recall = PARAMETERS["num_perm"].default, PARAMETERS["recall_at_threshold"].default
    p.add_argument("--threshold", type=THRESHOLD, required=True, help="in (0, 1]")
    p.add_argument(
        "--num-perm", type=NUM_PERM, default=num_perm, help=f"signature length (default {num_perm})"
    )
    p.add_argument(
        "--recall-at-threshold",
        type=RECALL_AT_THRESHOLD,
        default=recall,
        metavar="R",
        help="expected recall the pairs in [threshold, threshold + 0.05) must reach, in (0, 1) "
        f"(default {recall})",
    )
    p.add_argument(
        "--fp-weight", type=WEIGHT, default=FP_WEIGHT, help=f"weight of false positives (default {FP_WEIGHT})"
    )
    p.add_argument(
        "--fn-weight", type=WEIGHT, default=FN_WEIGHT, help=f"weight of false negatives (default {FN_WEIGHT})"
    )
    plot(p, "also draw the S-curve with the FP and FN areas")


# Under this threshold the recall target needs bands of 3 or 4 rows, whose candidates make queries
# measurably slower: tune says so.
QUERY_COST_BELOW = 0.6


def _candidates_ratio(banding: Banding, untargeted: Banding) -> float | None:
    """Expected candidates per found pair of ``banding`` over those of ``untargeted`` (the uniform
    model's); None where either is undefined (t = 1)."""
    mine, theirs = banding.candidates_per_found_pair, untargeted.candidates_per_found_pair
    if math.isinf(mine) or math.isinf(theirs) or theirs <= 0:
        return None
    return mine / theirs


@command("tune", _tune_options)
def cmd_tune(args: argparse.Namespace) -> int:
    """Choose bands and rows for a threshold (no database needed).

    Among the bandings whose expected recall in [threshold, threshold + 0.05) reaches
    --recall-at-threshold (the closest one when none does), the one with the least weighted FP and
    FN rates. Standard error says the choice; standard output has its P(candidate) at the
    threshold, that bin's expected recall, and its cost: bucket rows a document (one a band) and
    the expected candidates below the threshold per pair found (similarities uniform on [0, 1]:
    a model for comparing bandings, not a forecast for a corpus).

    Example: neardup tune --threshold 0.8 --num-perm 128 --plot scurve.png
    """
    from neardup.core.tuning import optimal_params

    if args.plot:
        check_writable(args.plot, "--plot")
    b = optimal_params(
        args.threshold,
        args.num_perm,
        args.fp_weight,
        args.fn_weight,
        recall_at_threshold=args.recall_at_threshold,
    )
    print(str(b), file=sys.stderr)
    untargeted = optimal_params(args.threshold, args.num_perm, args.fp_weight, args.fn_weight)
    more = _candidates_ratio(b, untargeted)
    if args.threshold < QUERY_COST_BELOW and more is not None and more > 1.0:
        print(
            f"queries cost more under {QUERY_COST_BELOW:g}: these bands make about {more:.1f}x the "
            f"candidates of the {untargeted.bands} x {untargeted.rows} tuned without the recall target "
            "(a model), and a "
            "query reads each of its candidates; measured on Debian package descriptions at 0.5, a "
            "query's p50 is 1.7x (docs/benchmarks/threshold.md)",
            file=sys.stderr,
        )
    if b.threshold_bin_recall < args.recall_at_threshold:
        print(
            f"no banding of {args.num_perm} permutations reaches {args.recall_at_threshold:g}: "
            "give more (--num-perm)",
            file=sys.stderr,
        )
    if args.plot:
        from neardup.plot import plot_scurve

        with written(args.plot, "--plot"):
            plot_scurve(b, Path(args.plot))
        print(f"S-curve written to {args.plot}", file=sys.stderr)
    emit(
        args.format,
        [
            "bands",
            "rows",
            "threshold_point",
            "false_positive_rate",
            "false_negative_rate",
            "candidate_probability_at_threshold",
            "threshold_bin_recall",
            "bucket_rows_per_document",
            "expected_candidates_per_found_pair",
            "candidates_vs_untargeted",
        ],
        [
            (
                b.bands,
                b.rows,
                rounded(b.threshold_point),
                rounded(b.false_positive_rate),
                rounded(b.false_negative_rate),
                rounded(b.candidate_probability_at_threshold),
                rounded(b.threshold_bin_recall),
                b.bucket_rows,
                # None at t = 1, where no interval of pairs lies above it to be found.
                None if math.isinf(b.candidates_per_found_pair) else rounded(b.candidates_per_found_pair),
                None if more is None else rounded(more),
            )
        ],
    )
    return 0
