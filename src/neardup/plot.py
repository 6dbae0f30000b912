"""Pictures (matplotlib, an optional dependency: ``neardup[plot]``): the S-curve of a banding with its
false-positive and false-negative areas, and the report of ``Index.evaluate``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from neardup.core import Banding, candidate_probability
from neardup.errors import NeardupError
from neardup.evaluation import Evaluation


def pyplot() -> Any:
    """matplotlib.pyplot drawing to files only, or NeardupError saying how to install it."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only, no screen needed
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise NeardupError("plotting needs matplotlib: pip install 'neardup[plot]'") from exc
    return plt


def plot_scurve(banding: Banding, path: Path) -> None:
    """Write the S-curve of ``banding`` with its threshold, FP and FN areas to an image file."""
    plt = pyplot()
    t, b, r = banding.threshold, banding.bands, banding.rows
    s = np.linspace(0.0, 1.0, 501)
    p = np.array([candidate_probability(x, b, r) for x in s])
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
    ax.plot(s, p, color="black", lw=2, label=f"P(candidate) = 1 - (1 - s^{r})^{b}")
    below, above = s <= t, s >= t
    ax.fill_between(
        s[below],
        0,
        p[below],
        color="tab:red",
        alpha=0.35,
        label=f"false positives (mean {banding.false_positive_rate:.3f})",
    )
    ax.fill_between(
        s[above],
        p[above],
        1,
        color="tab:blue",
        alpha=0.35,
        label=f"false negatives (mean {banding.false_negative_rate:.3f})",
    )
    ax.axvline(t, color="tab:gray", ls="--", label=f"threshold {t:g}")
    ax.set(
        xlim=(0, 1),
        ylim=(0, 1.02),
        xlabel="Jaccard similarity s",
        ylabel="probability of becoming a candidate",
        title=f"LSH banding: {b} bands x {r} rows",
    )
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plot_evaluation(ev: Evaluation, path: Path) -> None:
    """Write the evaluation report to an image file: the similarity histogram of the stored pairs,
    and the sampled pairs' candidate rate per bin (±1.96 standard errors) against the S-curve."""
    plt = pyplot()
    fig, (hist, curve) = plt.subplots(1, 2, figsize=(11, 4.2), dpi=120)
    shown = [b for b in ev.bins if b.high > ev.threshold]
    hist.bar(
        [b.low for b in shown],
        [b.stored for b in shown],
        width=[b.high - b.low for b in shown],
        align="edge",
        color="tab:blue",
        edgecolor="white",
    )
    hist.set(
        xlim=(ev.threshold, 1.0),
        xlabel="Jaccard similarity",
        ylabel="stored pairs",
        title=f"{ev.collection_pairs:,} stored pairs of {ev.collection!r}",
    )
    s = np.linspace(ev.floor, 1.0, 301)
    curve.plot(
        s,
        candidate_probability(s, ev.bands, ev.rows),
        color="black",
        lw=1.5,
        label=f"S-curve 1 - (1 - s^{ev.rows})^{ev.bands}",
    )
    measured = [b for b in ev.bins if b.pairs and b.mean_jaccard is not None]
    p = np.array([b.empirical for b in measured], dtype=np.float64)
    err = 1.96 * np.array([b.stderr for b in measured], dtype=np.float64)
    curve.errorbar(
        [b.mean_jaccard for b in measured],
        p,
        yerr=[np.minimum(err, p), np.minimum(err, 1.0 - p)],
        fmt="o",
        color="tab:red",
        capsize=3,
        label=f"sampled pairs ({ev.truth_pairs:,}), ±1.96 SE",
    )
    curve.axvline(ev.threshold, color="tab:gray", ls="--", label=f"threshold {ev.threshold:g}")
    recall = "no true pairs" if ev.recall is None else f"recall {ev.recall:.3f}"
    curve.set(
        xlim=(ev.floor, 1.0),
        ylim=(-0.02, 1.02),
        xlabel="Jaccard similarity (exact)",
        ylabel="share of pairs that are LSH candidates",
        title=f"{ev.bands} bands x {ev.rows} rows, {ev.sampled:,} sampled contents, {recall}",
    )
    curve.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
