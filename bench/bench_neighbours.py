"""Top-k and containment queries of a collection made with ``neighbours=True``: recall against brute
force, precision, latency, and the bytes a document the neighbours add.

    python bench/bench_neighbours.py [CORPUS] [--queries 300] [--synthetic /tmp/synth1m.jsonl]
                                     [--synthetic-limit 1000000] [--synthetic-schema S]
                                     [--skip-quality] [--db URL] [--out FILE]

CORPUS defaults to ../shared/data/debian_bookworm.jsonl.gz. Every document is added to a collection
with neighbours (threshold 0.8, the ground truth's normalisation); the truth of each query is the
exact overlap of its shingle set with every stored document's (an inverted index over the
collection's own shingles, so brute force over the whole corpus), from which:

- top-k (k = 10): queries are stored documents drawn at random; the true top 10 are the stored
  documents with the highest Jaccard at or above the floor (0.3). Recall = answers at least as
  similar as the true 10th / the true top 10 (ties at the 10th are equally right).
- containment on the corpus: the same queries; truth = stored documents containing at least C of
  the query's shingles (``contains``), or whose shingles the query contains at least C of
  (``within``). Recall = true answers found / true answers; precision = answers that are true /
  answers.
- excerpts: a stored document of at least 200 characters drawn at random, a contiguous 20-80% of
  it, alone or (half of them) embedded between new text (the words of another document, shuffled)
  of 25-100% of the excerpt's length; truth and measures as for containment (``contains``).
- from the source's side: for each of ``--queries`` stored documents of at least 400 characters (a
  source), a story is stored that copies 2 to 4 runs of its words (each at least 60 characters,
  together 50-90% of the story) between new text, the way a news story reuses a wire report; the
  source is then queried with ``direction="within"`` (C = 0.5). Truth: every stored document whose
  shingles the source holds at least half of (the stories among them); recall and precision as
  above. The stories are stored with the corpus, so every row's truth includes them.

With ``--synthetic``, its first ``--synthetic-limit`` documents (make_corpus.py) go into a second
collection with neighbours (or, with ``--synthetic-schema``, the collection ``syn`` already there
is used), and one query's latency is timed there, each query once in each of ROUNDS alternating
rounds: top 10 of stored documents' texts, containment (C = 0.5) of excerpts, and the stored
texts within stored documents' texts (C = 0.5); with the bytes a document of its neighbours.
Writes docs/benchmarks/neighbours.md.
"""

from __future__ import annotations

import random
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _options as options
from _common import (
    DEBIAN,
    REPO,
    TRUTH_CONFIG,
    Report,
    bench_schema,
    header,
    latencies_ms,
    local_server,
    pct,
    read_jsonl,
)
from neardup.core.intervals import wilson
from neardup.index import Index

K_TOP = 10
CONTAINMENTS = (0.5, 0.8)
ROUNDS = 2
EXCERPT_MIN_CHARS = 200
STORY_SOURCE_MIN_CHARS = 400
RUN_MIN_CHARS = 60


class Truth:
    """Exact shingle overlaps of any text with every stored document: an inverted index."""

    def __init__(self, index: Index, texts: list[str]) -> None:
        from neardup.core.sketch import Sketcher

        self.sketcher = Sketcher(index.params)
        sets = self.sketcher.shingles(texts, unique=True)
        self.sizes = sets.lengths()
        owner = np.repeat(np.arange(len(texts), dtype=np.int32), self.sizes)
        order = np.argsort(sets.values, kind="stable")
        self.keys, self.docs = sets.values[order], owner[order]
        self.n = len(texts)

    def overlaps(self, text: str) -> tuple[npt.NDArray[np.int64], int]:
        """(shared shingles with each stored document, the text's distinct shingles)."""
        q = self.sketcher.shingles([text], unique=True)[0]
        lo, hi = np.searchsorted(self.keys, q, "left"), np.searchsorted(self.keys, q, "right")
        lengths = hi - lo
        at = np.repeat(lo - np.r_[0, np.cumsum(lengths)[:-1]], lengths) + np.arange(lengths.sum())
        return np.bincount(self.docs[at], minlength=self.n).astype(np.int64), int(q.size)


class Tally:
    """Found / true counts (recall) and true / given answers (precision), pooled over queries."""

    def __init__(self) -> None:
        self.found = self.true = self.right = self.given = 0
        self.ms: list[float] = []

    def add(self, found: int, true: int, right: int, given: int) -> None:
        self.found, self.true = self.found + found, self.true + true
        self.right, self.given = self.right + right, self.given + given

    def row(self, name: str) -> list[object]:
        lo, hi = wilson(self.found, self.true) if self.true else (float("nan"), float("nan"))
        precision = f"{self.right / self.given:.3f}" if self.given else "-"
        return [
            name,
            f"{self.found:,} / {self.true:,}",
            f"{self.found / max(self.true, 1):.3f} [{lo:.3f}, {hi:.3f}]",
            precision,
            f"{pct(self.ms, 50):.1f}" if self.ms else "-",
        ]


