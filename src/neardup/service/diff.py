"""Two texts side by side: the passages they share, and what differs (standard library difflib).

Texts are compared word by word (case-folded, whitespace ignored), as a reader would; each side
is split into segments that are either shared with the other side or only its own.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

# Words beyond this many per side are shown without comparison: difflib is quadratic at worst.
MAX_WORDS = 20_000
_WORD = re.compile(r"\S+\s*")


@dataclass(frozen=True)
class Segment:
    """A run of text and whether the other side has it too."""

    text: str
    shared: bool


@dataclass(frozen=True)
class SideBySide:
    """Both texts in segments, and the share of words in shared passages (of both sides)."""

    a: list[Segment]
    b: list[Segment]
    shared_words: float
    compared: bool


def _merge(segments: list[Segment]) -> list[Segment]:
    out: list[Segment] = []
    for s in segments:
        if out and out[-1].shared == s.shared:
            out[-1] = Segment(out[-1].text + s.text, s.shared)
        elif s.text:
            out.append(s)
    return out


def side_by_side(text_a: str, text_b: str) -> SideBySide:
    """The shared and differing passages of two texts, word by word."""
    lead_a, lead_b = (
        text_a[: len(text_a) - len(text_a.lstrip())],
        text_b[: len(text_b) - len(text_b.lstrip())],
    )
    words_a, words_b = _WORD.findall(text_a), _WORD.findall(text_b)
    if len(words_a) > MAX_WORDS or len(words_b) > MAX_WORDS:
        return SideBySide([Segment(text_a, False)], [Segment(text_b, False)], 0.0, False)
    keys_a = [w.strip().casefold() for w in words_a]
    keys_b = [w.strip().casefold() for w in words_b]
    matcher = difflib.SequenceMatcher(None, keys_a, keys_b, autojunk=False)
    a: list[Segment] = [Segment(lead_a, False)]
    b: list[Segment] = [Segment(lead_b, False)]
    shared = 0
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        same = op == "equal"
        shared += (i2 - i1) + (j2 - j1) if same else 0
        a.append(Segment("".join(words_a[i1:i2]), same))
        b.append(Segment("".join(words_b[j1:j2]), same))
    total = len(words_a) + len(words_b)
    return SideBySide(_merge(a), _merge(b), shared / total if total else 0.0, True)
