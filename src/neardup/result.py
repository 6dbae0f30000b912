"""What an ``add`` reports."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AddResult:
    """What one ``add`` did: documents added, replaced, unchanged, and new verified pairs."""

    added: int = 0
    replaced: int = 0
    unchanged: int = 0
    new_pairs: int = 0
    empty: int = 0
    """Of the documents added or replaced, those whose text has no shingle (empty or only
    whitespace after normalisation): stored, and never anyone's duplicate."""

    def __add__(self, other: AddResult) -> AddResult:
        return AddResult(
            self.added + other.added,
            self.replaced + other.replaced,
            self.unchanged + other.unchanged,
            self.new_pairs + other.new_pairs,
            self.empty + other.empty,
        )
