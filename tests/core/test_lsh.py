import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from neardup.core import SCHEMES, MinHasher, band_keys, candidate_probability
from neardup.core.lsh import distinct_keys, most_shared
from neardup.errors import ParamsError

from ._sets import pairs_with_jaccard

sig_arrays = arrays(np.uint32, st.tuples(st.integers(1, 5), st.just(24)), elements=st.integers(0, 6))


@given(sig_arrays, st.sampled_from([(1, 24), (3, 8), (4, 6), (24, 1), (5, 4)]))
def test_keys_agree_exactly_when_bands_agree(sigs: np.ndarray, banding: tuple[int, int]) -> None:
    b, r = banding
    keys = band_keys(sigs, b, r)
    assert keys.shape == (sigs.shape[0], b)
    assert keys.dtype == np.int64
    for i in range(sigs.shape[0]):
        for j in range(sigs.shape[0]):
            for band in range(b):
                same_band = np.array_equal(
                    sigs[i, band * r : (band + 1) * r], sigs[j, band * r : (band + 1) * r]
                )
                assert (keys[i, band] == keys[j, band]) == same_band


@given(
    arrays(
        np.int64,
        st.tuples(st.integers(0, 30), st.integers(0, 6)),
        elements=st.one_of(st.integers(-3, 3), st.integers(-(2**63), 2**63 - 1)),
    )
)
def test_distinct_keys_are_each_bands_distinct_buckets_in_order(keys: np.ndarray) -> None:
    band, bucket = distinct_keys(keys)
    expected = [(b, int(k)) for b in range(keys.shape[1]) for k in np.unique(keys[:, b])]
    assert band.dtype == np.int16
    assert bucket.dtype == np.int64
    assert list(zip(band.tolist(), bucket.tolist(), strict=True)) == expected


def test_rows_order_matters_and_unused_rows_do_not() -> None:
    sig = np.arange(10, dtype=np.uint32)
    swapped = sig.copy()
    swapped[[0, 1]] = swapped[[1, 0]]
    assert band_keys(sig, 1, 2)[0, 0] != band_keys(swapped, 1, 2)[0, 0]
    tail_changed = sig.copy()
    tail_changed[9] = 99
    assert np.array_equal(band_keys(sig, 3, 3), band_keys(tail_changed, 3, 3))


def test_golden_keys_never_change() -> None:
    # Frozen: stored buckets depend on these (bump HASH_VERSION instead of editing them).
    sig = np.arange(8, dtype=np.uint32)[None, :]
    assert band_keys(sig, 2, 4).tolist() == [[5475283713983536888, -7552817952780484581]]
    assert band_keys(np.zeros((1, 2), dtype=np.uint32), 1, 2)[0, 0] != 0


@pytest.mark.parametrize(
    ("sigs", "bands", "rows", "message"),
    [
        (np.zeros((2, 8), dtype=np.uint32), 3, 3, r"bands\*rows = 3\*3 = 9 exceeds num_perm = 8"),
        (np.zeros((2, 8), dtype=np.uint32), 0, 3, "bands"),
        (np.zeros((2, 8), dtype=np.int64), 2, 2, "uint32"),
        (np.zeros((2, 2, 2), dtype=np.uint32), 1, 1, "2-D"),
    ],
)
def test_bad_banding_is_refused(sigs: np.ndarray, bands: int, rows: int, message: str) -> None:
    with pytest.raises(ParamsError, match=message):
        band_keys(sigs, bands, rows)


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("union", [30, 800])
def test_empirical_candidate_rate_follows_the_s_curve(scheme: str, union: int) -> None:
    rng = np.random.default_rng(11)
    mh = MinHasher(128, 21, scheme)  # type: ignore[arg-type]
    bands, rows, count = 12, 10, 1200
    for jaccard in (0.5, 0.7, 0.8, 0.9):
        left, right, exact = pairs_with_jaccard(rng, count, union, jaccard)
        hit = (
            band_keys(mh.signatures(left), bands, rows) == band_keys(mh.signatures(right), bands, rows)
        ).any(1)
        expected = float(candidate_probability(exact, bands, rows))
        sigma = np.sqrt(expected * (1 - expected) / count)
        assert abs(hit.mean() - expected) <= 4 * sigma + 0.005, (jaccard, hit.mean(), expected)


@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(-3, 3)), max_size=60),
    st.integers(1, 8),
)
def test_most_shared_are_the_commonest_keys_then_by_band_and_bucket(
    rows: list[tuple[int, int]], most: int
) -> None:
    band = np.array([b for b, _ in rows], dtype=np.int16)
    bucket = np.array([k for _, k in rows], dtype=np.int64)
    got_band, got_bucket = most_shared(band, bucket, most)
    counts: dict[tuple[int, int], int] = {}
    for key in rows:
        counts[key] = counts.get(key, 0) + 1
    expected = sorted(counts, key=lambda key: (-counts[key], key))[:most]
    assert list(zip(got_band.tolist(), got_bucket.tolist(), strict=True)) == expected
