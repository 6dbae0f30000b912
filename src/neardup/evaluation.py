"""What ``Index.evaluate`` reports: recall and precision of the stored pairs against exact truth on a
sample, the similarity histogram of the stored pairs, and the LSH candidate rate per similarity
bin against the S-curve. Pure numpy over arrays the index has read; no SQL here.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np
import numpy.typing as npt

from neardup.core.intervals import clopper_pearson, wilson
from neardup.core.recall_check import RecallCheck
from neardup.core.tuning import candidate_probability

# Width of the similarity bins of the report (the threshold and the floor are edges too).
BIN_WIDTH = 0.05
# Confidence of the recall interval.
CONFIDENCE = 0.95
# What the intervals are, in the words the report prints.
RECALL_INTERVAL = "Clopper-Pearson exact over the pairs, widened to a bootstrap over the sampled contents"
BIN_RECALL_INTERVAL = "Wilson"


def default_floor(threshold: float) -> float:
    """The lowest similarity evaluated by default: half the threshold. At the default 16 x 8 for
    0.8 the S-curve gives pairs at 0.4 a 1% chance to be candidates, so the curve's whole rise shows."""
    return threshold / 2.0


def similarity_edges(floor: float, threshold: float, width: float = BIN_WIDTH) -> list[float]:
    """Bin edges from ``floor`` to 1: the floor, the multiples of ``width`` above it, the threshold
    and 1. Bin i is [edges[i], edges[i + 1]), the last one with 1 included."""
    if floor >= 1.0:
        return [1.0, 1.0]  # one bin: the pairs with J = 1
    inner = [round(k * width, 10) for k in range(1, round(1 / width))]
    edges = [floor, *(e for e in inner if e > floor + 1e-9 and abs(e - threshold) > 1e-9), 1.0]
    if floor < threshold < 1.0:
        edges.append(threshold)
    return sorted(set(edges))


def bin_of(similarity: npt.ArrayLike, edges: list[float]) -> npt.NDArray[np.int64]:
    """The bin of each similarity under ``edges`` (-1 below the first edge), as SQL's width_bucket
    over the lower edges minus one."""
    return np.searchsorted(np.asarray(edges[:-1]), np.asarray(similarity), side="right").astype(np.int64) - 1


@dataclass(frozen=True)
class Bin:
    """One similarity bin: the sampled pairs' candidate rate and the collection's stored pairs."""

    low: float
    high: float
    """The bin is [low, high); the last one includes 1."""
    pairs: int
    """Content pairs with a sampled content and an exact Jaccard in the bin."""
    candidates: int
    """Of those, pairs sharing a bucket key in some band (LSH candidates)."""
    found: int
    """Of those, pairs stored by the index."""
    mean_jaccard: float | None
    empirical: float | None
    """candidates / pairs: the empirical candidate probability."""
    stderr: float | None
    """Binomial standard error of ``empirical``: sqrt(p(1 - p) / pairs)."""
    theoretical: float | None
    """The S-curve 1 - (1 - s^r)^b at s = mean_jaccard."""
    stored: int
    """Stored pairs of the whole collection with a similarity in the bin (exact, not sampled)."""
    recall: float | None = None
    """found / pairs, for a bin at or above the threshold (None below it, or without pairs)."""
    recall_low: float | None = None
    """Lower end of Wilson's interval at CONFIDENCE for ``recall`` (over the sampled pairs,
    counted as independent: pairs of one large cluster make it somewhat too narrow)."""
    recall_high: float | None = None
    """Upper end of that interval."""
    expected: float | None = None
    """The S-curve averaged over the bin's sampled pairs: the candidate rate (so the recall at or
    above the threshold) ideal MinHash would give exactly these pairs."""


@dataclass(frozen=True, eq=False)
class TruthPairs:
    """Every content pair with a sampled content and exact Jaccard >= floor, content_a < content_b."""

    content_a: npt.NDArray[np.int64]
    content_b: npt.NDArray[np.int64]
    jaccard: npt.NDArray[np.float64]
    candidate: npt.NDArray[np.bool_]
    """Whether the two share a bucket key in some band."""
    found: npt.NDArray[np.bool_]
    """Whether the index stores the pair."""


