"""Exact ground truth of a corpus: every pair of documents with 5-character-shingle Jaccard >= 0.5.

    python bench/exact_truth.py CORPUS OUT.tsv.gz [--floor 0.5] [--check 50]

CORPUS is JSONL(.gz) of {id, text}. The truth is defined as ``../shared/data/README.md`` defines
Debian's: the text normalised as ``" ".join(text.lower().split())``, its shingles every
5-character substring of that (a non-empty text shorter than 5 characters is one shingle, an empty
one has none and pairs with nothing), J = |A ∩ B| / |A ∪ B| on the shingle strings themselves.
Nothing is hashed: each character is numbered by rank among the corpus's characters and a shingle
is the exact integer of its ranks, so two shingles get one number only if they are the same
string. The join is a prefix filter (a pair reaching the floor shares a token among the rarest
|A| - ceil(f |A|) + 1 of each set, Chaudhuri et al. 2006) whose candidates are all verified by an
exact merge of the two sets (``core.verify``), so the result is every pair, not a sample.
Documents with the same normalised text pair with J = 1. ``--check N`` compares the pairs of N
documents drawn at random with brute force over Python sets of shingle strings, and stops at the
first difference.

Writes the columns of the Debian truth (``id_a id_b jaccard intersection union``, a header line).
"""

from __future__ import annotations

import gzip
import math
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _options as options
from _common import K, read_jsonl, truth_normalize, truth_shingles
from neardup.core.ragged import Ragged
from neardup.core.verify import exact_jaccard

if TYPE_CHECKING:
    from scipy.sparse import csr_array

# Candidate pairs (at most) made and verified at a time: their arrays stay within a few hundred MB.
CANDIDATE_BLOCK = 10_000_000


def shingle_sets(texts: Sequence[str], k: int = K) -> Ragged:
    """Each normalised text's distinct shingles as sorted exact integer ids (no hashing)."""
    alphabet = sorted(set().union(*map(set, texts))) if texts else []
    bits = max(1, math.ceil(math.log2(len(alphabet) + 1)))
    if bits * k > 63:
        raise SystemExit(f"{len(alphabet)} distinct characters: shingles do not fit 63 bits")
    rank = {c: i + 1 for i, c in enumerate(alphabet)}  # 0 pads a text shorter than k
    codes: list[npt.NDArray[np.int64]] = []
    for text in texts:
        r = np.fromiter((rank[c] for c in text), dtype=np.int64, count=len(text))
        if r.size < k:
            r = np.concatenate([r, np.zeros(k - r.size, np.int64)]) if r.size else r[:0]
            windows = r.reshape(1, k) if r.size else np.empty((0, k), np.int64)
        else:
            windows = np.lib.stride_tricks.sliding_window_view(r, k)
        code = np.zeros(windows.shape[0], np.int64)
        for column in range(k):
            code = (code << bits) | windows[:, column]
        codes.append(np.unique(code))
    flat = np.concatenate(codes) if codes else np.empty(0, np.int64)
    vocabulary, ids = np.unique(flat, return_inverse=True)
    del vocabulary
    offsets = np.zeros(len(texts) + 1, np.int64)
    np.cumsum([c.size for c in codes], out=offsets[1:])
    # Sorted within each set: the order of the codes is the order of the ids.
    return Ragged(ids.astype(np.uint32).reshape(-1), offsets)


def _prefixes(sets: Ragged, floor: float) -> tuple[csr_array, npt.NDArray[np.int64]]:
    """Sets x tokens, a 1 for each token of a set's prefix: its |A| - ceil(f |A|) + 1 rarest tokens
    (ties by token), and the global rank of each set's last prefix token. Two sets with J >= f
    share a token of their prefixes (Chaudhuri, Ganti and Kaushik 2006), so the prefixes' product
    holds every such pair."""
    from scipy.sparse import csr_array

    sizes = sets.lengths()
    owner = np.repeat(np.arange(len(sets), dtype=np.int64), sizes)
    tokens = sets.values.astype(np.int64)
    frequency = np.bincount(tokens)
    rank = np.empty(frequency.size, np.int64)
    rank[np.lexsort((np.arange(frequency.size), frequency))] = np.arange(frequency.size)
    order = np.lexsort((rank[tokens], owner))  # each set's tokens, rarest first
    position = np.arange(tokens.size) - np.repeat(sets.offsets[:-1], sizes)
    prefix = np.where(sizes > 0, sizes - np.ceil(floor * sizes - 1e-9).astype(np.int64) + 1, 0)
    keep = position < np.repeat(prefix, sizes)
    kept_owner, kept_token = owner[order][keep], tokens[order][keep]
    last = np.full(len(sets), -1, np.int64)
    np.maximum.at(last, kept_owner, rank[kept_token])
    data = np.ones(kept_token.size, dtype=np.int32)
    matrix = csr_array((data, (kept_owner, kept_token)), shape=(len(sets), int(frequency.size)))
    return matrix, last


