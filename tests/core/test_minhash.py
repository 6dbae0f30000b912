import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from neardup.core import EMPTY, PRIME, SCHEMES, MinHasher, Ragged, agreement, empty_rows, estimate_jaccard
from neardup.core.minhash import _coefficients
from neardup.errors import ParamsError

from ._sets import pairs_with_jaccard

hash_sets = st.lists(st.integers(0, 2**32 - 1), max_size=300)
schemes = st.sampled_from(SCHEMES)


def classic_reference(hashes: list[int], a: np.ndarray, b: np.ndarray) -> list[int]:
    """min over x of (a*x + b) mod p with Python's unbounded integers: no overflow possible."""
    if not hashes:
        return [EMPTY] * len(a)
    return [min((int(ai) * x + int(bi)) % PRIME for x in hashes) for ai, bi in zip(a, b, strict=True)]


def oph_reference(hashes: list[int], n: int, seed: int) -> list[int]:
    """One-permutation hashing with optimal densification, written from the docstring in plain Python."""
    ca, cb = _coefficients(seed, 1)
    a, b = int(ca[0]), int(cb[0])
    probe_seed = int(np.random.PCG64(seed).random_raw(3)[2])
    bins = [EMPTY] * n
    for x in hashes:
        v = (a * x + b) % PRIME
        bins[v * n >> 32] = min(bins[v * n >> 32], v)
    if not hashes:
        return bins
    mask = 2**64 - 1

    def fmix64(h: int) -> int:
        h ^= h >> 33
        h = h * 0xFF51AFD7ED558CCD & mask
        h ^= h >> 33
        h = h * 0xC4CEB9FE1A85EC53 & mask
        return h ^ (h >> 33)

    out = []
    for i in range(n):
        t = 1
        donor = i
        while bins[donor] == EMPTY:
            probe = fmix64((probe_seed + i * 0x9E3779B97F4A7C15 + t * 0xD6E8FEB86659FD93) & mask)
            donor = ((probe & 0xFFFFFFFF) * n) >> 32
            t += 1
        out.append(bins[donor])
    return out


@given(hash_sets, st.integers(0, 2**63 - 1))
def test_classic_is_exact_modular_arithmetic(hashes: list[int], seed: int) -> None:
    mh = MinHasher(16, seed, "classic")
    a, b = _coefficients(seed, 16)
    assert mh.signature(np.array(hashes, dtype=np.uint64)).tolist() == classic_reference(hashes, a, b)


@given(hash_sets, st.integers(0, 2**63 - 1), st.sampled_from([1, 7, 64, 128]))
def test_oph_matches_its_specification(hashes: list[int], seed: int, n: int) -> None:
    assert MinHasher(n, seed, "oph").signature(np.array(hashes, dtype=np.uint64)).tolist() == oph_reference(
        hashes, n, seed
    )


def test_coefficients_are_valid_permutations() -> None:
    a, b = _coefficients(1, 10_000)
    assert a.min() >= 1
    assert a.max() < PRIME
    assert b.min() >= 0
    assert b.max() < PRIME


def _row_rank_correlations(a: np.ndarray, b: np.ndarray, p: int, x: np.ndarray) -> np.ndarray:
    """Spearman correlation between x and (a_i*x + b_i) mod p, one per row, in exact arithmetic."""
    xs = x.astype(object)
    out = []
    for ai, bi in zip(a.tolist(), b.tolist(), strict=True):
        values = np.array([(ai * v + bi) % p for v in xs], dtype=np.float64)
        out.append(np.corrcoef(np.argsort(np.argsort(x)), np.argsort(np.argsort(values)))[0, 1])
    return np.array(out)


def test_no_row_is_monotone_unlike_the_2_61_shortcut() -> None:
    rng = np.random.default_rng(3)
    x = rng.integers(0, 2**32, 400, dtype=np.uint64)
    # The known-bad scheme: p = 2**61 - 1 with a, b < 2**32 and 32-bit keys. a*x + b < 2**64 but
    # is often below p, so the modulus never wraps and the row is the identity order.
    bad_a = rng.integers(1, 2**32, 128, dtype=np.uint64)
    bad = _row_rank_correlations(bad_a, bad_a, 2**61 - 1, x)
    assert (bad > 0.99).sum() >= 5  # the check below would catch that flaw
    a, b = _coefficients(1, 128)
    ours = _row_rank_correlations(a, b, PRIME, x)
    assert np.abs(ours).max() < 0.25


