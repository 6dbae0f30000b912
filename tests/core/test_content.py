"""Content hashes: equal exactly when the normalised texts are equal, whatever the batch."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from neardup.core import Params, Sketcher
from neardup.core.normalize import normalize


@given(texts=st.lists(st.text(max_size=40), min_size=1, max_size=8), other=st.text(max_size=10))
def test_hash_depends_only_on_the_normalised_text(texts: list[str], other: str) -> None:
    sketcher = Sketcher(Params(bands=16, rows=8))
    alone = [sketcher.sketch([t]).content_hashes[0] for t in texts]
    # In a batch with a non-ASCII text the code points widen to uint32: hashes must not change.
    mixed = sketcher.sketch([*texts, other + "é"]).content_hashes[: len(texts)]
    assert alone == mixed
    norm = sketcher.params.normalization
    for i, a in enumerate(texts):
        for j, b in enumerate(texts):
            assert (alone[i] == alone[j]) == (normalize(a, norm) == normalize(b, norm))


def test_case_and_spacing_variants_share_a_hash_under_folding() -> None:
    sketcher = Sketcher(Params(bands=16, rows=8))
    hashes = sketcher.sketch(["Hello  World", "hello world", "hello world!"]).content_hashes
    assert hashes[0] == hashes[1] != hashes[2]
    assert len(hashes[0]) == 16


def _blake(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


# Texts that land in each of the batch's code-point widths: ASCII (uint8, hashed in place),
# Latin-1 (uint8 but two UTF-8 bytes), BMP and astral code points (uint32), and lone surrogates.
_TEXTS = st.lists(
    st.text(max_size=30)
    | st.text(alphabet="abc xyzé", max_size=30)
    | st.sampled_from(["", "plain ascii", "café", "日本語", "emoji 😀", "lone \ud800 surrogate"]),
    min_size=1,
    max_size=6,
)


@pytest.mark.parametrize(("version", "encoding"), [(1, "utf-32-le"), (2, "utf-8")])
@given(texts=_TEXTS)
def test_a_version_is_blake2b_of_the_normalised_text_in_its_encoding(
    version: int, encoding: str, texts: list[str]
) -> None:
    sketcher = Sketcher(Params(bands=16, rows=8, content_hash=version))
    norm = sketcher.params.normalization
    expected = [_blake(normalize(t, norm).encode(encoding, "surrogatepass")) for t in texts]
    assert sketcher.sketch(texts).content_hashes == expected
    # And the same in a batch of its own, whatever the other texts' widths.
    assert [sketcher.sketch([t]).content_hashes[0] for t in texts] == expected


def test_the_versions_differ_and_their_hashes_are_frozen() -> None:
    # Golden values: a stored collection's hashes must never change under it.
    one = Sketcher(Params(bands=16, rows=8, content_hash=1)).sketch(["Hello  World"]).content_hashes
    two = Sketcher(Params(bands=16, rows=8, content_hash=2)).sketch(["Hello  World"]).content_hashes
    assert [h.hex() for h in one] == ["d8fb721de80273379517f447e1f41574"]
    assert [h.hex() for h in two] == ["e9a804b2e527fd3601d2ffc0bb023cd6"]
