"""The S-curve picture: candidate probability against similarity, with the threshold and the
false-positive and false-negative areas (matplotlib, an optional dependency: ``neardup[plot]``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from neardup.core import Banding, candidate_probability
from neardup.errors import NeardupError


def plot_scurve(banding: Banding, path: Path) -> None:
    """Write the S-curve of ``banding`` with its threshold, FP and FN areas to an image file."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only, no screen needed
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise NeardupError("plotting needs matplotlib: pip install 'neardup[plot]'") from exc
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