@given(hash_sets, schemes, st.randoms())
def test_order_and_repeats_do_not_matter(hashes: list[int], scheme: str, rnd: object) -> None:
    mh = MinHasher(32, 5, scheme)  # type: ignore[arg-type]
    shuffled = hashes + hashes[: len(hashes) // 2]
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    assert mh.signature(hashes).tolist() == mh.signature(shuffled).tolist()


@given(st.lists(hash_sets, max_size=6), schemes)
def test_batch_equals_one_by_one(sets: list[list[int]], scheme: str) -> None:
    mh = MinHasher(64, 9, scheme)  # type: ignore[arg-type]
    together = mh.signatures(sets)
    assert together.shape == (len(sets), 64)
    assert together.dtype == np.uint32
    for i, s in enumerate(sets):
        assert together[i].tolist() == mh.signature(s).tolist()
    assert np.array_equal(mh.signatures(Ragged.from_arrays(sets, np.uint32)), together)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_empty_set_matches_nothing(scheme: str) -> None:
    mh = MinHasher(128, 1, scheme)  # type: ignore[arg-type]
    empty, other = mh.signatures([[], [1, 2, 3]])
    assert (empty == EMPTY).all()
    assert (other != EMPTY).all()
    assert empty_rows(np.stack([empty, other])).tolist() == [True, False]
    assert estimate_jaccard(empty, empty).value == 0.0
    assert estimate_jaccard(empty, other).value == 0.0
    assert estimate_jaccard(other, other).value == 1.0


GOLDEN_TEXT = "The quick brown fox jumps over the lazy dog"
# Frozen: a change here silently invalidates every stored index (bump HASH_VERSION instead).
GOLDEN = {
    "oph": [
        3651730656,
        4245639248,
        3363059649,
        2076966693,
        3326613705,
        3980048120,
        3363059649,
        3326613705,
        1260946626,
        305482796,
        2847564297,
        2316138609,
    ],
    "classic": [
        37599387,
        91861008,
        106122249,
        225374625,
        70263437,
        240778230,
        163517136,
        3884892,
        57014589,
        440874895,
        74601596,
        587769612,
    ],
}


def _golden_signature(scheme: str) -> list[int]:
    from neardup.core import shingles

    values: list[int] = MinHasher(128, 42, scheme).signature(shingles(GOLDEN_TEXT)).tolist()  # type: ignore[arg-type]
    return values[:12]


@pytest.mark.parametrize("scheme", SCHEMES)
def test_golden_signatures_in_this_and_a_fresh_process(scheme: str) -> None:
    assert _golden_signature(scheme) == GOLDEN[scheme]
    code = (
        "from neardup.core import MinHasher, shingles;"
        f"print(MinHasher(128, 42, {scheme!r}).signature(shingles({GOLDEN_TEXT!r})).tolist()[:12])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == str(GOLDEN[scheme])


def test_seeds_and_schemes_give_different_signatures() -> None:
    hashes = np.arange(1000, dtype=np.uint32)
    sigs = [MinHasher(128, s, m).signature(hashes) for s in (1, 2) for m in SCHEMES]
    for i in range(len(sigs)):
        for j in range(i + 1, len(sigs)):
            assert (sigs[i] == sigs[j]).mean() < 0.1


@pytest.mark.parametrize(
    ("bad", "message"),
    [([-1, 2], r"\[0, 2\*\*32\)"), ([2**32], r"\[0, 2\*\*32\)"), ([1.5], "integers"), (["a"], "integers")],
)
def test_bad_hashes_are_refused_naming_the_document(bad: list[object], message: str) -> None:
    with pytest.raises(ParamsError, match=f"document 1: .*{message}"):
        MinHasher(8).signatures([[1], bad])  # type: ignore[list-item]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_perm": 0}, "num_perm"),
        ({"num_perm": 9000}, "num_perm"),
        ({"num_perm": 8.0}, "num_perm"),
        ({"seed": -1}, "seed"),
        ({"seed": 2**63}, "seed"),
        ({"scheme": "bbit"}, "scheme"),
    ],
)
def test_bad_settings_are_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ParamsError, match=message):
        MinHasher(**kwargs)  # type: ignore[arg-type]


# --- the statistical laws: fixed seeds, so a pass or a failure is reproducible --------------------


@pytest.mark.parametrize("scheme", SCHEMES)
def test_estimates_within_three_standard_errors(scheme: str) -> None:
    rng = np.random.default_rng(2026)
    mh = MinHasher(128, 11, scheme)  # type: ignore[arg-type]
    errors: list[float] = []
    inside: list[bool] = []
    for jaccard in np.linspace(0.0, 1.0, 21):
        for union in (40, 400, 1500):
            left, right, exact = pairs_with_jaccard(rng, 40, union, float(jaccard))
            est = agreement(mh.signatures(left), mh.signatures(right))
            se = np.sqrt(exact * (1 - exact) / 128)
            inside.extend(np.abs(est - exact) <= 3 * se + 1e-12)
            errors.extend(est - exact)
    assert np.mean(inside) >= 0.98
    assert abs(np.mean(errors)) < 0.003  # 2520 pairs: the mean's own standard error is ~0.0008


@pytest.mark.parametrize(("scheme", "union", "low", "high"), [
    ("classic", 40, 0.85, 1.15), ("classic", 1500, 0.85, 1.15),
    # OPH samples bins without replacement: variance (U - n)/(U - 1) of the classic one for large
    # sets; for sets smaller than n, densified rows are copies and the variance grows.
    ("oph", 1500, 0.80, 1.08), ("oph", 40, 1.05, 1.6),
])  # fmt: skip
def test_spread_matches_binomial_variance(scheme: str, union: int, low: float, high: float) -> None:
    """Correlated rows (the 2**61-1 shortcut) would inflate this ratio far beyond 1."""
    rng = np.random.default_rng(7)
    mh = MinHasher(128, 3, scheme)  # type: ignore[arg-type]
    for jaccard in (0.3, 0.6, 0.85):
        left, right, exact = pairs_with_jaccard(rng, 1500, union, jaccard)
        est = agreement(mh.signatures(left), mh.signatures(right))
        ratio = est.var() / (exact * (1 - exact) / 128)
        assert low <= ratio <= high, (jaccard, ratio)
