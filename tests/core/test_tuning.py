import subprocess
import sys
import textwrap
from fractions import Fraction
from math import comb

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.core import (
    Banding,
    candidate_probability,
    evaluate_banding,
    false_negative_rate,
    false_positive_rate,
    optimal_params,
    threshold_bin_recall,
    threshold_point,
)
from neardup.core.tuning import (
    PRIOR_TOP,
    BinDensity,
    observed_density,
    prior_density,
)
from neardup.errors import ParamsError


def exact_area(bands: int, rows: int, upper: Fraction) -> Fraction:
    """integral_0^upper of 1 - (1 - s^r)^b ds, expanded binomially in exact rational arithmetic."""
    total = Fraction(0)
    for j in range(bands + 1):
        total += comb(bands, j) * (-1) ** j * upper ** (rows * j + 1) / (rows * j + 1)
    return upper - total


def exact_rates(t: Fraction, bands: int, rows: int) -> tuple[float, float]:
    below = exact_area(bands, rows, t)
    above = (1 - t) - (exact_area(bands, rows, Fraction(1)) - below)
    return float(below / t), float(above / (1 - t))


def test_s_curve_values() -> None:
    assert candidate_probability(0.0, 4, 3) == 0.0
    assert candidate_probability(1.0, 4, 3) == 1.0
    assert float(candidate_probability(0.5, 4, 3)) == pytest.approx(1 - (1 - 0.125) ** 4)
    s = np.linspace(0, 1, 101)
    assert np.all(np.diff(candidate_probability(s, 12, 10)) >= 0)
    assert threshold_point(16, 8) == pytest.approx((1 / 16) ** (1 / 8))
    with pytest.raises(ParamsError, match=r"\[0, 1\]"):
        candidate_probability([0.5, 1.5], 2, 2)


@given(
    st.integers(1, 24),
    st.integers(1, 12),
    st.fractions(Fraction(1, 20), Fraction(19, 20), max_denominator=40),
)
def test_rates_equal_exact_rational_integrals(bands: int, rows: int, t: Fraction) -> None:
    fp, fn = exact_rates(t, bands, rows)
    assert false_positive_rate(float(t), bands, rows) == pytest.approx(fp, abs=1e-12)
    assert false_negative_rate(float(t), bands, rows) == pytest.approx(fn, abs=1e-12)


