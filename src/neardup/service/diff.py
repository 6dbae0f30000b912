"""Two texts aligned passage by passage, and word by word within a passage (standard library difflib).

Each text is split into passages (paragraphs; sentences when neither text has paragraphs). difflib
aligns the two lists of passages; within a block it replaced, passages are paired by difflib's
similarity ratio, in order. A passage left without a partner on one side but nearly equal to one
left over on the other side was moved, and is shown as moved; the rest were deleted or inserted.
Within paired passages words are compared (case-folded, whitespace ignored), as a reader would.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

# Words beyond this many per side are shown without comparison: difflib is quadratic at worst.
MAX_WORDS = 20_000
# Two passages of a replaced block are one passage edited when difflib's ratio of their words is
# at least this; a passage only on one side is the other side's moved one at MOVED_RATIO.
PAIR_RATIO, MOVED_RATIO = 0.5, 0.8
# Passage comparisons tried to pair a replaced block, or to find moved passages: beyond this many,
# the passages are shown as deleted and inserted (each comparison is itself up to quadratic).
MAX_COMPARISONS = 2_500
_WORD = re.compile(r"\S+\s*")
_PARAGRAPHS = re.compile(r"\n\s*\n")
_LINES = re.compile(r"\n")
_SENTENCES = re.compile(r"(?<=[.!?])[\"'”’)\]]*\s+")


@dataclass(frozen=True)
class Segment:
    """A run of text and whether the other side's passage has it too."""

    text: str
    shared: bool


@dataclass
class Row:
    """One row of the alignment: a passage of A, of B, or of both.

    ``kind``: "same" (equal words), "changed" (edited), "deleted" (only in A), "inserted" (only in
    B), or "moved" (the same passage at another place: ``moved_to`` is the row of its other side).
    """

    kind: str
    a: list[Segment] | None
    b: list[Segment] | None
    moved_to: int | None = None


@dataclass
class Alignment:
    """The rows, the passage unit, and the share of words (of both texts) in shared runs."""

    rows: list[Row] = field(default_factory=list)
    unit: str = "paragraph"
    shared_words: float = 0.0
    compared: bool = True

    def count(self, kind: str) -> int:
        """Rows of ``kind`` (a moved passage counts once, on its A side)."""
        return sum(1 for r in self.rows if r.kind == kind and (kind != "moved" or r.a is not None))


def _split(text: str, pattern: re.Pattern[str]) -> list[str]:
    return [p.strip() for p in pattern.split(text) if p.strip()]


def passages(text_a: str, text_b: str) -> tuple[list[str], list[str], str]:
    """Both texts split the same way: paragraphs (blank lines, else lines) when either text has
    several, else sentences; and the unit's name."""
    for pattern, unit in ((_PARAGRAPHS, "paragraph"), (_LINES, "line")):
        a, b = _split(text_a, pattern), _split(text_b, pattern)
        if max(len(a), len(b)) > 2:
            return a, b, unit
    return _split(text_a, _SENTENCES), _split(text_b, _SENTENCES), "sentence"


def _words(text: str) -> list[str]:
    return _WORD.findall(text)


def _keys(words: list[str]) -> list[str]:
    return [w.strip().casefold() for w in words]


def _word_diff(a: str, b: str) -> tuple[list[Segment], list[Segment], int]:
    """Both passages in shared and own runs of words, and the words (of both) in shared runs."""
    words_a, words_b = _words(a), _words(b)
    matcher = difflib.SequenceMatcher(None, _keys(words_a), _keys(words_b), autojunk=False)
    left: list[Segment] = []
    right: list[Segment] = []
    shared = 0
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        same = op == "equal"
        shared += (i2 - i1) + (j2 - j1) if same else 0
        _append(left, "".join(words_a[i1:i2]), same)
        _append(right, "".join(words_b[j1:j2]), same)
    return left, right, shared


def _append(segments: list[Segment], text: str, shared: bool) -> None:
    if not text:
        return
    if segments and segments[-1].shared == shared:
        segments[-1] = Segment(segments[-1].text + text, shared)
    else:
        segments.append(Segment(text, shared))