def timed_query(index: Index, text: str, **asked: Any) -> tuple[list[Any], float]:
    t0 = time.perf_counter()
    found = index.query(text, **asked)
    return found, 1000 * (time.perf_counter() - t0)


def top_k(
    index: Index, truth: Truth, texts: list[str], position: dict[str, int], queries: list[int], tally: Tally
) -> None:
    floor = index.params.neighbour_floor
    for qi in queries:
        shared, size = truth.overlaps(texts[qi])
        jac = shared / np.maximum(size + truth.sizes - shared, 1)
        eligible = np.flatnonzero(jac >= floor)
        best = eligible[np.argsort(-jac[eligible], kind="stable")][:K_TOP]
        if best.size == 0:
            continue
        kth = jac[best[-1]]
        found, ms = timed_query(index, texts[qi], k=K_TOP)
        tally.ms.append(ms)
        good = sum(1 for d, _ in found if jac[position[d]] >= kth - 1e-12)
        right = sum(1 for d, j in found if abs(jac[position[d]] - j) < 1e-9 and j >= floor)
        tally.add(min(good, best.size), int(best.size), right, len(found))


def containment(
    index: Index, truth: Truth, position: dict[str, int], text: str, c: float, way: str, tally: Tally
) -> None:
    shared, size = truth.overlaps(text)
    share = shared / size if way == "contains" else shared / np.maximum(truth.sizes, 1)
    true = set(np.flatnonzero((share >= c) & (shared > 0)).tolist())
    found, ms = timed_query(index, text, min_containment=c, direction=way)
    tally.ms.append(ms)
    got = {position[m.id] for m in found}
    tally.add(len(got & true), len(true), len(got & true), len(got))


def excerpt(texts: list[str], source: int, rng: random.Random) -> tuple[str, bool]:
    """A contiguous 20-80% of ``texts[source]``, alone or (half the time) embedded in new text."""
    text = texts[source]
    n = len(text)
    length = int(n * rng.uniform(0.2, 0.8))
    start = rng.randrange(0, n - length + 1)
    part = text[start : start + length]
    if rng.random() < 0.5:
        return part, False
    words = texts[rng.randrange(len(texts))].split()
    rng.shuffle(words)
    new = " ".join(words)[: int(length * rng.uniform(0.25, 1.0))]
    cut = rng.randrange(0, len(new) + 1)
    return f"{new[:cut]} {part} {new[cut:]}", True