def similar_sets(
    sets: Ragged, floor: float
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(a, b, |A ∩ B|) for every pair of sets a < b with exact Jaccard >= floor: the candidates of
    the prefixes' product, a block of sets at a time, each verified by an exact merge.

    Of a candidate pair sharing c prefix tokens, take A the one whose prefix ends at the rarer
    token: every token of B as rare as that lies in B's prefix, so A's prefix meets B only in
    those c, and |A ∩ B| <= c + |A| - prefix(A). A pair that cannot reach the overlap J >= f
    needs, ceil(f (|A| + |B|) / (1 + f)), is dropped before the merge (exact: it cannot pair)."""
    sizes = sets.lengths()
    prefixes, last = _prefixes(sets, floor)
    rest = sizes - np.diff(prefixes.indptr)  # tokens past each prefix
    transposed = prefixes.T.tocsr()
    # A row's product has at most the summed lengths of its tokens' postings: blocks cut on that.
    posting = np.diff(transposed.indptr)
    bound = np.zeros(len(sets), np.int64)
    has = np.diff(prefixes.indptr) > 0
    bound[has] = np.add.reduceat(posting[prefixes.indices], prefixes.indptr[:-1][has])
    cuts = np.searchsorted(np.cumsum(bound), np.arange(CANDIDATE_BLOCK, bound.sum() + 1, CANDIDATE_BLOCK))
    found_a, found_b = [], []
    start = 0
    for stop in [*np.unique(np.clip(cuts + 1, 1, len(sets))).tolist(), len(sets)]:
        if stop <= start:
            continue
        product = (prefixes[start:stop] @ transposed).tocoo()
        a = np.asarray(product.row, dtype=np.int64) + start
        b = np.asarray(product.col, dtype=np.int64)
        shared = np.asarray(product.data, dtype=np.int64)
        small, large = np.minimum(sizes[a], sizes[b]), np.maximum(sizes[a], sizes[b])
        first = np.where(last[a] <= last[b], a, b)
        needed = np.ceil(floor * (sizes[a] + sizes[b]) / (1.0 + floor) - 1e-9)
        keep = (a < b) & (small >= floor * large - 1e-9) & (shared + rest[first] >= needed)
        a, b = a[keep], b[keep]
        jaccard = exact_jaccard(sets, a, b)
        ok = jaccard >= floor
        found_a.append(a[ok])
        found_b.append(b[ok])
        start = stop
    a = np.concatenate(found_a) if found_a else np.empty(0, np.int64)
    b = np.concatenate(found_b) if found_b else np.empty(0, np.int64)
    jaccard = exact_jaccard(sets, a, b)
    common = np.rint(jaccard * (sizes[a] + sizes[b]) / (1.0 + jaccard)).astype(np.int64)
    return a, b, common


def truth_pairs(
    ids: Sequence[str], texts: Sequence[str], floor: float = 0.5
) -> list[tuple[str, str, int, int]]:
    """(id_a, id_b, |A ∩ B|, |A ∪ B|) of every document pair with exact Jaccard >= floor."""
    content: dict[str, int] = {}
    of_doc = [content.setdefault(truth_normalize(t), len(content)) for t in texts]
    distinct = list(content)
    sets = shingle_sets(distinct)
    sizes = sets.lengths()
    a, b, common = similar_sets(sets, floor)
    holders: list[list[int]] = [[] for _ in distinct]
    for doc, c in enumerate(of_doc):
        holders[c].append(doc)
    out: list[tuple[str, str, int, int]] = []
    for c, docs in enumerate(holders):  # documents of one text: J = 1 (an empty text pairs with none)
        if sizes[c]:
            out.extend(
                (ids[x], ids[y], int(sizes[c]), int(sizes[c]))
                for n, x in enumerate(docs)
                for y in docs[n + 1 :]
            )
    for x, y, c in zip(a.tolist(), b.tolist(), common.tolist(), strict=True):
        union = int(sizes[x] + sizes[y] - c)
        out.extend((ids[p], ids[q], c, union) for p in holders[x] for q in holders[y])
    return out


def check(
    ids: Sequence[str], texts: Sequence[str], pairs: Sequence[tuple[str, str, int, int]], n: int, floor: float
) -> None:
    """Brute force over shingle strings for ``n`` documents drawn at random; SystemExit on a difference."""
    found: dict[tuple[str, str], tuple[int, int]] = {}
    for x, y, c, u in pairs:
        found[x, y] = found[y, x] = (c, u)
    sets = [truth_shingles(t) for t in texts]
    for d in random.Random(0).sample(range(len(ids)), min(n, len(ids))):
        for e in range(len(ids)):
            if e == d or not sets[d] or not sets[e]:
                continue
            c = len(sets[d] & sets[e])
            u = len(sets[d]) + len(sets[e]) - c
            expected = (c, u) if c / u >= floor else None
            if found.get((ids[d], ids[e])) != expected:
                raise SystemExit(
                    f"{ids[d]} and {ids[e]}: brute force {expected}, join {found.get((ids[d], ids[e]))}"
                )
    print(f"checked {n} documents against brute force over all {len(ids):,}: equal", file=sys.stderr)


def write(path: Path, pairs: Sequence[tuple[str, str, int, int]]) -> None:
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("id_a\tid_b\tjaccard\tintersection\tunion\n")
        for x, y, c, u in pairs:
            f.write(f"{x}\t{y}\t{c / u:.6f}\t{c}\t{u}\n")


def main(argv: list[str] | None = None) -> int:
    parser = options.parser(__doc__)
    parser.add_argument("corpus", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--floor", type=float, default=0.5)
    parser.add_argument("--check", type=int, default=0, help="documents checked against brute force")
    args = parser.parse_args(argv)
    records = list(read_jsonl(args.corpus))
    ids, texts = [r[0] for r in records], [r[1] for r in records]
    t0 = time.perf_counter()
    pairs = truth_pairs(ids, texts, args.floor)
    print(
        f"{len(pairs):,} pairs with J >= {args.floor:g} among {len(ids):,} documents "
        f"in {time.perf_counter() - t0:.1f} s",
        file=sys.stderr,
    )
    if args.check:
        check(ids, texts, pairs, args.check, args.floor)
    write(args.out, pairs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
