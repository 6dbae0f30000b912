"""Jaccard estimates from signatures: the share of agreeing rows, its standard error and interval."""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from neardup.core.verify import signature_agreement
from neardup.errors import ParamsError


@dataclass(frozen=True)
class JaccardEstimate:
    """An estimate of J(A, B) from two signatures, with its uncertainty (all approximate)."""

    value: float
    """Share of rows where the signatures agree: unbiased for J."""
    stderr: float
    """sqrt(value * (1 - value) / num_perm): the binomial standard error, estimated."""
    low: float
    """Lower end of the Wilson score interval at ``confidence``."""
    high: float
    """Upper end of the Wilson score interval at ``confidence``."""
    num_perm: int
    confidence: float

    def __float__(self) -> float:
        return self.value


def _check_pair(sig_a: npt.ArrayLike, sig_b: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.asarray(sig_a), np.asarray(sig_b)
    if a.shape != b.shape or a.ndim == 0 or a.shape[-1] == 0:
        raise ParamsError(f"signatures must have the same non-empty shape, got {a.shape} and {b.shape}")
    return a, b


def agreement(sigs_a: npt.ArrayLike, sigs_b: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Row-wise Jaccard estimates of paired signatures (shape docs x num_perm); empty ones give 0."""
    a, b = _check_pair(sigs_a, sigs_b)
    flat_a = a.reshape(-1, a.shape[-1])
    n = flat_a.shape[0]
    stacked = np.concatenate([flat_a, b.reshape(-1, b.shape[-1])]).astype(np.uint32, copy=False)
    rows = np.arange(n, dtype=np.int64)
    # One implementation of agreement for the whole package: the kernel verification uses.
    return signature_agreement(stacked, rows, rows + n).reshape(a.shape[:-1])


def estimate_jaccard(sig_a: npt.ArrayLike, sig_b: npt.ArrayLike, confidence: float = 0.95) -> JaccardEstimate:
    """Estimated Jaccard similarity of two documents from their signatures, with error bounds.

    The standard error assumes independent rows (exact for the classic scheme, conservative for
    one-permutation hashing of sets larger than num_perm). An empty document matches nothing.
    """
    a, b = _check_pair(sig_a, sig_b)
    if a.ndim != 1:
        raise ParamsError(f"estimate_jaccard takes two 1-D signatures; use agreement() for {a.shape}")
    n = a.shape[0]
    matches = round(float(agreement(a, b)) * n)
    value = matches / n
    low, high = wilson_interval(matches, n, confidence)
    return JaccardEstimate(
        value=value,
        stderr=math.sqrt(value * (1.0 - value) / n),
        low=low,
        high=high,
        num_perm=n,
        confidence=confidence,
    )


def wilson_interval(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion ``successes / trials``; (0, 1) for no trials."""
    if not 0.0 < confidence < 1.0:
        raise ParamsError(f"confidence must be in (0, 1), got {confidence}")
    if not 0 <= successes <= trials:
        raise ParamsError(f"need 0 <= successes <= trials, got {successes} of {trials}")
    if trials == 0:
        return 0.0, 1.0
    n, value = trials, successes / trials
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    centre = (value + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(value * (1 - value) / n + z * z / (4 * n * n))
    # At 0 or n successes the bound is exactly 0 or 1; rounding must not nudge it inside.
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high
