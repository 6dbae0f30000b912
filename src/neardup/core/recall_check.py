"""What a collection's own pairs say of its recall at the threshold, and the rebuild that would
bring it back to the target when they say it falls short.

The stored pairs of the threshold's bin [t, t + THRESHOLD_BIN) are those the banding found: a pair
of similarity s was found with probability P(s), so each stands for 1 / P(s) pairs of its
similarity, found or not (Horvitz and Thompson's estimator, ``tuning.observed_density``). The
expected recall of the bin is then the found pairs over the pairs they stand for. Approximate: P
is ideal MinHash's S-curve, and the pairs of one family share their fate, so a collection's
realised recall scatters around the expectation more than independent pairs would.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from neardup.core.minhash import MAX_NUM_PERM
from neardup.core.tuning import (
    DEFAULT_RECALL_AT_THRESHOLD,
    OWN_DENSITY_MIN_PAIRS,
    THRESHOLD_BIN,
    Banding,
    evaluate_banding,
    observed_density,
    optimal_params,
)

# The most permutations a restoring rebuild is looked for with: each doubling doubles the
# signature bytes, and past this a re-tuned target is the cheaper advice.
MAX_SUGGESTED_NUM_PERM = 1024
# Sub-bins of the threshold's bin the stored pairs are counted in: their midpoints stand for the
# pairs' similarities, close enough that P changes by far less than the estimate's own error.
BIN_STEPS = 50


def sub_bin_edges(threshold: float) -> list[float]:
    """Edges of BIN_STEPS sub-bins over [t, t + THRESHOLD_BIN) (the last edge is the bin's top;
    a histogram over them counts the pairs above it in a last bin, which the check ignores)."""
    high = min(1.0, threshold + THRESHOLD_BIN)
    if high <= threshold:
        return [threshold]
    return [threshold + (high - threshold) * i / BIN_STEPS for i in range(BIN_STEPS + 1)]


@dataclass(frozen=True)
class Restoration:
    """A rebuild after which the bin's expected recall, from the collection's own pairs, reaches
    the target again, and what it costs."""

    option: str
    """The rebuild's option: ``--recall-at-threshold R`` (re-bands the stored signatures, tuned to
    the collection's own pairs) or ``--num-perm N`` (re-sketches every stored text)."""
    num_perm: int
    bands: int
    rows: int
    expected_recall: float
    """The bin's expected recall with that banding, from the collection's own pairs."""
    bucket_rows_per_content: int
    """Bucket rows each distinct text stores (one a band), against ``Banding.bucket_rows`` now."""
    candidates_ratio: float
    """Expected candidates per pair found, over today's: a model (similarities uniform on [0, 1]),
    for comparing bandings, not a forecast of a corpus's candidates."""


