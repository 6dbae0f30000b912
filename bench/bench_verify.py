"""Exact verification of candidate pairs, two ways, on the same pairs in the same run.

    python bench/bench_verify.py [--data ../shared/data] [--synthetic /tmp/synth1m.jsonl]
                                 [--pairs 20000] [--repeats 5] [--out docs/benchmarks/verify.md]

"sorted": each text's shingles sorted and deduplicated once, then merged pair by pair
(``exact_jaccard``; what verification did everywhere before, and still does in an ingest whose
candidates are more than ``UNSORTED_PAIRS_PER_TEXT`` per text). "as shingled": the shingles as the
kernel makes them, one hash table a pair (``exact_jaccard_unsorted``; a query, a check, stream
dedup, and an ingest with few candidates per text). Both include shingling (normalisation too), the
work they share, since only the sort is saved; both must give the same Jaccard, float for float.
Workloads, from one pair per text to many: edited copies of synthetic texts (one pair each), groups
of a synthetic text and 8 or 32 edited copies (every pair in a group), a matching of Debian
ground-truth pairs (each text in one pair), and every ground-truth pair among a
sample of Debian documents, two sizes (the skewed package families: many pairs per text). Each is timed
``--repeats`` times, alternating the ways; medians are reported. Then ``StreamDeduplicator`` (what
``neardup dedup`` runs) over the synthetic texts, in batches of 10,000: texts a second.
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import numpy as np

from _common import (
    DATA_DIR,
    DEBIAN,
    DEBIAN_TRUTH_NAME,
    Report,
    alternated,
    corpus_file,
    edited,
    header,
    read_jsonl,
    read_truth,
    seconds_of,
)
from _options import add_out, add_rounds, parser
from neardup.core import Params, Sketcher
from neardup.core.stream_dedup import StreamDeduplicator
from neardup.core.verify import exact_jaccard, exact_jaccard_unsorted
from neardup.verification import UNSORTED_PAIRS_PER_TEXT

Pairs = tuple[list[str], np.ndarray, np.ndarray]  # texts, left, right


def sorted_way(sketcher: Sketcher, work: Pairs) -> np.ndarray:
    texts, left, right = work
    return exact_jaccard(sketcher.shingles(texts), left, right)


def as_shingled(sketcher: Sketcher, work: Pairs) -> np.ndarray:
    texts, left, right = work
    sets = sketcher.shingles(texts, unique=False)
    return exact_jaccard_unsorted(sets, sets, left, right)


def timed_alternately(
    ways: dict[str, Callable[[], np.ndarray]], repeats: int
) -> tuple[dict[str, list[float]], dict[str, np.ndarray]]:
    """Seconds of each way per repeat (ways alternated in each round), and each way's result."""
    results = {name: way() for name, way in ways.items()}  # warm-up: kernels compiled or loaded
    return alternated({name: seconds_of(way) for name, way in ways.items()}, repeats), results


def synthetic_copies(texts: list[str], count: int) -> Pairs:
    """Each of ``count`` texts with an edited copy of itself (about 3% of words replaced)."""
    rng = random.Random(1)
    sources = texts[:count]
    both = sources + [edited(t, rng) for t in sources]
    return both, np.arange(count, dtype=np.int64), np.arange(count, 2 * count, dtype=np.int64)