@pytest.mark.parametrize(
    ("t", "n", "wp", "wn"), [(0.5, 24, 0.5, 0.5), (0.8, 32, 0.5, 0.5), (0.7, 30, 0.2, 0.8)]
)
def test_optimum_is_the_brute_force_optimum(t: float, n: int, wp: float, wn: float) -> None:
    tf = Fraction(t).limit_denominator(100)
    costs = {}
    for b in range(1, n + 1):
        for r in range(1, n // b + 1):
            fp, fn = exact_rates(tf, b, r)
            costs[(b, r)] = wp * fp + wn * fn
    best = optimal_params(t, n, wp, wn)
    assert costs[(best.bands, best.rows)] == pytest.approx(min(costs.values()), abs=1e-12)
    assert (best.false_positive_rate, best.false_negative_rate) == pytest.approx(
        exact_rates(tf, best.bands, best.rows)
    )


def test_extreme_weights_pick_the_extreme_bandings() -> None:
    # Caring only about misses: as many one-row bands as possible; only about false hits: one band.
    only_misses = optimal_params(0.3, 16, fp_weight=0.0, fn_weight=1.0)
    assert (only_misses.bands, only_misses.rows) == (16, 1)
    only_false_hits = optimal_params(0.3, 16, fp_weight=1.0, fn_weight=0.0)
    assert (only_false_hits.bands, only_false_hits.rows) == (1, 16)
    # Where several choices cost the same to 12 decimals, the one with fewer bands wins.
    tie = optimal_params(0.8, 128, fp_weight=0.0, fn_weight=1.0)
    assert tie.false_negative_rate < 1e-12
    assert tie.bands < 128


def test_normalisation_is_what_separates_us_from_datasketch() -> None:
    """datasketch's tuner integrates without dividing by the interval lengths (its issue #129)
    and picks 9 x 13 at t = 0.8, n = 128. The same unnormalised cost, minimised here, gives the
    same pick; the normalised rates give another one, with fewer missed pairs."""
    t, n = 0.8, 128
    unnormalised = {}
    for b in range(1, n + 1):
        for r in range(1, n // b + 1):
            unnormalised[(b, r)] = 0.5 * false_positive_rate(t, b, r) * t + 0.5 * false_negative_rate(
                t, b, r
            ) * (1 - t)
    assert min(unnormalised, key=unnormalised.__getitem__) == (9, 13)
    ours = optimal_params(t, n)
    assert (ours.bands, ours.rows) != (9, 13)
    assert ours.false_negative_rate < false_negative_rate(t, 9, 13)


def test_unused_permutations_are_reported_never_silent() -> None:
    choice = optimal_params(0.8, 128)
    assert choice.unused_permutations == 128 - choice.bands * choice.rows > 0
    assert f"uses {choice.bands * choice.rows} of 128 permutations" in str(choice)
    exact = optimal_params(0.8, 128, use_all_permutations=True)
    assert exact.bands * exact.rows == 128
    assert exact.unused_permutations == 0
    assert "permutations" not in str(exact)


def test_threshold_one_is_tuned_and_evaluated() -> None:
    """Defect: (0, 1] is the rule everywhere, so a collection at 1 has expected rates too."""
    b = optimal_params(1.0, 128)
    assert b.false_negative_rate == pytest.approx(0.0, abs=1e-12)
    again = evaluate_banding(1.0, b.bands, b.rows, 128)
    assert again.false_positive_rate == pytest.approx(b.false_positive_rate)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((0.0, 128), "threshold"),
        ((1.5, 128), "threshold"),
        ((True, 128), "threshold"),
        ((float("nan"), 128), "threshold"),
        ((0.5, 0), "num_perm"),
        ((0.5, 128, -1.0, 1.0), "fp_weight"),
        ((0.5, 128, 0.0, 0.0), "both be 0"),
    ],
)
def test_bad_tuning_arguments_are_refused(args: tuple[float, ...], message: str) -> None:
    with pytest.raises(ParamsError, match=message):
        optimal_params(*args)  # type: ignore[arg-type]


# -- the recall target in the threshold's own bin --------------------------------------------------


def exact_bin_recall(t: Fraction, bands: int, rows: int) -> float:
    """Mean of the S-curve over [t, min(1, t + 1/20)], in exact rational arithmetic."""
    high = min(Fraction(1), t + Fraction(1, 20))
    return float((exact_area(bands, rows, high) - exact_area(bands, rows, t)) / (high - t))


def exact_weighted_bin_recall(t: Fraction, bands: int, rows: int, top: Fraction) -> float:
    """Mean of the S-curve over [t, h = min(1, t + 1/20)] under the density falling linearly from
    t to ``top`` of its value there at h, in exact rational arithmetic: with x = (s - t)/(h - t)
    the density is 2 (1 - (1 - top) x) / (1 + top), and P = 1 - sum_j C(b, j) (-1)^j s^(rj)."""
    high = min(Fraction(1), t + Fraction(1, 20))
    width = high - t
    # The density as alpha + beta s (per unit s, integrating to 1 over [t, h]).
    beta = -2 * (1 - top) / ((1 + top) * width * width)
    alpha = 2 / ((1 + top) * width) - beta * t

    def moment(n: int) -> Fraction:  # integral_t^h s^n (alpha + beta s) ds
        return alpha * (high ** (n + 1) - t ** (n + 1)) / (n + 1) + beta * (
            high ** (n + 2) - t ** (n + 2)
        ) / (n + 2)

    miss = sum(comb(bands, j) * (-1) ** j * moment(rows * j) for j in range(bands + 1))
    return float(moment(0) - miss)


@given(
    st.integers(1, 24),
    st.integers(1, 12),
    st.fractions(Fraction(1, 20), Fraction(19, 20), max_denominator=40),
)
def test_bin_recall_equals_the_exact_rational_mean(bands: int, rows: int, t: Fraction) -> None:
    even = prior_density(float(t), bands * rows, 1.0)
    assert threshold_bin_recall(float(t), bands, rows, even) == pytest.approx(
        exact_bin_recall(t, bands, rows), abs=1e-12
    )
    assert even.recall(bands, rows)[0] == pytest.approx(exact_bin_recall(t, bands, rows), abs=1e-12)