@dataclass(frozen=True)
class RecallCheck:
    """The threshold bin's expected recall, from the prior and from the collection's own pairs."""

    threshold: float
    target: float
    bands: int
    rows: int
    num_perm: int
    pairs: int
    """Stored pairs in [t, t + THRESHOLD_BIN)."""
    prior_recall: float
    """Expected recall under the tuner's prior (``tuning.prior_density``)."""
    own_recall: float | None
    """Expected recall from the stored pairs of the bin (None without any; approximate)."""
    restoration: Restoration | None
    """The rebuild that would restore the target, when ``short``; None otherwise, or when no
    banding of up to MAX_SUGGESTED_NUM_PERM permutations would."""

    @property
    def trusted(self) -> bool:
        """Whether enough pairs lie in the bin for their estimate to replace the prior."""
        return self.own_recall is not None and self.pairs >= OWN_DENSITY_MIN_PAIRS

    @property
    def expected_recall(self) -> float:
        """The estimate to go by: the collection's own once trusted, else the prior's."""
        return self.own_recall if self.trusted and self.own_recall is not None else self.prior_recall

    @property
    def short(self) -> bool:
        """Whether the collection's own pairs put the bin's expected recall under the target."""
        return self.trusted and self.expected_recall < self.target

    def summary(self) -> str:
        """One line for people: the estimate, what it rests on, and the rebuild when it falls short."""
        where = f"[{self.threshold:g}, {min(1.0, self.threshold + THRESHOLD_BIN):g})"
        prior = f"the prior expects {self.prior_recall:.4f}"
        if self.own_recall is None:
            return f"expected recall in {where}: no stored pair lies in it yet; {prior}"
        own = (
            f"expected recall in {where} from the collection's own {self.pairs:,} pairs there: "
            f"{self.own_recall:.4f} (an estimate; {prior})"
        )
        if not self.trusted:
            return f"{own}; fewer than {OWN_DENSITY_MIN_PAIRS} pairs, so the prior stands"
        if not self.short:
            return f"{own}; target {self.target:g} met"
        r = self.restoration
        if r is None:
            return (
                f"{own}; UNDER the target {self.target:g}, and no banding of up to "
                f"{MAX_SUGGESTED_NUM_PERM} permutations reaches it"
            )
        return (
            f"{own}; UNDER the target {self.target:g}: `neardup rebuild {r.option}` would "
            f"band it {r.bands} x {r.rows}"
            + (
                f" of {r.num_perm} permutations (re-sketching every text)"
                if r.num_perm != self.num_perm
                else ""
            )
            + f", expecting {r.expected_recall:.4f}, at {r.bucket_rows_per_content} bucket rows a "
            f"text (now {self.bands}) and about {r.candidates_ratio:.2f}x today's candidates per "
            "pair found (a model)"
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready values."""
        out = asdict(self)
        out.update(trusted=self.trusted, expected_recall=self.expected_recall, short=self.short)
        out["summary"] = self.summary()
        return out


def check_recall(
    threshold: float,
    banding: Banding,
    target: float | None,
    counts: npt.ArrayLike,
    fp_weight: float,
    fn_weight: float,
) -> RecallCheck:
    """The bin's expected recall for ``banding`` from ``counts`` of stored pairs in the sub-bins
    of ``sub_bin_edges(threshold)`` (a trailing count above the bin is ignored), and, when it
    falls under ``target`` (default DEFAULT_RECALL_AT_THRESHOLD), the rebuild that restores it:
    the same target re-tuned to these pairs, else the fewest doubled permutations that reach it.
    ``fp_weight`` and ``fn_weight`` are the tuner's (approximate throughout, see the module)."""
    target = DEFAULT_RECALL_AT_THRESHOLD if target is None else float(target)
    edges = sub_bin_edges(threshold)
    c = np.asarray(counts, dtype=np.float64).reshape(-1)[: max(len(edges) - 1, 1)]
    mids = np.array(edges) if len(edges) == 1 else (np.array(edges[:-1]) + np.array(edges[1:])) / 2.0
    pairs = round(c.sum())
    prior = banding.threshold_bin_recall
    if pairs == 0:
        return RecallCheck(
            threshold, target, banding.bands, banding.rows, banding.num_perm, 0, prior, None, None
        )
    own = observed_density(threshold, mids, c, banding.bands, banding.rows)
    own_recall = float(own.recall(banding.bands, banding.rows)[0])
    check = RecallCheck(
        threshold, target, banding.bands, banding.rows, banding.num_perm, pairs, prior, own_recall, None
    )
    if not check.short:
        return check
    model = banding.candidates_per_found_pair
    num_perm = banding.num_perm
    while num_perm <= max(MAX_SUGGESTED_NUM_PERM, banding.num_perm):
        pick = optimal_params(
            threshold, num_perm, fp_weight, fn_weight, recall_at_threshold=target, density=own
        )
        if pick.threshold_bin_recall >= target:
            option = (
                f"--recall-at-threshold {target:g}"
                if num_perm == banding.num_perm
                else f"--num-perm {num_perm} --recall-at-threshold {target:g}"
            )
            plain = evaluate_banding(threshold, pick.bands, pick.rows, num_perm)
            ratio = plain.candidates_per_found_pair / model if model > 0 else float("inf")
            return RecallCheck(
                threshold,
                target,
                banding.bands,
                banding.rows,
                banding.num_perm,
                pairs,
                prior,
                own_recall,
                Restoration(
                    option, num_perm, pick.bands, pick.rows, pick.threshold_bin_recall, pick.bands, ratio
                ),
            )
        if num_perm >= MAX_NUM_PERM:
            break
        num_perm = min(2 * num_perm, MAX_NUM_PERM)
    return check