@dataclass(frozen=True)
class Evaluation:
    """The index measured against exact truth on a sample of contents.

    Recall and precision are estimates for the collection from the sample; the truth of each
    sampled content (against every stored content) and the ``stored`` histogram are exact. Pairs
    of documents with the same normalised text (one content) are not counted.
    """

    collection: str
    threshold: float
    bands: int
    rows: int
    floor: float
    seed: int
    contents: int
    """Contents with at least one shingle, the population sampled."""
    sampled: int
    true_pairs: int
    """Pairs with a sampled content and exact Jaccard >= threshold."""
    found_pairs: int
    """Of those, pairs the index stores or gives on demand (a dense cluster's, ``on_demand_pairs``)."""
    recall: float | None
    """found_pairs / true_pairs (None without true pairs)."""
    recall_low: float
    """Lower end of the recall's interval at CONFIDENCE: Clopper-Pearson's exact interval over the
    true pairs, widened to a percentile bootstrap's that resamples the sampled contents (so the
    pairs of one content, a large cluster say, move together) where that one is wider. Never a
    point: with few pairs the exact interval stays wide where the bootstrap has nothing to vary."""
    recall_high: float
    """Upper end of that interval."""
    stored_pairs: int
    """Stored pairs with a sampled content."""
    precise_pairs: int
    """Of those, pairs whose exact Jaccard reaches the threshold."""
    precision: float | None
    """precise_pairs / stored_pairs (None without stored pairs)."""
    truth_pairs: int
    """Pairs with a sampled content and exact Jaccard >= floor."""
    candidate_pairs: int
    """Of those, LSH candidates."""
    expected_candidates: float
    """Sum of the S-curve over the truth pairs: what ideal MinHash would make candidates."""
    collection_pairs: int
    """Every stored pair of the collection."""
    bins: tuple[Bin, ...]
    """In ascending order of similarity; ``threshold_bin`` is the one starting at the threshold."""
    sample_ids: npt.NDArray[np.int64] = field(repr=False, compare=False)
    """The sampled content ids, sorted."""
    truth: TruthPairs = field(repr=False, compare=False)
    on_demand_pairs: int = 0
    """Of ``found_pairs``, those a dense cluster does not store but gives on demand (its complete
    pairs, ``Index.cluster_pairs``): a user can get them, so they count as found."""
    recall_check: RecallCheck | None = field(default=None, compare=False)
    """The threshold bin's expected recall from the collection's own stored pairs (all of them,
    not the sample) and the rebuild that would restore the target (``core.recall_check``)."""

    @property
    def threshold_bin(self) -> Bin:
        """The bin [t, next edge): the pairs right at the threshold, where banding loses most."""
        return next((b for b in self.bins if b.low >= self.threshold - 1e-12), self.bins[-1])

    def bins_threshold_first(self) -> list[Bin]:
        """The bins as ``eval`` lists them: the threshold's bin first, then the others ascending."""
        first = self.threshold_bin
        return [first, *(b for b in self.bins if b is not first)]

    def to_dict(self) -> dict[str, Any]:
        """Every figure and bin as JSON-ready values (the per-pair arrays left out)."""
        skip = ("sample_ids", "truth", "recall_check")
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in skip}
        out["bins"] = [asdict(b) for b in self.bins]
        out["threshold_bin"] = asdict(self.threshold_bin)
        out["recall_interval"] = RECALL_INTERVAL
        out["bin_recall_interval"] = BIN_RECALL_INTERVAL
        out["threshold_bin_check"] = self.recall_check.to_dict() if self.recall_check else None
        return out

    def _threshold_bin_line(self) -> str:
        b = self.threshold_bin
        where = f"[{b.low:g}, {b.high:g}{']' if b.high >= 1.0 else ')'}"
        if b.recall is None or b.recall_low is None or b.recall_high is None:
            return f"recall in the threshold's bin {where}: no sampled pair lies in it"
        return (
            f"recall in the threshold's bin {where}: {b.recall:.4f} ({b.found:,} of {b.pairs:,} "
            "sampled pairs; "
            f"{CONFIDENCE:.0%} {BIN_RECALL_INTERVAL} interval {b.recall_low:.4f} to {b.recall_high:.4f}; "
            f"the S-curve expects {b.expected:.4f} for these pairs)"
        )

    def __str__(self) -> str:
        t = f"{self.threshold:g}"
        lines = [
            f"sample: {self.sampled:,} of {self.contents:,} contents (seed {self.seed}), "
            f"each compared exactly with all of them",
            self._threshold_bin_line(),
            f"recall at J >= {t}: no true pair touches the sample"
            if self.recall is None
            else f"recall at J >= {t}: {self.recall:.4f} ({self.found_pairs:,} of {self.true_pairs:,} true "
            f"pairs found: stored, or {self.on_demand_pairs:,} of them given on demand by a dense cluster; "
            f"{CONFIDENCE:.0%} interval {self.recall_low:.4f} to {self.recall_high:.4f}, {RECALL_INTERVAL})",
            "precision: no stored pair touches the sample"
            if self.precision is None
            else f"precision: {self.precision:.4f} ({self.precise_pairs:,} of {self.stored_pairs:,} stored "
            f"pairs with a sampled content have J >= {t})",
            f"LSH candidates with {self.bands} bands x {self.rows} rows: {self.candidate_pairs:,} of "
            f"{self.truth_pairs:,} pairs with J >= {self.floor:g} (the S-curve expects "
            f"{self.expected_candidates:,.1f})",
            f"stored pairs in the collection: {self.collection_pairs:,}",
            *([f"the collection's own pairs: {self.recall_check.summary()}"] if self.recall_check else []),
            f"per-bin recall_low and recall_high below: {CONFIDENCE:.0%} {BIN_RECALL_INTERVAL} intervals",
        ]
        return "\n".join(lines)


