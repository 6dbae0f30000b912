"""Choosing bands and rows: the LSH S-curve and the expected false-positive and false-negative rates.

For b bands of r rows a pair of similarity s becomes a candidate with P(s) = 1 - (1 - s^r)^b.
Given a threshold t, the expected rates assume s uniform on each side of t (a modelling choice,
not a property of any corpus):

* false-positive rate  FP = (1/t)     * integral_0^t P(s) ds       (mean P below t)
* false-negative rate  FN = (1/(1-t)) * integral_t^1 (1 - P(s)) ds (mean miss above t)

Both are normalised by the length of their interval. datasketch's tuner leaves them unnormalised,
which weighs false positives t/(1-t) times more than asked: four times at t = 0.8.
The integrals have a closed form: with u = s^r, the integral of (1 - s^r)^b over [0, x] is
(1/r) B(1/r, b + 1) I(x^r; 1/r, b + 1), I the regularised incomplete beta function, so each
banding costs a few special-function calls whatever num_perm is (quadrature exact for the
polynomial would take num_perm/2 + 1 nodes a banding: minutes to search num_perm = 8192).

Those two means weigh the whole curve, and a pick that minimises them still misses pairs right at
the threshold (P(t) is 0.86 for 30 x 4 at t = 0.5). A recall target R adds a constraint: the
expected recall of the pairs in the threshold's own bin [t, t + THRESHOLD_BIN) must reach R. That
is the mean of P over the bin weighted by where the pairs lie in it (``BinDensity``), and real
pairs are not spread evenly: there are more of them the lower the similarity, so they bunch just
above t, where P is lowest. Until a collection has pairs of its own the tuner takes a prior that
falls linearly across the bin to PRIOR_TOP of its value at t (``prior_density``); its mean of P
has a closed form of the same kind (the integral of s (1 - s^r)^b is B(2/r, b + 1)'s). Once a
collection has stored pairs in the bin, their similarities, each weighted by 1 / P(s) of the
banding that found them (the pairs of that similarity it expects there, found or not: Horvitz and
Thompson's estimator), are the density instead (``observed_density``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from neardup import validate
from neardup.core.lsh import check_banding
from neardup.core.minhash import MAX_NUM_PERM
from neardup.errors import InternalError, ParamsError


def candidate_probability(s: npt.ArrayLike, bands: int, rows: int) -> npt.NDArray[np.float64]:
    """P(a pair of Jaccard s shares at least one bucket) = 1 - (1 - s^r)^b, exact for ideal MinHash."""
    sv = np.asarray(s, dtype=np.float64)
    if not np.all((sv >= 0.0) & (sv <= 1.0)):
        raise ParamsError(f"similarities must lie in [0, 1], got values in [{sv.min()}, {sv.max()}]")
    return _s_curve(sv, bands, rows)


def _s_curve(
    s: npt.NDArray[np.float64], bands: Bands, rows: int | npt.NDArray[np.int64]
) -> npt.NDArray[np.float64]:
    """1 - (1 - s^r)^b, computed as -expm1(b * log1p(-s^r)) to keep precision for small s^r."""
    with np.errstate(divide="ignore"):  # s = 1 gives log1p(-1) = -inf, and P = 1 as it should
        return np.asarray(-np.expm1(bands * np.log1p(-(s**rows))), dtype=np.float64)


# Width of the threshold's own bin [t, t + width): the bin ``eval`` reports first, and whose mean
# candidate probability the recall target constrains (the width of eval's bins).
THRESHOLD_BIN = 0.05
# The recall a new collection's banding is tuned to reach in that bin: one pair in a hundred right
# at the threshold may be missed, where the FP/FN weights alone missed one in eleven at t = 0.5.
DEFAULT_RECALL_AT_THRESHOLD = 0.99


def check_recall_target(recall: object) -> float:
    """``recall`` (a recall-at-threshold target) as a float if it lies in (0, 1), else ParamsError
    (1 cannot be reached: P(s) < 1 for every s < 1)."""
    return validate.fraction(recall, "recall_at_threshold", zero=False, one=False)


# A number of bands for every banding, or one for all of them.
Bands = int | npt.NDArray[np.int64]


def _integral_scale(bands: Bands, rows: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
    """The integral of (1 - s^r)^b over [0, 1], (1/r) B(1/r, b + 1), for each b and r."""
    from scipy import special  # here: sketching a text, which imports this module, needs none of it

    r = np.asarray(rows, dtype=np.float64)
    return np.asarray(np.exp(special.betaln(1.0 / r, bands + 1.0)) / r, dtype=np.float64)


# Below this, s^r is a term of a series: the incomplete beta function's argument t^r underflows
# (0.5^2000 is 0 in doubles), and there (1 - s^r)^b = 1 - b s^r to within (b s^r)^2.
_SERIES_BELOW = 1e-12


def _below(x: float, bands: Bands, rows: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
    """The integral of (1 - s^r)^b over [0, x] for each b and r: (1/r) B(1/r, b + 1) I(x^r), or
    where x^r is tiny, its series x - b x^(r+1) / (r + 1)."""
    from scipy import special

    r = np.asarray(rows, dtype=np.float64)
    y = x**r
    series = x - bands * x * y / (r + 1.0)
    exact = _integral_scale(bands, rows) * special.betainc(1.0 / r, bands + 1.0, y)
    return np.asarray(np.where(y < _SERIES_BELOW, series, exact), dtype=np.float64)


def _above(x: float, bands: Bands, rows: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
    """The integral of (1 - s^r)^b over [x, 1] for each b and r, by the incomplete beta
    function's complement (accurate where it is small), or where x^r is tiny, the whole less
    ``_below``'s series."""
    from scipy import special

    r = np.asarray(rows, dtype=np.float64)
    y = x**r
    whole = _integral_scale(bands, rows)
    complement = np.asarray(special.betaincc(1.0 / r, bands + 1.0, y), dtype=np.float64)
    series = whole - (x - bands * x * y / (r + 1.0))
    return np.asarray(np.where(y < _SERIES_BELOW, series, whole * complement), dtype=np.float64)


