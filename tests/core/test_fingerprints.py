"""Text fingerprints: the winnowing guarantee, batch independence, and exact overlaps."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.core.fingerprints import WINDOW, fingerprints, fingerprints_of
from neardup.core.params import Params
from neardup.core.ragged import Ragged
from neardup.core.sketch import Sketcher
from neardup.core.verify import exact_overlaps

SKETCHER = Sketcher(Params(bands=16, rows=8))
K = SKETCHER.params.k
WORDS = st.text(alphabet="abcdefghij", min_size=1, max_size=8)


def _text(words: list[str]) -> str:
    return " ".join(words)


def _prints(texts: list[str]) -> list[set[int]]:
    rows, fp = fingerprints(SKETCHER.shingles(texts, unique=False), K)
    return [set(fp[rows == i].tolist()) for i in range(len(texts))]


@settings(max_examples=60, deadline=None)
@given(st.lists(WORDS, max_size=40), st.lists(WORDS, max_size=40), st.lists(WORDS, min_size=1, max_size=80))
def test_texts_sharing_a_long_enough_run_share_a_fingerprint(
    before: list[str], after: list[str], run: list[str]
) -> None:
    shared = _text(run)
    # The guarantee: WINDOW + K shingles in common, about WINDOW + 2K - 1 characters.
    while len(shared) < WINDOW + 2 * K + 2:
        shared = f"{shared} {shared}"
    mine, theirs = _prints([f"{_text(before)} {shared} x", f"y {shared} {_text(after)}"])
    assert mine & theirs


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(WORDS, max_size=60), min_size=1, max_size=6), st.data())
def test_a_texts_fingerprints_do_not_depend_on_its_batch(batch: list[list[str]], data: st.DataObject) -> None:
    texts = [_text(t) for t in batch]
    alone = [_prints([t])[0] for t in texts]
    assert _prints(texts) == alone
    # As a sketch's chunks, any rows picked.
    rows = np.array(data.draw(st.lists(st.integers(0, len(texts) - 1), unique=True)), dtype=np.int64)
    cut = data.draw(st.integers(0, len(texts)))
    parts = (SKETCHER.shingles(texts[:cut], unique=False), SKETCHER.shingles(texts[cut:], unique=False))
    at, fp = fingerprints_of(parts, rows, K)
    for j, row in enumerate(rows.tolist()):
        assert set(fp[at == j].tolist()) == alone[row]


def test_a_text_with_shingles_has_a_fingerprint_and_an_empty_one_none() -> None:
    assert [len(p) for p in _prints(["ab", "hello", "", "   "])] == [1, 1, 0, 0]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 50), max_size=30), st.lists(st.lists(st.integers(0, 50), max_size=30), max_size=6)
)
def test_exact_overlaps_are_set_intersections(query: list[int], sets: list[list[int]]) -> None:
    q = np.unique(np.array(query, dtype=np.uint32))
    ragged = Ragged.from_arrays([np.unique(np.array(s, dtype=np.uint32)) for s in sets], np.uint32)
    expected = [len(set(query) & set(s)) for s in sets]
    assert exact_overlaps(q, ragged).tolist() == expected
