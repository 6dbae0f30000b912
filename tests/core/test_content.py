"""Content hashes: equal exactly when the normalised texts are equal, whatever the batch."""

from __future__ import annotations

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
