"""Containment of shingle sets against brute force: Python sets of the normalised texts' k-grams."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from neardup.core.containment import containment
from neardup.core.normalize import normalize

WORDS = st.lists(
    st.sampled_from(["storm", "power", "homes", "crews", "Valley", "roads", "42,000"]), max_size=30
)


def _grams(text: str, k: int) -> set[str]:
    """The distinct k-grams of a normalised text (a shorter text: itself, as the shingler does)."""
    norm = normalize(text)
    if len(norm) < k:
        return {norm} if norm else set()
    return {norm[i : i + k] for i in range(len(norm) - k + 1)}


@given(WORDS, WORDS, st.integers(1, 8))
def test_containment_is_the_shared_share_of_each_set(a: list[str], b: list[str], k: int) -> None:
    text_a, text_b = " ".join(a), " ".join(b)
    found = containment(text_a, text_b, "char", k)
    ga, gb = _grams(text_a, k), _grams(text_b, k)
    # Hashes could collide where strings differ; at these sizes (tens of 32-bit hashes) they do not.
    assert (found.size_a, found.size_b, found.shared) == (len(ga), len(gb), len(ga & gb))
    assert found.a_in_b == (len(ga & gb) / len(ga) if ga else 0.0)
    assert found.b_in_a == (len(ga & gb) / len(gb) if gb else 0.0)
    assert found.jaccard == (len(ga & gb) / len(ga | gb) if ga | gb else 0.0)


def test_an_excerpt_is_contained_but_not_alike() -> None:
    story = "Storms cut power to 40,000 homes. Crews expect to restore most connections by Thursday. " * 3
    lead = "Storms cut power to 40,000 homes."
    found = containment(lead, story)
    assert found.a_in_b == 1.0  # every shingle of the lead is in the story
    assert found.b_in_a < 0.5  # the story says much more
    assert found.jaccard == found.shared / (found.size_a + found.size_b - found.shared)
    words = containment(lead, story, "word", 2)
    assert words.a_in_b == 1.0