def _ratio(a: list[str], b: list[str]) -> float:
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return matcher.ratio() if matcher.real_quick_ratio() >= PAIR_RATIO else 0.0


def _pair_block(keys_a: list[list[str]], keys_b: list[list[str]]) -> list[tuple[int | None, int | None]]:
    """Passages of a replaced block paired in order where alike enough; the rest alone."""
    if len(keys_a) * len(keys_b) > MAX_COMPARISONS:
        return [(i, None) for i in range(len(keys_a))] + [(None, j) for j in range(len(keys_b))]
    out: list[tuple[int | None, int | None]] = []
    next_b = 0
    for i, key in enumerate(keys_a):
        scores = [(_ratio(key, keys_b[j]), j) for j in range(next_b, len(keys_b))]
        best = max(scores, default=(0.0, -1))
        if best[0] < PAIR_RATIO:
            out.append((i, None))
            continue
        out += [(None, j) for j in range(next_b, best[1])]
        out.append((i, best[1]))
        next_b = best[1] + 1
    return out + [(None, j) for j in range(next_b, len(keys_b))]


def align(text_a: str, text_b: str) -> Alignment:
    """The two texts aligned passage by passage, with the words that differ marked."""
    if len(_words(text_a)) > MAX_WORDS or len(_words(text_b)) > MAX_WORDS:
        return Alignment([Row("changed", [Segment(text_a, False)], [Segment(text_b, False)])], compared=False)
    parts_a, parts_b, unit = passages(text_a, text_b)
    keys_a = [_keys(_words(p)) for p in parts_a]
    keys_b = [_keys(_words(p)) for p in parts_b]
    matcher = difflib.SequenceMatcher(
        None, [" ".join(k) for k in keys_a], [" ".join(k) for k in keys_b], autojunk=False
    )
    pairs: list[tuple[int | None, int | None]] = []
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            pairs += zip(range(i1, i2), range(j1, j2), strict=True)
        else:
            block = _pair_block(keys_a[i1:i2], keys_b[j1:j2])
            pairs += [(None if i is None else i1 + i, None if j is None else j1 + j) for i, j in block]
    rows: list[Row] = []
    shared = 0
    for i, j in pairs:
        if i is not None and j is not None:
            left, right, both = _word_diff(parts_a[i], parts_b[j])
            rows.append(Row("same" if keys_a[i] == keys_b[j] else "changed", left, right))
            shared += both
        elif i is not None:
            rows.append(Row("deleted", [Segment(parts_a[i], False)], None))
        else:
            rows.append(Row("inserted", None, [Segment(parts_b[j or 0], False)]))
    shared += _find_moves(rows, keys_a, keys_b, pairs)
    total = sum(len(k) for k in keys_a) + sum(len(k) for k in keys_b)
    return Alignment(rows, unit, shared / total if total else 0.0)


def _find_moves(
    rows: list[Row],
    keys_a: list[list[str]],
    keys_b: list[list[str]],
    pairs: list[tuple[int | None, int | None]],
) -> int:
    """Mark each deleted passage nearly equal to an inserted one as moved (most alike first, one
    partner each), with the words they share; returns those shared words."""
    gone = [(r, pairs[r][0]) for r, row in enumerate(rows) if row.kind == "deleted"]
    new = [(r, pairs[r][1]) for r, row in enumerate(rows) if row.kind == "inserted"]
    if not gone or not new or len(gone) * len(new) > MAX_COMPARISONS:
        return 0
    scores = sorted(
        ((_ratio(keys_a[i or 0], keys_b[j or 0]), ra, rb) for ra, i in gone for rb, j in new),
        reverse=True,
    )
    used: set[int] = set()
    shared = 0
    for score, ra, rb in scores:
        if score < MOVED_RATIO:
            break
        if ra in used or rb in used:
            continue
        used |= {ra, rb}
        text_a = "".join(s.text for s in rows[ra].a or [])
        text_b = "".join(s.text for s in rows[rb].b or [])
        left, right, both = _word_diff(text_a, text_b)
        rows[ra] = Row("moved", left, None, rb)
        rows[rb] = Row("moved", None, right, ra)
        shared += both
    return shared