def synthetic_groups(texts: list[str], copies: int, count: int) -> Pairs:
    """Texts with ``copies`` edited copies each, every pair within a group (``copies / 2`` pairs
    per text), about ``count`` pairs in all."""
    rng = random.Random(1)
    group_pairs = copies * (copies + 1) // 2
    members: list[str] = []
    left: list[int] = []
    right: list[int] = []
    for source in texts[: max(1, count // group_pairs)]:
        base = len(members)
        members += [source, *(edited(source, rng) for _ in range(copies))]
        for i in range(copies + 1):
            for j in range(i + 1, copies + 1):
                left.append(base + i)
                right.append(base + j)
    return members, np.array(left, dtype=np.int64), np.array(right, dtype=np.int64)


def debian_matching(
    ids: list[str], texts: list[str], truth: Sequence[tuple[str, str, float]], count: int
) -> Pairs:
    """Up to ``count`` ground-truth pairs (J >= 0.8) no two of which share a text."""
    index = {doc_id: i for i, doc_id in enumerate(ids)}
    used: set[int] = set()
    pairs = []
    for a, b, j in truth:
        ia, ib = index[a], index[b]
        if j >= 0.8 and ia not in used and ib not in used:
            used.update((ia, ib))
            pairs.append((ia, ib))
            if len(pairs) == count:
                break
    return _local(texts, pairs)


def debian_dense(
    ids: list[str], texts: list[str], truth: Sequence[tuple[str, str, float]], count: int
) -> Pairs:
    """Every ground-truth pair (J >= 0.5) among a random sample of documents, about ``count``."""
    rng = random.Random(2)
    share = min(1.0, (count / max(1, len(truth))) ** 0.5)  # pairs fall with the square of the share
    index = {doc_id: i for i, doc_id in enumerate(ids)}
    chosen = {i for i in range(len(ids)) if rng.random() < share}
    pairs = [(index[a], index[b]) for a, b, _ in truth if index[a] in chosen and index[b] in chosen]
    return _local(texts, pairs)


def _local(texts: list[str], pairs: list[tuple[int, int]]) -> Pairs:
    """The texts in the pairs, once each, and the pairs as indices into them."""
    used = sorted({i for pair in pairs for i in pair})
    where = {doc: k for k, doc in enumerate(used)}
    left = np.array([where[a] for a, _ in pairs], dtype=np.int64)
    right = np.array([where[b] for _, b in pairs], dtype=np.int64)
    return [texts[i] for i in used], left, right


def stream_rate(texts: list[str], threshold: float, params: Params) -> tuple[float, int]:
    """Texts a second through ``StreamDeduplicator`` in batches of 10,000, and duplicates found."""
    StreamDeduplicator(params, threshold).feed(texts[:2_000])  # warm-up
    dedup = StreamDeduplicator(params, threshold)
    t0 = time.perf_counter()
    found = sum(int((dedup.feed(texts[k : k + 10_000]) >= 0).sum()) for k in range(0, len(texts), 10_000))
    return len(texts) / (time.perf_counter() - t0), found


def main(argv: list[str] | None = None) -> int:
    ap = parser(__doc__)
    ap.add_argument("--data", type=Path, default=DATA_DIR, help="the shared data folder")
    ap.add_argument(
        "--synthetic", type=Path, help="make_corpus.py JSONL: used if present, else written there"
    )
    ap.add_argument("--pairs", type=int, default=20_000, help="pairs in each workload (about)")
    ap.add_argument("--stream", type=int, default=200_000, help="synthetic texts through stream dedup")
    add_rounds(ap, 5, flag="--repeats")
    add_out(ap, "verify.md")
    args = ap.parse_args(argv)
    n = max(args.pairs, args.stream)
    with corpus_file(args.synthetic, n) as (path, made):
        synthetic = [t for _, t in read_jsonl(path, n)]
    debian = list(read_jsonl(args.data / DEBIAN.name))
    ids, texts = [i for i, _ in debian], [t for _, t in debian]
    truth = read_truth(args.data / DEBIAN_TRUTH_NAME)
    workloads: dict[str, tuple[Pairs, Sketcher]] = {
        "synthetic: texts and edited copies": (
            synthetic_copies(synthetic, args.pairs),
            Sketcher(Params(bands=16, rows=8)),
        ),
        "synthetic: groups of a text and 8 edited copies, every pair": (
            synthetic_groups(synthetic, 8, args.pairs),
            Sketcher(Params(bands=16, rows=8)),
        ),
        "synthetic: groups of a text and 32 edited copies, every pair": (
            synthetic_groups(synthetic, 32, args.pairs),
            Sketcher(Params(bands=16, rows=8)),
        ),
        # The ground truth's normalisation (lowercase, whitespace collapsed), as bench_speed's index.
        "Debian: ground-truth pairs, no text in two": (
            debian_matching(ids, texts, truth, args.pairs),
            Sketcher(Params(bands=16, rows=8, unicode_form="none", case="lower")),
        ),
        "Debian: every ground-truth pair among sampled documents": (
            debian_dense(ids, texts, truth, args.pairs),
            Sketcher(Params(bands=16, rows=8, unicode_form="none", case="lower")),
        ),
        "Debian: the same, from a larger sample": (
            debian_dense(ids, texts, truth, 10 * args.pairs),
            Sketcher(Params(bands=16, rows=8, unicode_form="none", case="lower")),
        ),
    }
    report = Report()
    report.say(
        *header(
            "Exact verification: sorted sets against shingles as shingled", None, False, [f"Corpus: {made}"]
        )
    )
    rows = []
    for name, (work, sketcher) in workloads.items():
        print(f"{name} ...", file=sys.stderr)
        seconds, results = timed_alternately(
            {
                "sorted": partial(sorted_way, sketcher, work),
                "as shingled": partial(as_shingled, sketcher, work),
            },
            args.repeats,
        )
        if not np.array_equal(results["sorted"], results["as shingled"]):
            raise SystemExit(f"{name}: the two ways disagree")
        texts_n, pairs_n = len(work[0]), int(work[1].size)
        per_pair = {way: 1e6 * statistics.median(s) / pairs_n for way, s in seconds.items()}
        rows.append(
            [
                name,
                f"{pairs_n:,}",
                f"{texts_n:,}",
                f"{pairs_n / texts_n:.2f}",
                f"{per_pair['sorted']:.1f}",
                f"{per_pair['as shingled']:.1f}",
                f"{per_pair['as shingled'] / per_pair['sorted']:.2f}x",
            ]
        )
    report.say(
        f"Median of {args.repeats} alternated runs per workload, shingling included; equal Jaccard "
        f"in every pair. An ingest verifies as shingled up to {UNSORTED_PAIRS_PER_TEXT} pairs per text.",
        "",
    )
    report.table(
        [
            "workload",
            "pairs",
            "texts",
            "pairs per text",
            "sorted, us a pair",
            "as shingled, us a pair",
            "ratio",
        ],
        "lrrrrrr",
        rows,
    )
    rate, found = stream_rate(synthetic[: args.stream], 0.8, Params(bands=16, rows=8))
    report.say(
        "",
        f"`StreamDeduplicator` (threshold 0.8, 16 x 8) over the first {min(args.stream, len(synthetic)):,} "
        f"synthetic texts in batches of 10,000: **{rate:,.0f} texts/s**, {found:,} duplicates of an "
        "earlier text.",
    )
    report.write(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
