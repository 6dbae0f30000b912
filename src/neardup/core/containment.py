"""How much of one text another contains: exact containment of shingle sets, both directions.

Jaccard says how alike two texts are; it cannot say that one is an excerpt of the other. The
containment of A in B, |S(A) ∩ S(B)| / |S(A)|, is near 1 when B holds nearly all of A, however
much more B says. Exact (the sets themselves, not signatures), with the collection's shingling.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from neardup.core.normalize import DEFAULT_NORMALIZATION, Normalization
from neardup.core.shingle import ShingleKind, shingle_batch


@dataclass(frozen=True)
class Containment:
    """Shingle counts of two texts and of what they share; the two containments and the Jaccard."""

    size_a: int
    size_b: int
    shared: int

    @property
    def a_in_b(self) -> float:
        """The share of A's shingles that B has too (0 when A has none)."""
        return self.shared / self.size_a if self.size_a else 0.0

    @property
    def b_in_a(self) -> float:
        """The share of B's shingles that A has too (0 when B has none)."""
        return self.shared / self.size_b if self.size_b else 0.0

    @property
    def jaccard(self) -> float:
        """|A ∩ B| / |A ∪ B| of the shingle sets (0 when both are empty)."""
        union = self.size_a + self.size_b - self.shared
        return self.shared / union if union else 0.0


def containment(
    text_a: str,
    text_b: str,
    kind: ShingleKind = "char",
    k: int = 5,
    normalization: Normalization = DEFAULT_NORMALIZATION,
) -> Containment:
    """Exact containment of each text's shingle set in the other's, shingled as ``kind``/``k``."""
    sets = shingle_batch([text_a, text_b], kind, k, normalization)
    a, b = sets[0], sets[1]
    shared = np.intersect1d(a, b, assume_unique=True).size
    return Containment(int(a.size), int(b.size), int(shared))
