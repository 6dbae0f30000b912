"""The collection checks itself: the threshold bin's expected recall from its own stored pairs,
and the rebuild that restores the target when pairs bunch at the threshold more than the tuner's
prior allows; in the library (pure, against direct sums) and through stats, eval and rebuild on a
real PostgreSQL."""

from __future__ import annotations

import json
import random
import string

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup import own_pairs
from neardup.config import IndexConfig
from neardup.core import candidate_probability, evaluate_banding, optimal_params
from neardup.core.recall_check import BIN_STEPS, check_recall, sub_bin_edges
from neardup.core.tuning import OWN_DENSITY_MIN_PAIRS, observed_density
from neardup.index import Index
from tests.conftest import Run

pytestmark = pytest.mark.distributed_variant

FP, FN = 0.2, 0.8


def _mids(threshold: float) -> np.ndarray:
    edges = np.array(sub_bin_edges(threshold))
    mids: np.ndarray = (edges[:-1] + edges[1:]) / 2.0
    return mids


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from([0.5, 0.6, 0.7, 0.8, 0.9]),
    st.lists(st.integers(0, 400), min_size=BIN_STEPS, max_size=BIN_STEPS),
    st.tuples(st.integers(2, 40), st.integers(1, 12)),
)
def test_the_own_estimate_is_the_found_pairs_over_what_they_stand_for(
    t: float, counts: list[int], banding: tuple[int, int]
) -> None:
    """Each found pair of similarity s stands for 1 / P(s) pairs; the estimate is found over that
    sum (computed here directly), short exactly when trusted and under the target, and a
    restoration, when one is named, reaches the target for these pairs (checked by direct sums)."""
    bands, rows = banding
    if bands * rows > 128:
        return
    b = evaluate_banding(t, bands, rows, 128)
    check = check_recall(t, b, 0.99, [*counts, 7], FP, FN)  # the trailing count above the bin is ignored
    c = np.array(counts, dtype=np.float64)
    assert check.pairs == c.sum()
    if not c.sum():
        assert check.own_recall is None
        assert not check.short
        assert "no stored pair lies in it yet" in check.summary()
        return
    p = candidate_probability(_mids(t), bands, rows)
    stands_for = c / p
    assert check.own_recall == pytest.approx(c.sum() / stands_for.sum(), rel=1e-9)
    assert check.trusted == (c.sum() >= OWN_DENSITY_MIN_PAIRS)
    assert check.short == (check.trusted and c.sum() / stands_for.sum() < 0.99)
    fix = check.restoration
    assert (fix is not None) <= check.short
    if fix is not None:
        q = candidate_probability(_mids(t), fix.bands, fix.rows)
        assert float((stands_for * q).sum() / stands_for.sum()) == pytest.approx(
            fix.expected_recall, abs=1e-9
        )
        assert fix.expected_recall >= 0.99
        assert fix.bucket_rows_per_content == fix.bands
        assert f"neardup rebuild {fix.option}" in check.summary()


def test_pairs_bunched_at_the_threshold_are_caught_and_the_rebuild_named() -> None:
    t = 0.8
    default = optimal_params(t, 128, FP, FN, recall_at_threshold=0.99)
    counts = [500] + [0] * (BIN_STEPS - 1)  # every pair right at the threshold
    check = check_recall(t, default, 0.99, counts, FP, FN)
    assert check.prior_recall == pytest.approx(default.threshold_bin_recall)
    assert check.own_recall == pytest.approx(
        float(candidate_probability(_mids(t)[0], default.bands, default.rows))
    )
    assert check.short
    fix = check.restoration
    assert fix is not None
    assert fix.option == "--recall-at-threshold 0.99"
    density = observed_density(t, _mids(t), counts, default.bands, default.rows)
    expected = optimal_params(t, 128, FP, FN, recall_at_threshold=0.99, density=density)
    assert (fix.bands, fix.rows, fix.num_perm) == (expected.bands, expected.rows, 128)
    assert fix.candidates_ratio > 1.0  # more candidates for the same pairs: the price
    summary = check.summary()
    assert "UNDER the target 0.99" in summary
    assert f"neardup rebuild --recall-at-threshold 0.99` would band it {fix.bands} x {fix.rows}" in summary
    # Too few pairs to trust: the prior stands, nothing is short.
    few = check_recall(t, default, 0.99, [OWN_DENSITY_MIN_PAIRS - 1] + [0] * (BIN_STEPS - 1), FP, FN)
    assert not few.short
    assert "so the prior stands" in few.summary()


