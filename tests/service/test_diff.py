"""The pair page's alignment: passages paired in order, a moved passage shown as moved, a deleted
one as deleted, and nothing of either text lost or repeated (a law, checked with hypothesis)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from neardup.service.diff import MAX_WORDS, Alignment, align, passages
from tests.service.review_data import STORM


def _kinds(view: Alignment) -> list[str]:
    return [r.kind for r in view.rows]


def _side(view: Alignment, side: str) -> list[str]:
    """The passages of one side, in the order the rows show them."""
    return ["".join(s.text for s in getattr(r, side)) for r in view.rows if getattr(r, side) is not None]


def test_a_moved_paragraph_is_shown_as_moved_and_the_rest_aligned() -> None:
    a = "\n\n".join(STORM)
    b = "\n\n".join([STORM[0], STORM[2], STORM[3], STORM[1]])
    view = align(a, b)
    assert view.unit == "paragraph"
    assert _kinds(view).count("same") == 3
    moved = [i for i, r in enumerate(view.rows) if r.kind == "moved"]
    assert len(moved) == 2
    first, second = (view.rows[i] for i in moved)
    assert first.moved_to == moved[1]
    assert second.moved_to == moved[0]
    assert "".join(s.text for s in first.a or []) == STORM[1]
    assert view.shared_words == 1.0


def test_a_deleted_paragraph_does_not_shift_the_rest() -> None:
    a = "\n\n".join(STORM)
    b = "\n\n".join([STORM[0], STORM[2], STORM[3]])
    view = align(a, b)
    assert _kinds(view) == ["same", "deleted", "same", "same"]
    assert view.rows[1].b is None
    assert view.count("deleted") == 1


def test_an_edited_paragraph_marks_only_the_words_that_differ() -> None:
    edited = [STORM[0].replace("40,000", "42,000"), *STORM[1:]]
    view = align("\n\n".join(STORM), "\n\n".join(edited))
    assert _kinds(view) == ["changed", "same", "same", "same"]
    only_a = [s.text.strip() for s in view.rows[0].a or [] if not s.shared]
    only_b = [s.text.strip() for s in view.rows[0].b or [] if not s.shared]
    assert (only_a, only_b) == (["40,000"], ["42,000"])
    assert 0.95 < view.shared_words < 1.0


def test_texts_without_paragraphs_are_aligned_by_sentence() -> None:
    a = "One two three. Four five six. Seven eight nine."
    b = "One two three. Seven eight nine. Ten."
    assert passages(a, b)[2] == "sentence"
    assert _kinds(align(a, b)) == ["same", "deleted", "same", "inserted"]


def test_a_text_too_long_is_shown_without_comparison() -> None:
    long = "word " * (MAX_WORDS + 1)
    view = align(long, "word")
    assert not view.compared
    assert _side(view, "a") == [long]


SENTENCES = st.lists(
    st.sampled_from([*STORM, "Short one.", "Another short one!", "Storms cut power."]), max_size=8
)


@given(SENTENCES, SENTENCES)
def test_every_passage_of_each_side_is_shown_once_in_order(a: list[str], b: list[str]) -> None:
    text_a, text_b = "\n\n".join(a), "\n\n".join(b)
    view = align(text_a, text_b)
    parts_a, parts_b, _ = passages(text_a, text_b)
    shown_a, shown_b = _side(view, "a"), _side(view, "b")
    assert [p.strip() for p in shown_a] == parts_a
    assert [p.strip() for p in shown_b] == parts_b
    for i, row in enumerate(view.rows):
        if row.kind == "moved":
            assert row.moved_to is not None
            assert view.rows[row.moved_to].moved_to == i
    assert 0.0 <= view.shared_words <= 1.0
    if text_a == text_b and a:
        assert set(_kinds(view)) == {"same"}
