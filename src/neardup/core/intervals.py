"""Confidence intervals for a proportion (recall in a bin, labelled precision): Wilson's score
interval, which stays honest at 0 and at 1 where the normal approximation collapses to a point,
and Clopper and Pearson's exact interval, whose coverage never falls under the confidence."""

from __future__ import annotations

import math
from statistics import NormalDist

# The confidence of every interval neardup reports.
CONFIDENCE = 0.95


def _checked(successes: int, trials: int, confidence: float) -> int:
    """``trials``, once the counts and the confidence are possible, else ValueError."""
    if trials < 0 or not 0 <= successes <= trials:
        raise ValueError(f"need 0 <= successes <= trials, got {successes} of {trials}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    return trials


def wilson(successes: int, trials: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Wilson score interval for successes / trials (approximate coverage ``confidence``);
    (0, 1) without trials. With 10 of 10 it is about (0.72, 1), never (1, 1)."""
    if _checked(successes, trials, confidence) == 0:
        return 0.0, 1.0
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    p = successes / trials
    z2n = z * z / trials
    centre = (p + z2n / 2) / (1 + z2n)
    half = z / (1 + z2n) * math.sqrt(p * (1 - p) / trials + z2n / (4 * trials))
    # At 0 and at 1 the interval touches the end exactly; rounding must not push it past.
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == trials else min(1.0, centre + half)
    return low, high


def clopper_pearson(successes: int, trials: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Clopper and Pearson's exact interval for successes / trials: its coverage is at least
    ``confidence`` for independent trials (conservative, never a point); (0, 1) without trials.
    With 2 of 2 it is about (0.16, 1)."""
    if _checked(successes, trials, confidence) == 0:
        return 0.0, 1.0
    # Imported here: only measuring needs it, and other commands need not load scipy.
    from scipy.stats import beta

    tail = (1.0 - confidence) / 2.0
    low = 0.0 if successes == 0 else float(beta.ppf(tail, successes, trials - successes + 1))
    high = 1.0 if successes == trials else float(beta.ppf(1.0 - tail, successes + 1, trials - successes))
    return low, high
