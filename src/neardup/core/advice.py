"""What people's labels say about the threshold: labelled precision per similarity bin, with
Wilson intervals, and the lowest threshold whose labelled pairs meet a target precision.

Approximate: a precision from labels is a sample's (the pairs people chose to label), and the
interval is Wilson's at ``intervals.CONFIDENCE``; the advice is only as good as the labels are
representative of the pairs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from neardup.core.intervals import wilson

# Bins of labelled similarity this wide, from 0: 0.05 gives 20 bins over [0, 1], few enough to
# read and to fill with a few hundred labels.
BIN_WIDTH = 0.05
DEFAULT_TARGET = 0.95


class _Verdicts:
    """Some labels, ``duplicates`` of ``labels`` saying duplicate, and what they measure."""

    labels: int
    duplicates: int

    @property
    def precision(self) -> float | None:
        """Share of the labels that say duplicate (None without labels)."""
        return self.duplicates / self.labels if self.labels else None

    @property
    def interval(self) -> tuple[float, float]:
        """Wilson interval of the precision ((0, 1) without labels)."""
        return wilson(self.duplicates, self.labels)


@dataclass(frozen=True)
class LabelBin(_Verdicts):
    """Labels of pairs whose similarity is in [low, high) (the last bin holds 1.0)."""

    low: float
    high: float
    labels: int
    duplicates: int


@dataclass(frozen=True)
class Advice(_Verdicts):
    """Labelled precision per bin and the lowest threshold whose labels meet ``target``."""

    target: float
    bins: list[LabelBin]
    threshold: float | None
    """The lowest threshold t (the floor, or a bin edge above it) such that the labelled pairs at
    or above t are duplicates at a rate whose Wilson interval lies at or above ``target`` (its
    low end meets it); None if none does."""
    labels: int
    """Labels the advised threshold rests on (those at or above it; 0 without one)."""
    duplicates: int
    """Of those, labelled duplicate."""
    total: int = 0
    """Every labelled stored pair considered."""
    point_threshold: float | None = field(default=None)
    """The lowest bin edge whose labelled precision (the point estimate) meets ``target``: the
    threshold the labels suggest before their uncertainty is counted."""

    def summary(self) -> str:
        """One line for people: the advised threshold and what it rests on, or why there is none."""
        if self.total == 0:
            return "no labelled stored pairs yet: label pairs on the review pages to get advice"
        if self.threshold is None or self.precision is None:
            return (
                f"no threshold reaches labelled precision {self.target:g} with 95% confidence "
                f"({self.total} labels; more labels, or a lower target, may)"
            )
        low, high = self.interval
        return (
            f"lowest threshold with labelled precision >= {self.target:g}: {self.threshold:g} "
            f"(precision {self.precision:.3f}, 95% interval [{low:.3f}, {high:.3f}], "
            f"from {self.labels} of {self.total} labels)"
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready values."""
        return {
            "target": self.target,
            "threshold": self.threshold,
            "point_threshold": self.point_threshold,
            "labels": self.labels,
            "duplicates": self.duplicates,
            "precision": self.precision,
            "interval": list(self.interval),
            "total": self.total,
            "bins": [
                {
                    "low": b.low,
                    "high": b.high,
                    "labels": b.labels,
                    "duplicates": b.duplicates,
                    "precision": b.precision,
                    "interval": list(b.interval),
                }
                for b in self.bins
            ],
        }


def advise(
    similarities: Sequence[float],
    duplicate: Sequence[bool],
    target: float = DEFAULT_TARGET,
    floor: float = 0.0,
) -> Advice:
    """Labelled precision per ``BIN_WIDTH`` bin of similarity (bins with labels only), and the
    lowest threshold, ``floor`` (the collection's threshold: no pair below it is stored) or a bin
    edge above it, whose labels at or above it meet ``target`` with 95% confidence (Wilson's low
    end), with the labels it rests on. ``similarities[i]`` is a labelled pair's similarity,
    ``duplicate[i]`` whether it was labelled duplicate."""
    if not 0.0 < target <= 1.0 or math.isnan(target):
        raise ValueError(f"target must be in (0, 1], got {target!r}")
    sims = np.asarray(similarities, dtype=np.float64)
    dup = np.asarray(duplicate, dtype=bool)
    if sims.shape != dup.shape:
        raise ValueError("one verdict per similarity")
    nbins = round(1 / BIN_WIDTH)
    # Bin i holds [i w, (i + 1) w); 1.0 falls in the last bin. The tolerance keeps a similarity
    # that is an edge in decimal (0.85) in the bin it starts, however it rounds in binary.
    index = np.clip(np.floor(sims / BIN_WIDTH + _TOLERANCE).astype(np.int64), 0, nbins - 1)
    labels = np.bincount(index, minlength=nbins)
    dups = np.bincount(index, weights=dup, minlength=nbins).astype(np.int64)
    bins = [LabelBin(_edge(i), _edge(i + 1), int(labels[i]), int(dups[i])) for i in range(nbins) if labels[i]]
    # Labels at or above each candidate: suffix sums over the similarities sorted.
    order = np.argsort(sims, kind="stable")
    ascending = sims[order]
    dups_from = np.concatenate([np.cumsum(dup[order][::-1])[::-1], [0]])
    candidates = [floor, *(e for e in map(_edge, range(nbins)) if e > floor)]
    chosen: tuple[float, int, int] | None = None
    point = None
    for t in candidates:
        first = int(np.searchsorted(ascending, t - _TOLERANCE, side="left"))
        n, d = sims.size - first, int(dups_from[first])
        if n == 0:
            break
        if point is None and d / n >= target:
            point = t
        if chosen is None and wilson(d, n)[0] >= target:
            chosen = (t, n, d)
    if chosen is None:
        return Advice(target, bins, None, 0, 0, int(sims.size), point)
    return Advice(target, bins, chosen[0], chosen[1], chosen[2], int(sims.size), point)


_TOLERANCE = 1e-9


def _edge(i: int) -> float:
    return round(i * BIN_WIDTH, 10)
