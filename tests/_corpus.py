"""Small corpora with planted near-duplicates, and brute-force truth, for database tests."""

from __future__ import annotations

import itertools
import random

from neardup.core import Params, shingles

WORDS = [f"w{i:03d}" for i in range(400)]


def planted_corpus(n_sources: int, copies: int, seed: int, edit: float = 0.08) -> list[tuple[str, str]]:
    """``n_sources`` random texts, each with ``copies`` near-copies made by replacing words."""
    rng = random.Random(seed)
    docs: list[tuple[str, str]] = []
    for s in range(n_sources):
        words = [rng.choice(WORDS) for _ in range(rng.randint(30, 80))]
        docs.append((f"s{s:03d}", " ".join(words)))
        for c in range(copies):
            edited = [rng.choice(WORDS) if rng.random() < edit * (c + 1) else w for w in words]
            docs.append((f"s{s:03d}.c{c}", " ".join(edited)))
    rng.shuffle(docs)
    return docs


def brute_force_pairs(
    docs: list[tuple[str, str]], params: Params, threshold: float
) -> dict[tuple[str, str], float]:
    """Every pair with exact Jaccard (on neardup's shingle sets) at or above the threshold."""
    sets = {
        doc_id: set(shingles(text, params.shingle, params.k, params.normalization).tolist())
        for doc_id, text in docs
    }
    out: dict[tuple[str, str], float] = {}
    for (a, sa), (b, sb) in itertools.combinations(sorted(sets.items()), 2):
        if not sa or not sb:
            continue
        j = len(sa & sb) / len(sa | sb)
        if j >= threshold:
            out[(a, b)] = j
    return out


def components(pairs: list[tuple[str, str]] | set[tuple[str, str]]) -> list[list[str]]:
    """Connected components (two or more ids, each sorted), sorted, by a plain union-find."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in pairs:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    groups: dict[str, list[str]] = {}
    for x in list(parent):
        groups.setdefault(find(x), []).append(x)
    return sorted(sorted(g) for g in groups.values() if len(g) > 1)