def test_a_target_out_of_reach_names_more_permutations() -> None:
    """At 8 permutations no banding reaches 0.999 for pairs at 0.5 (8 one-row bands give
    1 - 0.5^8 = 0.996); 16 do."""
    b = evaluate_banding(0.5, 2, 4, 8)
    check = check_recall(0.5, b, 0.999, [1_000] + [0] * (BIN_STEPS - 1), FP, FN)
    fix = check.restoration
    assert fix is not None
    assert fix.num_perm == 16
    assert fix.option == f"--num-perm {fix.num_perm} --recall-at-threshold 0.999"
    assert "re-sketching every text" in check.summary()


# -- through the database ---------------------------------------------------------------------------


def bunched_pairs(n: int, seed: int) -> list[tuple[str, str]]:
    """``n`` pairs of random-letter texts sharing a 357-character start and ending apart: 5-shingle
    Jaccard 353 / 439 = 0.804 each, just above 0.8; texts of different pairs share nothing."""
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        common = "".join(rng.choices(string.ascii_lowercase, k=357))
        tails = ["".join(rng.choices(string.ascii_lowercase, k=43)) for _ in range(2)]
        docs += [(f"p{i}a", common + tails[0]), (f"p{i}b", common + tails[1])]
    return docs


def test_stats_eval_and_rebuild_act_on_pairs_bunched_at_the_threshold(cli: Run) -> None:
    docs = bunched_pairs(160, seed=5)
    assert cli("init", "--threshold", "0.8")[0] == 0
    index = Index.open(cli.database_url, cli.collection, schema=cli.schema)
    index.add(docs)
    stats = index.stats()
    check = stats.recall_check
    assert check is not None
    assert check.pairs == stats.pairs >= OWN_DENSITY_MIN_PAIRS  # every stored pair lies at 0.804
    assert check.short
    fix = check.restoration
    assert fix is not None
    assert fix.option == "--recall-at-threshold 0.99"
    status, out, err = cli("stats", "--format", "json")
    assert status == 0, err
    rows = json.loads(out)
    assert rows["threshold_bin_pairs"] == check.pairs
    assert rows["threshold_bin_recall_short"] is True
    assert rows["threshold_bin_rebuild"] == "neardup rebuild --recall-at-threshold 0.99"
    assert rows["threshold_bin_recall_own"] < 0.99
    assert "warning: expected recall in [0.8, 0.85) from the collection's own" in err
    status, _, err = cli("eval", "--sample", "40")
    assert status == 0, err
    assert "the collection's own pairs: expected recall in [0.8, 0.85)" in err
    assert "UNDER the target 0.99" in err
    # The rebuild it names re-tunes to the collection's own pairs, and the check then holds.
    status, _, err = cli("rebuild", "--recall-at-threshold", "0.99")
    assert status == 0, err
    index.close()
    index = Index.open(cli.database_url, cli.collection, schema=cli.schema)
    assert (index.params.bands, index.params.rows) == (fix.bands, fix.rows)
    after = index.stats().recall_check
    assert after is not None
    assert not after.short
    assert after.own_recall is not None
    assert after.own_recall >= 0.99
    status, _, err = cli("stats")
    assert "warning:" not in err
    # The own density stands only where the stored pairs can stand for the pairs: not under the
    # collection's threshold (never stored), nor after a change of what a similarity is.
    scope, config = index._scope, index.config
    own = own_pairs.own_density(scope, config, 0.8, {})
    assert own is not None
    assert own.pairs == after.pairs
    assert own_pairs.own_density(scope, config, 0.75, {}) is None
    assert own_pairs.own_density(scope, config, 0.8, {"k": 4}) is None
    assert own_pairs.own_density(scope, config, 0.8, {"k": config.params.k, "num_perm": 256}) is not None
    index.rebuild(threshold=0.75)
    assert (index.params.bands, index.params.rows) == (
        IndexConfig.new(0.75).params.bands,
        IndexConfig.new(0.75).params.rows,
    )
    index.close()
