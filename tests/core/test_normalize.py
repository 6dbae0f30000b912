import unicodedata

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from neardup.core.normalize import (
    CASE_MODES,
    UNICODE_FORMS,
    WHITESPACE,
    Normalization,
    encode_batch,
    normalize,
    split_words,
)
from neardup.errors import InputError, NeardupError, ParamsError

# Text rich in the characters that normalisation has to get right: every whitespace code point,
# compatibility forms (ligatures, full-width, superscripts), case pairs with special folding.
_SPECIAL = "".join(map(chr, WHITESPACE)) + "ﬁﬀＡＢｃ²½ßẞİΣσςǅÅÅ\u0301\u0000"
texts = st.text(alphabet=st.sampled_from(_SPECIAL) | st.characters(), max_size=60)


def test_whitespace_set_is_pythons_str_split_set() -> None:
    # The frozen set equals this Python's notion; if a future Python moves it, this flags the change.
    assert set(WHITESPACE) == {c for c in range(0x110000) if chr(c).isspace()}


@given(texts)
def test_default_normalisation_is_nfkc_casefold_and_collapse(text: str) -> None:
    expected = " ".join(unicodedata.normalize("NFKC", text).casefold().split())
    assert normalize(text) == expected


@given(texts)
def test_ground_truth_normalisation_is_reproducible(text: str) -> None:
    # The configuration of ../shared/data's ground truth: " ".join(text.lower().split()).
    norm = Normalization(unicode_form="none", case="lower", collapse_whitespace=True)
    assert normalize(text, norm) == " ".join(text.lower().split())


@given(texts)
def test_each_step_can_be_switched_off(text: str) -> None:
    assert normalize(text, Normalization("none", "keep", False)) == text
    assert normalize(text, Normalization("NFC", "keep", False)) == unicodedata.normalize("NFC", text)
    assert normalize(text, Normalization("none", "keep", True)) == " ".join(text.split())


# ASCII alone takes the batch path that folds case on the bytes, with no per-text normalisation.
ascii_texts = st.text(alphabet=st.characters(max_codepoint=127), max_size=60)
normalizations = st.builds(
    Normalization, st.sampled_from(UNICODE_FORMS), st.sampled_from(CASE_MODES), st.booleans()
)


@given(st.lists(texts, max_size=8) | st.lists(ascii_texts, max_size=8), normalizations)
def test_batch_encoding_equals_normalise_one_by_one(batch: list[str], norm: Normalization) -> None:
    encoded = encode_batch(batch, norm)
    assert len(encoded) == len(batch)
    for i, text in enumerate(batch):
        assert "".join(map(chr, encoded[i].tolist())) == normalize(text, norm)


def test_ascii_batches_stay_bytes_and_others_widen() -> None:
    assert encode_batch(["plain  ascii", "text"]).values.dtype == np.uint8
    wide = encode_batch(["plain  ascii", "tëxt ✓"])
    assert wide.values.dtype == np.uint32
    assert "".join(map(chr, wide[0].tolist())) == "plain ascii"


def test_lone_surrogates_are_code_points_not_errors() -> None:
    broken = b"caf\xe9 au lait".decode("utf-8", "surrogateescape")
    encoded = encode_batch([broken], Normalization("none", "keep", True))
    assert encoded[0].tolist() == [ord(c) for c in broken]


def test_empty_and_blank_texts_become_empty() -> None:
    encoded = encode_batch(["", " \t\n\u3000 ", "x"])
    assert encoded.lengths().tolist() == [0, 0, 1]


def test_split_words_uses_the_frozen_set() -> None:
    assert split_words("a\u2028b\x1cc  d\u00a0") == ["a", "b", "c", "d"]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"unicode_form": "NFD"}, "unicode_form"),
        ({"case": "upper"}, "case"),
        ({"collapse_whitespace": 1}, "collapse"),
    ],
)
def test_bad_normalisation_is_refused_by_name(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(ParamsError, match=field) as info:
        Normalization(**kwargs)  # type: ignore[arg-type]
    assert isinstance(info.value, NeardupError)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("norm", [Normalization(), Normalization("none", "keep", False)])
@pytest.mark.parametrize("bad", [None, b"bytes", 3])
def test_a_text_that_is_not_str_is_refused_by_position(norm: Normalization, bad: object) -> None:
    with pytest.raises(InputError, match=f"text 1: expected str, got {type(bad).__name__}"):
        encode_batch(["fine", bad, "fine"], norm)  # type: ignore[list-item]
