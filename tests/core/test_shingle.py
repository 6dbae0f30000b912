import itertools

import mmh3
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from neardup.core import Normalization, Ragged, normalize, shingle_batch, shingles
from neardup.core.normalize import split_words
from neardup.core.shingle import distinct_rows, distinct_rows_across
from neardup.errors import ParamsError

texts = st.text(alphabet=st.sampled_from("ab c\nДé✓\u3000") | st.characters(), max_size=80)


def murmur(shingle: str) -> int:
    return int(mmh3.hash(shingle.encode("utf-32-le", "surrogatepass"), 0, signed=False))


DEFAULT = Normalization()


def char_reference(text: str, k: int, norm: Normalization = DEFAULT) -> list[int]:
    t = normalize(text, norm)
    grams = [t[i : i + k] for i in range(len(t) - k + 1)] if len(t) >= k else ([t] if t else [])
    return sorted({murmur(g) for g in grams})


def word_reference(text: str, k: int, norm: Normalization = DEFAULT) -> list[int]:
    words = split_words(normalize(text, norm))
    grams = (
        [words[i : i + k] for i in range(len(words) - k + 1)]
        if len(words) >= k
        else ([words] if words else [])
    )
    return sorted({murmur(" ".join(g)) for g in grams})


@given(texts, st.integers(1, 9))
def test_char_shingles_are_murmur3_of_utf32_windows(text: str, k: int) -> None:
    assert shingles(text, "char", k).tolist() == char_reference(text, k)


@given(texts, st.integers(1, 4))
def test_word_shingles_are_murmur3_of_joined_words(text: str, k: int) -> None:
    assert shingles(text, "word", k).tolist() == word_reference(text, k)
    raw = Normalization("none", "keep", False)
    assert shingles(text, "word", k, raw).tolist() == word_reference(text, k, raw)


@given(st.lists(texts, max_size=6), st.sampled_from(["char", "word"]), st.integers(1, 6))
def test_batch_equals_one_by_one(batch: list[str], kind: str, k: int) -> None:
    together = shingle_batch(batch, kind, k)  # type: ignore[arg-type]
    assert len(together) == len(batch)
    for i, text in enumerate(batch):
        assert together[i].tolist() == shingles(text, kind, k).tolist()  # type: ignore[arg-type]


def test_result_is_sorted_unique_uint32() -> None:
    out = shingles("abababababab", "char", 2)
    assert out.dtype == np.uint32
    assert out.tolist() == sorted({murmur("ab"), murmur("ba")})


def test_short_empty_and_one_character_texts() -> None:
    assert shingles("").size == 0
    assert shingles(" \n\t ").size == 0
    assert shingles("a").tolist() == [murmur("a")]
    assert shingles("abcd", k=5).tolist() == [murmur("abcd")]
    assert shingles("two words", "word", 3).tolist() == [murmur("two words")]


def test_golden_hashes_never_change() -> None:
    # Frozen: a change here silently invalidates every stored index (bump HASH_VERSION instead).
    assert shingles("Hello,   World!").tolist() == [
        86512736, 132569322, 1563934932, 1576049653, 2423195271, 3044408021, 3504533067, 3559595335,
        4276526016,
    ]  # fmt: skip
    assert shingles("ﬁne Ｗords", "word", 1).tolist() == [1633987221, 2398472478]


@pytest.mark.parametrize(
    ("kind", "k"), [("line", 5), ("char", 0), ("char", 65), ("word", 2.0), ("char", True)]
)
def test_bad_shingling_is_refused(kind: str, k: object) -> None:
    with pytest.raises(ParamsError, match="shingle"):
        shingles("text", kind, k)  # type: ignore[arg-type]


@given(
    lengths=st.lists(st.integers(0, 400), min_size=1, max_size=12),
    seed=st.integers(0, 2**32 - 1),
    spread=st.sampled_from([50, 2**11, 2**22, 2**32]),
)
def test_distinct_sorts_and_dedupes_each_document(lengths: list[int], seed: int, spread: int) -> None:
    # Lengths on both sides of the radix-sort cut-over (64), values with repeats in every digit.
    rng = np.random.default_rng(seed)
    arrays = [rng.integers(0, spread, n, dtype=np.uint64).astype(np.uint32) for n in lengths]
    got = distinct_rows(Ragged.from_arrays(arrays, np.uint32), np.arange(len(arrays)))
    assert len(got) == len(arrays)
    for part, arr in zip(got, arrays, strict=True):
        assert np.array_equal(part, np.unique(arr))


@given(
    lengths=st.lists(st.integers(0, 300), min_size=1, max_size=10),
    picks=st.lists(st.integers(0, 9), max_size=12),
    seed=st.integers(0, 2**32 - 1),
)
def test_distinct_rows_equals_distinct_of_the_rows_gathered(
    lengths: list[int], picks: list[int], seed: int
) -> None:
    rng = np.random.default_rng(seed)
    arrays = [rng.integers(0, 2**11, n, dtype=np.uint64).astype(np.uint32) for n in lengths]
    rows = np.array([p % len(arrays) for p in picks], dtype=np.int64)  # repeats and any order
    got = distinct_rows(Ragged.from_arrays(arrays, np.uint32), rows)
    assert len(got) == rows.size
    for part, r in zip(got, rows.tolist(), strict=True):
        assert np.array_equal(part, np.unique(arrays[r]))


@given(
    lengths=st.lists(st.integers(0, 300), min_size=1, max_size=10),
    cuts=st.lists(st.integers(0, 10), max_size=4),
    picks=st.lists(st.integers(0, 9), max_size=12),
    seed=st.integers(0, 2**32 - 1),
)
def test_distinct_rows_across_parts_equals_distinct_rows_of_them_joined(
    lengths: list[int], cuts: list[int], picks: list[int], seed: int
) -> None:
    """Parts as a threaded sketch keeps them (empty ones too); rows in any order, with repeats."""
    rng = np.random.default_rng(seed)
    arrays = [rng.integers(0, 2**11, n, dtype=np.uint64).astype(np.uint32) for n in lengths]
    bounds = [0, *sorted(c % (len(arrays) + 1) for c in cuts), len(arrays)]
    parts = [Ragged.from_arrays(arrays[a:b], np.uint32) for a, b in itertools.pairwise(bounds)]
    rows = np.array([p % len(arrays) for p in picks], dtype=np.int64)
    got = distinct_rows_across(parts, rows)
    want = distinct_rows(Ragged.from_arrays(arrays, np.uint32), rows)
    assert got.offsets.tolist() == want.offsets.tolist()
    assert got.values.tolist() == want.values.tolist()
    assert got.values.dtype == want.values.dtype == np.uint32


def test_distinct_rows_across_parts_refuses_rows_outside_them() -> None:
    parts = [Ragged.from_arrays([[3, 1]], np.uint32), Ragged.from_arrays([[2]], np.uint32)]
    with pytest.raises(ParamsError, match=r"rows must be 1-D indices in \[0, 2\)"):
        distinct_rows_across(parts, np.array([1, 2]))


def test_distinct_rows_refuses_rows_outside_the_batch() -> None:
    sets = Ragged.from_arrays([[3, 1], [2]], np.uint32)
    with pytest.raises(ParamsError, match=r"rows must be 1-D indices in \[0, 2\)"):
        distinct_rows(sets, np.array([0, 2]))