@given(
    st.integers(1, 24),
    st.integers(1, 12),
    st.fractions(Fraction(1, 20), Fraction(19, 20), max_denominator=40),
    st.fractions(Fraction(0), Fraction(1), max_denominator=10),
)
def test_the_prior_recall_equals_the_exact_rational_weighted_mean(
    bands: int, rows: int, t: Fraction, top: Fraction
) -> None:
    """The law of the prior: its quadrature is the exact integral of P times the linear density,
    for every banding within its permutations; the default is the prior at PRIOR_TOP."""
    assert prior_density(float(t), bands * rows, float(top)).recall(bands, rows)[0] == pytest.approx(
        exact_weighted_bin_recall(t, bands, rows, top), abs=1e-12
    )
    expected = exact_weighted_bin_recall(t, bands, rows, Fraction(PRIOR_TOP).limit_denominator(100))
    assert threshold_bin_recall(float(t), bands, rows) == pytest.approx(expected, abs=1e-12)
    assert evaluate_banding(float(t), bands, rows).threshold_bin_recall == pytest.approx(expected, abs=1e-12)
    # Pairs falling towards the top of the bin lie where P is lowest: never more recall than even.
    assert threshold_bin_recall(float(t), bands, rows) <= exact_bin_recall(t, bands, rows) + 1e-12


def test_the_prior_is_steeper_than_any_bin_measured() -> None:
    """The measured bins (docs/benchmarks/threshold-unseen.md, "pair density") fell to 0.35 of
    their density at t at the steepest; the prior must fall further."""
    assert 0.0 <= PRIOR_TOP < 0.35


def brute_force_pick(
    t: float, n: int, target: float, recall_of: dict[tuple[int, int], float]
) -> tuple[list[tuple[int, int]], dict[tuple[int, int], float]]:
    """The bandings of b*r <= n whose recall (``recall_of``) reaches the target, and the weighted
    FP and FN cost (0.2, 0.8) of each."""
    feasible = [k for k, v in recall_of.items() if v >= target]
    cost = {k: 0.2 * false_positive_rate(t, *k) + 0.8 * false_negative_rate(t, *k) for k in recall_of}
    return feasible, cost


def assert_the_law(pick: Banding, t: float, target: float, recall_of: dict[tuple[int, int], float]) -> None:
    """When some banding's expected recall reaches the target, the pick reaches it and costs no
    more than any other that does; when none does, the pick comes closest."""
    feasible, cost = brute_force_pick(t, max(b * r for b, r in recall_of), target, recall_of)
    if feasible:
        assert recall_of[(pick.bands, pick.rows)] >= target
        assert pick.threshold_bin_recall == pytest.approx(recall_of[(pick.bands, pick.rows)], abs=1e-9)
        assert cost[(pick.bands, pick.rows)] == pytest.approx(min(cost[k] for k in feasible), abs=1e-9)
    else:
        assert pick.threshold_bin_recall == pytest.approx(max(recall_of.values()), abs=1e-9)


