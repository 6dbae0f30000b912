"""StreamDeduplicator: each text's earliest earlier duplicate, equal to brute force."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.core import Params, shingles
from neardup.core.stream_dedup import StreamDeduplicator

# 64 bands of 2 rows: a pair at 0.5 or more is a candidate with probability > 0.99999.
PARAMS = Params(bands=64, rows=2)
WORDS = [f"w{i:02d}" for i in range(40)]


def brute_force(texts: list[str], threshold: float) -> list[int]:
    sets = [set(shingles(t, PARAMS.shingle, PARAMS.k, PARAMS.normalization).tolist()) for t in texts]
    out = []
    for i, s in enumerate(sets):
        match = -1
        for j in range(i):
            if s and sets[j] and len(s & sets[j]) / len(s | sets[j]) >= threshold:
                match = j
                break
        out.append(match)
    return out


@settings(max_examples=40, deadline=None)
@given(
    picks=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 6), st.integers(0, 99)), max_size=30),
    cuts=st.lists(st.integers(1, 7), min_size=1, max_size=8),
)
def test_earliest_earlier_duplicate_equals_brute_force(
    picks: list[tuple[int, int, int]], cuts: list[int]
) -> None:
    bases = [random.Random(b).choices(WORDS, k=30) for b in range(4)]
    texts = []
    for base, edits, seed in picks:
        rng, words = random.Random(seed), list(bases[base])
        for _ in range(edits):
            words[rng.randrange(len(words))] = rng.choice(WORDS)
        texts.append(" ".join(words) if edits < 6 else "")
    dedup, got, start = StreamDeduplicator(PARAMS, 0.5), [], 0
    for cut in [*cuts, len(texts)]:  # the stream arrives in batches of any size
        batch = texts[start : start + cut]
        got += dedup.feed(batch).tolist()
        start += len(batch)
        if start >= len(texts):
            break
    assert got == brute_force(texts, 0.5)