def _above_weighted(x: float, bands: Bands, rows: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
    """The integral of s (1 - s^r)^b over [x, 1] for each b and r: with u = s^r it is
    (1/r) B(2/r, b + 1) times the incomplete beta function's complement at x^r, or where x^r is
    tiny, the whole less the series x^2/2 - b x^(r+2) / (r + 2)."""
    from scipy import special

    r = np.asarray(rows, dtype=np.float64)
    y = x**r
    whole = np.exp(special.betaln(2.0 / r, bands + 1.0)) / r
    complement = special.betaincc(2.0 / r, bands + 1.0, y)
    series = whole - (x * x / 2.0 - bands * x * x * y / (r + 2.0))
    return np.asarray(np.where(y < _SERIES_BELOW, series, whole * complement), dtype=np.float64)


def _linear_bin_recall(
    low: float, high: float, top: float, bands: Bands, rows: npt.NDArray[np.int64]
) -> npt.NDArray[np.float64]:
    """Mean P over [low, high] under a density falling linearly to ``top`` of its value at
    ``low``, in closed form: 1 less the mean of (1 - s^r)^b, the density being a + c s."""
    width = high - low
    scale = 2.0 / ((1.0 + top) * width)  # the density at low, integrating to 1 over the bin
    slope = -scale * (1.0 - top) / width
    a = scale - slope * low
    missed = a * (_above(low, bands, rows) - _above(high, bands, rows)) + slope * (
        _above_weighted(low, bands, rows) - _above_weighted(high, bands, rows)
    )
    return np.asarray(1.0 - missed, dtype=np.float64)


# Where the prior puts the pairs of the threshold's bin: a density falling linearly across it, at
# the bin's top this share of its value at t. On Debian package descriptions and on make_corpus.py's
# synthetic corpus (docs/benchmarks/ has the densities), the pairs of a bin fall towards its top in
# most bins, the steepest as if to about 0.4 of their density at t; the prior is
# steeper than any bin measured, so that a corpus more bunched than those is still covered.
PRIOR_TOP = 0.2
# Quadrature nodes of a prior's points and weights (its recall itself is in closed form).
PRIOR_NODES = 64
# Stored pairs in the threshold's bin from which a collection's own density is trusted over the
# prior: with fewer, a few pairs' similarities would set the estimate.
OWN_DENSITY_MIN_PAIRS = 100


@dataclass(frozen=True, eq=False)
class BinDensity:
    """Where the pairs of a threshold's bin [t, t + THRESHOLD_BIN) lie: points of the bin with
    weights summing to 1, so that the pairs' mean of any f is ``weights @ f(points)`` (exact for
    the prior's polynomials; an estimate from a collection's own pairs)."""

    threshold: float
    points: npt.NDArray[np.float64]
    weights: npt.NDArray[np.float64]
    pairs: int = 0
    """The stored pairs it is estimated from; 0 for a prior."""
    top: float | None = PRIOR_TOP
    """For a prior, its density at the bin's top as a share of its density at t (None: observed)."""

    def recall(self, bands: Bands, rows: int | npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        """Expected recall of the bin's pairs for each b bands (one for all, or one each) and r in
        ``rows``: the mean of P (for a prior in closed form, whatever b * r is)."""
        r = np.atleast_1d(np.asarray(rows, dtype=np.int64))
        low, high = _bin_edges(self.threshold)
        if self.top is not None:
            if high <= low:  # at t = 1 the bin is the point 1, where P = 1
                return np.ones(r.shape)
            return _linear_bin_recall(low, high, self.top, bands, r)
        return np.asarray(np.dot(self.weights, _s_curve(self.points[:, None], bands, r)), dtype=np.float64)

    def describe(self) -> str:
        """Words for people: which density this is."""
        if self.top is None:
            return f"the collection's own {self.pairs:,} pairs in the bin"
        if self.top == 1.0:
            return "pairs spread evenly across the bin"
        return f"pairs' density falling across the bin to {self.top:g} of its value at the threshold"


def _bin_edges(threshold: float) -> tuple[float, float]:
    return threshold, min(1.0, threshold + THRESHOLD_BIN)


@lru_cache(maxsize=64)
def prior_density(threshold: float, num_perm: int = 128, top: float = PRIOR_TOP) -> BinDensity:
    """The density before a collection has pairs: linear across [t, t + THRESHOLD_BIN), ``top``
    of its value at t at the bin's top (1: even); at t = 1 the bin is the point 1. Its ``recall``
    is in closed form; its points and weights (Gauss-Legendre, exact for polynomials of degree
    below ``PRIOR_NODES`` times the density) are for other means over it. A modelling choice, not
    a property of any corpus (see PRIOR_TOP). ``num_perm`` is kept for callers that name it."""
    check_threshold(threshold)
    if not 0.0 <= top <= 1.0:
        raise ParamsError(f"a prior's density at the bin's top must be in [0, 1] of that at t, got {top!r}")
    low, high = _bin_edges(threshold)
    if high <= low:
        return BinDensity(threshold, np.ones(1), np.ones(1), 0, top)
    nodes, weights = _legendre(PRIOR_NODES)
    x = (nodes + 1.0) / 2.0  # onto [0, 1]
    density = 2.0 * (1.0 - (1.0 - top) * x) / (1.0 + top)  # integrates to 1 over [0, 1]
    return BinDensity(threshold, low + (high - low) * x, weights / 2.0 * density, 0, top)


def observed_density(
    threshold: float,
    similarities: npt.ArrayLike,
    counts: npt.ArrayLike,
    bands: int,
    rows: int,
) -> BinDensity:
    """The density of a collection's own pairs in [t, t + THRESHOLD_BIN): the stored pairs'
    ``similarities`` (``counts`` of each, e.g. a fine histogram's midpoints), each weighted by
    1 / P(s) of the ``bands`` x ``rows`` that found them, the pairs of that similarity expected in
    the bin whether found or not (Horvitz-Thompson; approximate: ideal MinHash, and pairs outside
    the bin or of other similarities ignored). ParamsError without a pair in the bin."""
    check_threshold(threshold)
    s = np.asarray(similarities, dtype=np.float64).reshape(-1)
    c = np.asarray(counts, dtype=np.float64).reshape(-1)
    if s.shape != c.shape:
        raise ParamsError("one count per similarity")
    low, high = _bin_edges(threshold)
    inside = (s >= low) & ((s < high) | (s >= 1.0)) & (c > 0)
    s, c = s[inside], c[inside]
    if not c.size:
        raise ParamsError(f"no stored pair lies in [{low:g}, {high:g})")
    # A found pair had P(s) > 0; the floor keeps a rounding-to-zero P from dividing by it.
    expected = c / np.maximum(_s_curve(s, bands, rows), 1e-300)
    return BinDensity(threshold, s, expected / expected.sum(), round(c.sum()), None)


def threshold_bin_recall(threshold: float, bands: int, rows: int, density: BinDensity | None = None) -> float:
    """Expected recall of the pairs in the threshold's bin [t, t + THRESHOLD_BIN): the S-curve's
    mean over them, placed by ``density`` (default the prior, ``prior_density``: approximate)."""
    check_threshold(threshold)
    check_banding(bands, rows, bands * rows)
    density = prior_density(float(threshold), bands * rows) if density is None else density
    return float(density.recall(bands, rows)[0])


def threshold_point(bands: int, rows: int) -> float:
    """(1/b)^(1/r): roughly where the S-curve is steepest (an approximation of its inflection)."""
    return float((1.0 / bands) ** (1.0 / rows))


@lru_cache(maxsize=32)
def _legendre(n_nodes: int) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    nodes, weights = np.polynomial.legendre.leggauss(n_nodes)
    return nodes, weights


def _rates(
    threshold: float, bands: Bands, rows: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """(FP, FN) for each b bands of r rows, in closed form (the module's docstring)."""

    r = np.asarray(rows, dtype=np.float64)
    fp = 1.0 - _below(threshold, bands, rows) / threshold  # the mean of P = 1 - (1 - s^r)^b over [0, t]
    if threshold >= 1.0:  # [t, 1] is the point 1, where P = 1: nothing is missed
        return fp, np.zeros(r.shape)
    return fp, _above(threshold, bands, rows) / (1.0 - threshold)


def check_threshold(threshold: object) -> float:
    """``threshold`` as a float if it lies in (0, 1], else ParamsError: the one rule for every
    threshold an index is created, rebuilt, tuned or evaluated with (1 keeps only pairs whose
    shingle sets are equal)."""
    return validate.fraction(threshold, "threshold", zero=False)


def false_positive_rate(threshold: float, bands: int, rows: int) -> float:
    """Mean candidate probability of pairs below the threshold (s uniform on [0, t])."""
    return evaluate_banding(threshold, bands, rows).false_positive_rate


def false_negative_rate(threshold: float, bands: int, rows: int) -> float:
    """Mean miss probability of pairs at or above the threshold (s uniform on [t, 1])."""
    return evaluate_banding(threshold, bands, rows).false_negative_rate


def evaluate_banding(threshold: float, bands: int, rows: int, num_perm: int | None = None) -> Banding:
    """b bands x r rows with both expected error rates at ``threshold``, computed in one pass."""
    check_threshold(threshold)
    num_perm = bands * rows if num_perm is None else num_perm
    check_banding(bands, rows, num_perm)
    fps, fns = _rates(threshold, bands, np.array([rows]))
    return Banding(bands, rows, num_perm, float(threshold), float(fps[0]), float(fns[0]))


@dataclass(frozen=True)
class Banding:
    """A choice of b bands x r rows for a threshold, with its expected error rates (approximate)."""

    bands: int
    rows: int
    num_perm: int
    threshold: float
    false_positive_rate: float
    """Mean P(candidate) for s uniform below the threshold."""
    false_negative_rate: float
    """Mean P(missed) for s uniform at or above the threshold."""
    density: BinDensity | None = field(default=None, compare=False, repr=False)
    """Where the pairs of the threshold's bin are taken to lie (None: the prior)."""

    @property
    def threshold_point(self) -> float:
        """(1/b)^(1/r), roughly where the S-curve is steepest."""
        return threshold_point(self.bands, self.rows)

    @property
    def candidate_probability_at_threshold(self) -> float:
        """P(candidate) of a pair exactly at the threshold: 1 - (1 - t^r)^b."""
        return float(_s_curve(np.array(self.threshold), self.bands, self.rows))

    @property
    def threshold_bin_recall(self) -> float:
        """Expected recall of the pairs in [t, t + THRESHOLD_BIN): the S-curve's mean over them,
        placed by ``density`` (approximate)."""
        return threshold_bin_recall(self.threshold, self.bands, self.rows, self.density)

    @property
    def bin_density(self) -> BinDensity:
        """The density ``threshold_bin_recall`` weighs the bin by."""
        return prior_density(self.threshold, self.bands * self.rows) if self.density is None else self.density

    @property
    def candidates_per_found_pair(self) -> float:
        """Expected candidates below the threshold per pair found at or above it, for similarities
        uniform on [0, 1]: t*FP / ((1 - t)*(1 - FN)). A model of the verification cost; real
        corpora have far more dissimilar pairs, so compare bandings by it, not corpora."""
        found = (1.0 - self.threshold) * (1.0 - self.false_negative_rate)
        return math.inf if found <= 0 else self.threshold * self.false_positive_rate / found

    @property
    def bucket_rows(self) -> int:
        """Bucket rows a document stores (one a band): the storage and lookup cost of a banding."""
        return self.bands

    @property
    def unused_permutations(self) -> int:
        """num_perm - b*r: signature rows no band uses (computed but not indexed)."""
        return self.num_perm - self.bands * self.rows

    def __str__(self) -> str:
        text = (
            f"bands={self.bands} rows={self.rows} (S-curve steepest near {self.threshold_point:.3f}) "
            f"for threshold {self.threshold:g}: expected false-positive rate {self.false_positive_rate:.4f}, "
            f"false-negative rate {self.false_negative_rate:.4f}; P(candidate) at "
            f"{self.threshold:g} {self.candidate_probability_at_threshold:.4f}, expected recall in "
            f"[{self.threshold:g}, {min(1.0, self.threshold + THRESHOLD_BIN):g}) "
            f"{self.threshold_bin_recall:.4f} ({self.bin_density.describe()})"
        )
        if self.unused_permutations:
            text += f"; uses {self.bands * self.rows} of {self.num_perm} permutations"
        return text


def optimal_params(
    threshold: float,
    num_perm: int,
    fp_weight: float = 0.5,
    fn_weight: float = 0.5,
    *,
    use_all_permutations: bool = False,
    recall_at_threshold: float | None = None,
    density: BinDensity | None = None,
) -> Banding:
    """The (b, r) with b*r <= num_perm minimising fp_weight*FP + fn_weight*FN (rates as above).

    With ``recall_at_threshold`` R, only bandings whose mean P over the threshold's bin, placed by
    ``density`` (default the prior), reaches R are considered (the expected recall at the
    threshold, approximate as above); where none does within num_perm, the one coming closest is
    chosen (its ``threshold_bin_recall`` says by how much it falls short). Ties go to the choice
    using more permutations, then to fewer bands
    (fewer bucket rows). With ``use_all_permutations`` only b*r == num_perm is considered;
    otherwise an unused remainder is reported in ``Banding.unused_permutations`` and in its text.
    """
    check_threshold(threshold)
    if recall_at_threshold is not None:
        recall_at_threshold = check_recall_target(recall_at_threshold)
    validate.whole_in(num_perm, "num_perm", 1, MAX_NUM_PERM)
    for name, w in (("fp_weight", fp_weight), ("fn_weight", fn_weight)):
        if not isinstance(w, float | int) or not w >= 0.0 or math.isinf(w):
            raise ParamsError(f"{name} must be a finite number >= 0, got {w!r}")
    total = fp_weight + fn_weight
    if total <= 0:
        raise ParamsError("fp_weight and fn_weight cannot both be 0")
    if density is not None and density.threshold != float(threshold):
        raise ParamsError(f"the bin's density is for threshold {density.threshold:g}, not {threshold:g}")
    placed = prior_density(float(threshold), int(num_perm)) if density is None else density
    wp, wn = fp_weight / total, fn_weight / total
    # Every banding at once: b bands of r rows, b * r <= num_perm (== with use_all_permutations).
    bands = np.concatenate([np.full(num_perm // b, b) for b in range(1, num_perm + 1)])
    rows = np.concatenate([np.arange(1, num_perm // b + 1) for b in range(1, num_perm + 1)])
    if use_all_permutations:
        bands, rows = bands[bands * rows == num_perm], rows[bands * rows == num_perm]
    fps, fns = _rates(threshold, bands, rows)
    # How far each falls short of the target (0 for all when there is none, or when it is met).
    shorts = (
        np.zeros(rows.size)
        if recall_at_threshold is None
        else np.maximum(0.0, recall_at_threshold - placed.recall(bands, rows))
    )
    best: tuple[float, float, int, int, int, float, float] | None = None
    for b, r, fp, fn, short in zip(
        bands.tolist(), rows.tolist(), fps.tolist(), fns.tolist(), shorts.tolist(), strict=True
    ):
        # Rounded so that float noise cannot break a real tie.
        key = (round(short, 12), round(wp * fp + wn * fn, 12), -(b * r), b, r, fp, fn)
        if best is None or key[:4] < best[:4]:
            best = key
    if best is None:  # b = num_perm, r = 1 is always a candidate
        raise InternalError(f"no banding considered for num_perm = {num_perm}")
    _, _, _, b, r, fp, fn = best
    check_banding(b, r, num_perm)
    return Banding(b, r, int(num_perm), float(threshold), fp, fn, density)