@settings(max_examples=30, deadline=None)  # each example brute-forces every b*r <= n
@given(
    st.sampled_from([0.3, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95]),
    st.integers(8, 64),
    st.sampled_from([0.9, 0.95, 0.99, 0.995]),
)
def test_the_tuner_meets_the_recall_target_whenever_a_banding_can(t: float, n: int, target: float) -> None:
    """The law under the prior: brute force over every b*r <= n, each banding's recall the exact
    rational mean of P under the prior's falling density (its quadrature where b*r > 24)."""
    pick = optimal_params(t, n, 0.2, 0.8, recall_at_threshold=target)
    assert pick.bands * pick.rows <= n
    top = Fraction(PRIOR_TOP).limit_denominator(100)
    recall_of = {
        (b, r): exact_weighted_bin_recall(Fraction(t), b, r, top)
        if b * r <= 24
        else threshold_bin_recall(t, b, r)
        for b in range(1, n + 1)
        for r in range(1, n // b + 1)
    }
    assert_the_law(pick, t, target, recall_of)


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from([0.3, 0.5, 0.6, 0.7, 0.8, 0.9]),
    st.integers(8, 48),
    st.sampled_from([0.9, 0.95, 0.99]),
    st.lists(st.tuples(st.floats(0.0, 1.0, exclude_max=True), st.integers(1, 500)), min_size=1, max_size=30),
    st.tuples(st.integers(1, 40), st.integers(1, 10)),
)
def test_the_tuner_meets_the_target_for_a_collections_own_density(
    t: float, n: int, target: float, spread: list[tuple[float, int]], found_by: tuple[int, int]
) -> None:
    """The law under any density a collection's pairs can have (bunched at t, at the top, in
    clumps): the pairs' similarities and counts drawn at random, found by a random banding; each
    banding's recall computed here directly as the found pairs' Horvitz-Thompson mean of its P,
    and the tuner's pick against brute force over every b*r <= n."""
    similarities = np.array([t + 0.0499 * x for x, _ in spread])  # inside the bin, rounding too
    counts = np.array([c for _, c in spread], dtype=np.float64)
    b0, r0 = found_by
    if candidate_probability(similarities, b0, r0).min() < 1e-9:
        return  # a banding that could not have found these pairs
    density = observed_density(t, similarities, counts, b0, r0)
    stands_for = counts / candidate_probability(similarities, b0, r0)  # pairs found or not
    recall_of = {
        (b, r): float((stands_for * candidate_probability(similarities, b, r)).sum() / stands_for.sum())
        for b in range(1, n + 1)
        for r in range(1, n // b + 1)
    }
    pick = optimal_params(t, n, 0.2, 0.8, recall_at_threshold=target, density=density)
    assert_the_law(pick, t, target, recall_of)
    # The found banding's own recall from its pairs: found over what they stand for.
    assert density.recall(b0, r0)[0] == pytest.approx(counts.sum() / stands_for.sum(), rel=1e-9)


@given(
    st.lists(st.tuples(st.floats(0.0, 1.0, exclude_max=True), st.floats(1.0, 1e4)), min_size=1, max_size=20),
    st.integers(1, 30),
    st.integers(1, 8),
)
def test_pairs_found_as_often_as_expected_give_back_the_pairs_density(
    spread: list[tuple[float, float]], bands: int, rows: int
) -> None:
    """Horvitz-Thompson: when each similarity's found pairs are exactly the expected share P(s) of
    its pairs, the observed density is the pairs' own, whatever P did to them."""
    t = 0.6
    similarities = np.array([t + 0.0499 * x for x, _ in spread])  # inside the bin, rounding too
    pairs = np.array([n for _, n in spread])
    p = candidate_probability(similarities, bands, rows)
    if p.min() < 1e-6:
        return
    density = observed_density(t, similarities, pairs * p, bands, rows)
    assert density.weights == pytest.approx(pairs / pairs.sum(), rel=1e-9)
    assert density.recall(bands, rows)[0] == pytest.approx((pairs * p).sum() / pairs.sum(), rel=1e-9)


def test_an_observed_density_needs_pairs_in_the_bin_and_one_threshold() -> None:
    with pytest.raises(ParamsError, match=r"no stored pair lies in \[0\.8, 0\.85\)"):
        observed_density(0.8, [0.7, 0.9], [3, 4], 16, 8)
    density = observed_density(0.8, [0.81], [5], 16, 8)
    with pytest.raises(ParamsError, match=r"density is for threshold 0\.8, not 0\.7"):
        optimal_params(0.7, 128, recall_at_threshold=0.99, density=density)
    assert isinstance(density, BinDensity)
    assert density.pairs == 5
    assert "own 5 pairs" in density.describe()


def test_the_default_target_changes_the_default_picks_where_they_missed() -> None:
    """At n = 128 the pick without a target misses more than 1 in 100 right at 0.5 to 0.8; with
    the target none does, and no pick needs more bucket rows than 1.25x the old one."""
    for t in (0.5, 0.6, 0.7, 0.8, 0.9):
        old = optimal_params(t, 128, 0.2, 0.8)
        new = optimal_params(t, 128, 0.2, 0.8, recall_at_threshold=0.99)
        assert new.threshold_bin_recall >= 0.99 > old.threshold_bin_recall or old == new
        assert new.bucket_rows <= 1.25 * old.bucket_rows
    assert optimal_params(0.5, 128, 0.2, 0.8).threshold_bin_recall < 0.91


def test_the_banding_text_names_p_at_the_threshold_and_the_bin() -> None:
    b = evaluate_banding(0.5, 30, 4)
    assert b.candidate_probability_at_threshold == pytest.approx(1 - (1 - 0.5**4) ** 30)
    assert "P(candidate) at 0.5 0.8557" in str(b)
    assert f"expected recall in [0.5, 0.55) {b.threshold_bin_recall:.4f} (pairs' density falling" in str(b)
    assert (
        b.threshold_bin_recall
        < threshold_bin_recall(0.5, 30, 4, prior_density(0.5, 120, 1.0))
        == pytest.approx(0.9043, abs=1e-4)
    )
    assert b.bucket_rows == 30
    assert b.candidates_per_found_pair == pytest.approx(
        0.5 * b.false_positive_rate / (0.5 * (1 - b.false_negative_rate))
    )


@pytest.mark.parametrize("bad", [0.0, 1.0, 1.5, -0.1, True, float("nan"), "0.9"])
def test_bad_recall_targets_are_refused(bad: object) -> None:
    with pytest.raises(ParamsError, match="recall_at_threshold"):
        optimal_params(0.8, 128, recall_at_threshold=bad)  # type: ignore[arg-type]


def quadrature_rates(t: float, bands: int, rows: int) -> tuple[float, float]:
    """FP and FN by Gauss-Legendre quadrature, exact for the S-curve's polynomial of degree b*r."""
    nodes, weights = np.polynomial.legendre.leggauss(bands * rows // 2 + 1)
    below = candidate_probability(t / 2 * (nodes + 1), bands, rows)
    above = candidate_probability(t + (1 - t) / 2 * (nodes + 1), bands, rows)
    return float(weights @ below / 2), float(weights @ (1 - above) / 2)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 64), st.integers(1, 24), st.floats(0.05, 0.99))