def _rows_of(
    a: npt.NDArray[np.int64],
    b: npt.NDArray[np.int64],
    other_a: npt.NDArray[np.int64],
    other_b: npt.NDArray[np.int64],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """One integer per distinct (a, b) pair across both lists, for matching them with isin."""
    both = np.stack([np.concatenate([a, other_a]), np.concatenate([b, other_b])], axis=1)
    _, key = np.unique(both, axis=0, return_inverse=True)
    key = np.asarray(key, dtype=np.int64).reshape(-1)
    return key[: a.size], key[a.size :]


# Bootstrap resamples of the sampled contents: percentile intervals want 1,000 or more
# (Efron & Tibshirani, An Introduction to the Bootstrap, ch. 13); each costs one pass over the sample.
BOOTSTRAP_RESAMPLES = 2_000


def _bootstrap_recall(
    sample_ids: npt.NDArray[np.int64],
    a: npt.NDArray[np.int64],
    b: npt.NDArray[np.int64],
    found: npt.NDArray[np.bool_],
    seed: int,
) -> tuple[float, float]:
    """Percentile interval at CONFIDENCE for recall = found / true pairs, resampling the sampled
    contents with replacement; each pair counts once for each of its ends in the sample."""
    if not a.size:
        return 0.0, 1.0
    trues = np.zeros(sample_ids.size)
    founds = np.zeros(sample_ids.size)
    for end in (a, b):
        at = np.searchsorted(sample_ids, end)
        hit = at < sample_ids.size
        hit[hit] = sample_ids[at[hit]] == end[hit]
        trues += np.bincount(at[hit], minlength=sample_ids.size)
        founds += np.bincount(at[hit], weights=found[hit], minlength=sample_ids.size)
    rng = np.random.Generator(np.random.PCG64([seed, 1]))
    ratios = np.empty(BOOTSTRAP_RESAMPLES)
    for r in range(BOOTSTRAP_RESAMPLES):
        pick = rng.integers(0, sample_ids.size, sample_ids.size)
        total = trues[pick].sum()
        ratios[r] = founds[pick].sum() / total if total else np.nan
    tail = (1.0 - CONFIDENCE) / 2 * 100
    low, high = np.nanpercentile(ratios, [tail, 100 - tail])
    return float(low), float(high)


def _bins(
    jaccard: npt.NDArray[np.float64],
    candidate: npt.NDArray[np.bool_],
    found: npt.NDArray[np.bool_],
    edges: list[float],
    threshold: float,
    bands: int,
    rows: int,
    histogram: npt.NDArray[np.int64],
) -> tuple[Bin, ...]:
    """The truth pairs per similarity bin: how many, how many were candidates and found, the
    S-curve's value, and the recall with its Wilson interval in the bins at or above the threshold."""
    n_bins = len(edges) - 1
    which = np.clip(bin_of(jaccard, edges), 0, n_bins - 1)
    count = np.bincount(which, minlength=n_bins)
    cands = np.bincount(which, weights=candidate, minlength=n_bins)
    founds = np.bincount(which, weights=found, minlength=n_bins)
    sums = np.bincount(which, weights=jaccard, minlength=n_bins)
    curve = np.bincount(which, weights=candidate_probability(jaccard, bands, rows), minlength=n_bins)
    bins = []
    for k in range(n_bins):
        n = int(count[k])
        mean = float(sums[k] / n) if n else None
        p = float(cands[k] / n) if n else None
        at_or_above = n > 0 and edges[k] >= threshold - 1e-12
        low_high = wilson(int(founds[k]), n) if at_or_above else (None, None)
        bins.append(
            Bin(
                low=edges[k],
                high=edges[k + 1],
                pairs=n,
                candidates=int(cands[k]),
                found=int(founds[k]),
                mean_jaccard=mean,
                empirical=p,
                stderr=math.sqrt(p * (1.0 - p) / n) if p is not None else None,
                theoretical=float(candidate_probability(mean, bands, rows)) if mean is not None else None,
                stored=int(histogram[k]),
                recall=float(founds[k] / n) if at_or_above else None,
                recall_low=low_high[0],
                recall_high=low_high[1],
                expected=float(curve[k] / n) if n else None,
            )
        )
    return tuple(bins)


def summarise(
    *,
    collection: str,
    threshold: float,
    bands: int,
    rows: int,
    floor: float,
    seed: int,
    population: int,
    sample_ids: npt.NDArray[np.int64],
    truth: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64]],
    candidate: npt.NDArray[np.bool_],
    stored: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]],
    histogram: npt.NDArray[np.int64],
    on_demand: npt.NDArray[np.bool_] | None = None,
    recall_check: RecallCheck | None = None,
) -> Evaluation:
    """The report from what the index read: the truth pairs (a < b, J) with their candidate flags,
    the stored pairs with a sampled content, the collection's stored pairs per bin, and which truth
    pairs a dense cluster gives on demand (found too: a user gets them, verified when read)."""
    a, b, jaccard = truth
    truth_key, stored_key = _rows_of(a, b, *stored)
    found = np.isin(truth_key, stored_key)
    demanded = np.zeros(a.size, dtype=bool) if on_demand is None else on_demand & ~found
    found = found | demanded
    above = jaccard >= threshold
    true_pairs, found_pairs = int(above.sum()), int((found & above).sum())
    low, high = _bootstrap_recall(sample_ids, a[above], b[above], found[above], seed)
    exact_low, exact_high = clopper_pearson(found_pairs, true_pairs)
    low, high = min(low, exact_low), max(high, exact_high)
    precise = np.isin(stored_key, truth_key[above])
    bins = _bins(
        jaccard, candidate, found, similarity_edges(floor, threshold), threshold, bands, rows, histogram
    )
    return Evaluation(
        collection=collection,
        threshold=threshold,
        bands=bands,
        rows=rows,
        floor=floor,
        seed=seed,
        contents=population,
        sampled=int(sample_ids.size),
        true_pairs=true_pairs,
        found_pairs=found_pairs,
        recall=found_pairs / true_pairs if true_pairs else None,
        recall_low=low,
        recall_high=high,
        stored_pairs=int(stored_key.size),
        precise_pairs=int(precise.sum()),
        precision=float(precise.mean()) if precise.size else None,
        truth_pairs=int(a.size),
        candidate_pairs=int(candidate.sum()),
        expected_candidates=float(candidate_probability(jaccard, bands, rows).sum()),
        collection_pairs=int(histogram.sum()),
        bins=bins,
        on_demand_pairs=int(demanded.sum()),
        sample_ids=sample_ids,
        truth=TruthPairs(a, b, jaccard, candidate, found),
        recall_check=recall_check,
    )