def story(texts: list[str], source: int, rng: random.Random) -> str:
    """New text around 2 to 4 runs of the source's words (each at least ``RUN_MIN_CHARS``, together
    50-90% of the result), in the source's order: a story reusing part of a report."""
    words = texts[source].split()
    runs = rng.randint(2, 4)
    cuts = sorted(rng.sample(range(1, len(words)), min(len(words) - 1, 2 * runs)))
    pieces = [" ".join(words[a:b]) for a, b in zip(cuts[::2], cuts[1::2], strict=False)]
    pieces = [p for p in pieces if len(p) >= RUN_MIN_CHARS] or [" ".join(words[: len(words) // 2])]
    copied = sum(len(p) for p in pieces)
    filler = texts[rng.randrange(len(texts))].split()
    rng.shuffle(filler)
    new = " ".join(filler)[: int(copied * rng.uniform(0.1, 1.0))]
    gaps = sorted(rng.randint(0, len(new)) for _ in range(len(pieces)))
    out, at = [], 0
    for piece, gap in zip(pieces, gaps, strict=True):
        out += [new[at:gap], piece]
        at = gap
    out.append(new[at:])
    return " ".join(part for part in out if part)


def quality(report: Report, url: str, schema: str, corpus: Path, queries: int, seed: int) -> None:
    records = list(read_jsonl(corpus))
    rng = random.Random(seed)
    base = [r[1] for r in records]
    sources = rng.sample([i for i, t in enumerate(base) if len(t) >= STORY_SOURCE_MIN_CHARS], queries)
    records += [(f"story-{n}-of-{records[i][0]}", story(base, i, rng)) for n, i in enumerate(sources)]
    ids, texts = [r[0] for r in records], [r[1] for r in records]
    position = {d: i for i, d in enumerate(ids)}
    with Index.create(url, "neighbours", schema=schema, neighbours=True, **TRUTH_CONFIG) as index:
        t0 = time.perf_counter()
        index.add(records)
        added = time.perf_counter() - t0
        stats = index.stats()
        truth = Truth(index, texts)
        drawn = rng.sample(range(len(ids)), queries)
        tallies: dict[str, Tally] = {}
        tallies["top-10"] = Tally()
        top_k(index, truth, texts, position, drawn, tallies["top-10"])
        for c in CONTAINMENTS:
            for way in ("contains", "within"):
                tally = tallies.setdefault(f"containment >= {c}, {way}", Tally())
                for qi in drawn:
                    containment(index, truth, position, texts[qi], c, way, tally)
        long_enough = [i for i, t in enumerate(texts) if len(t) >= EXCERPT_MIN_CHARS]
        for c in CONTAINMENTS:
            alone, embedded = Tally(), Tally()
            for qi in rng.sample(long_enough, queries):
                text, inside = excerpt(texts, qi, rng)
                containment(index, truth, position, text, c, "contains", embedded if inside else alone)
            tallies[f"excerpts, containment >= {c}"] = alone
            tallies[f"excerpts embedded, containment >= {c}"] = embedded
        stories = tallies.setdefault("a stored story's source, within >= 0.5", Tally())
        for qi in sources:
            containment(index, truth, position, texts[qi], 0.5, "within", stories)
    report.say(
        f"## {corpus.name}: {len(ids):,} documents, {queries} queries a row",
        "",
        f"Added in {added:.1f} s. Neighbours: {stats.neighbour_rows:,} fingerprint rows "
        f"({stats.neighbour_rows / len(ids):.1f} a document), "
        f"{stats.neighbour_bytes / len(ids):,.0f} bytes a document of "
        f"{stats.bytes_on_disk / len(ids):,.0f} for the whole collection.",
        "",
    )
    report.table(
        ["question", "found / true", "recall [95% Wilson]", "precision", "p50 ms"],
        "lrrrr",
        [t.row(name) for name, t in tallies.items()],
    )


def latency(
    report: Report, url: str, schema: str, corpus: Path, limit: int, queries: int, seed: int, reuse: bool
) -> None:
    rng = random.Random(seed)
    if reuse:
        index, added = Index.open(url, "syn", schema=schema), float("nan")
    else:
        index = Index.create(url, "neighbours_scale", schema=schema, neighbours=True)
    with index:
        if not reuse:
            t0 = time.perf_counter()
            index.add(read_jsonl(corpus, limit), batch_size=50_000)
            added = time.perf_counter() - t0
        stats = index.stats()
        drawn = sorted(rng.sample(range(stats.documents), queries))
        wanted, texts = set(drawn), []
        for n, (_, text) in enumerate(read_jsonl(corpus, limit)):
            if n in wanted:
                texts.append(text)
        excerpts = [excerpt(texts, i, rng)[0] for i in range(len(texts))]
        # Alternating rounds, each query once a round; the figures pool the rounds.
        top: list[float] = []
        contained: list[float] = []
        within: list[float] = []
        plain: list[float] = []
        for _ in range(ROUNDS):
            top += latencies_ms(lambda t: index.query(t, k=K_TOP), texts)
            contained += latencies_ms(lambda t: index.query(t, min_containment=0.5), excerpts)
            within += latencies_ms(lambda t: index.query(t, min_containment=0.5, direction="within"), texts)
            plain += latencies_ms(lambda t: index.query(t), texts)
    n = stats.documents
    report.say(
        f"## {corpus.name}: latency at {n:,} documents",
        "",
        (f"Added in {added:.0f} s ({n / added:,.0f} docs/s, batches of 50,000). " if not reuse else "")
        + "Neighbours: "
        f"{stats.neighbour_rows / n:.1f} fingerprint rows and "
        f"{stats.neighbour_bytes / n:,.0f} bytes a document, "
        f"of {stats.bytes_on_disk / n:,.0f} for the whole collection.",
        "",
    )
    report.table(
        ["query", "p50 ms", "p99 ms"],
        "lrr",
        [
            ["similar (threshold 0.8, the bands)", f"{pct(plain, 50):.2f}", f"{pct(plain, 99):.2f}"],
            [f"top {K_TOP}", f"{pct(top, 50):.2f}", f"{pct(top, 99):.2f}"],
            ["containment >= 0.5, excerpts", f"{pct(contained, 50):.2f}", f"{pct(contained, 99):.2f}"],
            ["within >= 0.5, stored texts", f"{pct(within, 50):.2f}", f"{pct(within, 99):.2f}"],
        ],
    )


def main(argv: list[str] | None = None) -> int:
    parser = options.parser(__doc__)
    parser.add_argument("corpus", nargs="?", type=Path, default=DEBIAN)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--synthetic", type=Path, help="a make_corpus.py file, for latency at scale")
    parser.add_argument("--synthetic-limit", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--skip-quality", action="store_true", help="only the latency at scale")
    parser.add_argument(
        "--synthetic-schema",
        help="time the collection 'syn' already in this schema (made from --synthetic) instead of adding it",
    )
    options.add_db(parser)
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "benchmarks" / "neighbours.md")
    args = parser.parse_args(argv)
    with ExitStack() as stack:
        url = args.db or stack.enter_context(local_server())
        report = Report()
        report.say(*header("Neighbours: top-k and containment", url, args.db is not None))
        if not args.skip_quality:
            schema = stack.enter_context(bench_schema(url, "bench_neighbours"))
            quality(report, url, schema, args.corpus, args.queries, args.seed)
        if args.synthetic:
            reuse = args.synthetic_schema is not None
            schema = args.synthetic_schema or stack.enter_context(bench_schema(url, "bench_neighbours_scale"))
            latency(report, url, schema, args.synthetic, args.synthetic_limit, args.queries, args.seed, reuse)
        report.write(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