def test_rates_of_long_signatures_equal_the_quadrature(bands: int, rows: int, t: float) -> None:
    # b*r up to 1,536: where the binomial expansion's exact rationals cancel too much to compute.
    fp, fn = quadrature_rates(t, bands, rows)
    assert false_positive_rate(t, bands, rows) == pytest.approx(fp, abs=1e-12)
    assert false_negative_rate(t, bands, rows) == pytest.approx(fn, abs=1e-12)


@pytest.mark.parametrize(
    ("bands", "rows", "t"), [(2, 1500, 0.5), (1, 4000, 0.8), (3, 700, 0.3), (40, 60, 0.05)]
)
def test_rates_where_t_to_the_r_underflows_equal_the_quadrature(bands: int, rows: int, t: float) -> None:
    # t^r is 0 in doubles (0.5^1500): the incomplete beta function alone gave FP 1 and FN off by t.
    fp, fn = quadrature_rates(t, bands, rows)
    assert false_positive_rate(t, bands, rows) == pytest.approx(fp, abs=1e-12)
    assert false_negative_rate(t, bands, rows) == pytest.approx(fn, abs=1e-12)


def test_the_search_of_the_longest_signature_needs_memory_of_its_bandings_only() -> None:
    # Quadrature over every banding held num_perm/2 nodes for each of num_perm rows a band at
    # once: at 8192 permutations it asked for gigabytes (and took minutes). Here it runs in what
    # the process holds after a small search, plus 256 MiB.
    script = textwrap.dedent(
        """
        import re, resource
        from neardup.core.tuning import optimal_params
        optimal_params(0.8, 64)
        status = open("/proc/self/status").read()
        held = int(re.search(r"VmSize:\\s+(\\d+) kB", status).group(1)) * 1024
        resource.setrlimit(resource.RLIMIT_AS, (held + (256 << 20), resource.RLIM_INFINITY))
        b = optimal_params(0.8, 8192, 0.2, 0.8, recall_at_threshold=0.99)
        print(b.bands, b.rows)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    bands, rows = map(int, done.stdout.split())
    assert bands * rows <= 8192
    assert threshold_bin_recall(0.8, bands, rows) >= 0.99
