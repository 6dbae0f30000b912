"""Acceptance on real data: the Debian bookworm descriptions against their exact ground truth.

The corpus lives outside the repository, where the README's "Run the tests" says: the folder in
NEARDUP_DATA_DIR, else ``../shared/data`` beside the checkout; the test is skipped, saying so,
where it is not there (and looks nowhere else).
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import psycopg
import pytest

from neardup.core.sketch import Sketcher
from neardup.core.verify import exact_jaccard, prefilter_floor, signature_agreement
from neardup.index import Cluster, Index
from tests._corpus import components
from tests.conftest import psycopg_url

pytestmark = pytest.mark.distributed_variant

DENSE = 20

CORPUS = "debian_bookworm.jsonl.gz"
BESIDE = Path(__file__).resolve().parents[2] / "shared" / "data"  # ../shared/data beside the checkout


def data_dir() -> Path:
    """Where the README says the corpus is: $NEARDUP_DATA_DIR when set, else ../shared/data."""
    given = os.environ.get("NEARDUP_DATA_DIR")
    return Path(given) if given else BESIDE


DATA = data_dir() if (data_dir() / CORPUS).is_file() else None
MISSING = (
    f"the Debian corpus ({CORPUS}) is not in {data_dir()}: set NEARDUP_DATA_DIR to the folder that "
    "holds it, or put it in ../shared/data beside the checkout (README, Run the tests)"
)


@pytest.mark.skipif(DATA is None, reason=MISSING)
def test_debian_recall_and_precision_at_0_8(
    make_index: Callable[..., Index], database_url: str, schema: str
) -> None:
    assert DATA is not None
    # The ground truth's normalisation: lowercase and collapsed whitespace, character 5-shingles.
    # Clusters of 20 distinct texts or more are dense (the package families make dozens of them).
    index = make_index(threshold=0.8, unicode_form="none", case="lower", dense_cluster_size=DENSE)
    with gzip.open(DATA / "debian_bookworm.jsonl.gz", "rt", encoding="utf-8") as f:
        docs = [(rec["id"], rec["text"]) for rec in map(json.loads, f)]
    index.add(docs)
    truth: dict[tuple[str, str], float] = {}
    with gzip.open(DATA / "debian_bookworm_pairs_j50_k5.tsv.gz", "rt") as f:
        next(f)
        for line in f:
            a, b, j = line.split("\t")[:3]
            truth[(min(a, b), max(a, b))] = float(j)
    stored = {(a, b): j for a, b, j in index.pairs()}
    clusters = list(index.clusters())
    dense = [c for c in clusters if c.dense]
    assert len(dense) >= 10
    # What a user can get: the stored pairs, and a dense cluster's complete pairs on demand.
    found = dict(stored)
    for cluster in dense:
        found.update({(a, b): j for a, b, j in index.cluster_pairs(cluster.id)})
    assert stored.keys() < found.keys()
    _clusters_are_brute_force_on_candidates(index, docs, truth, stored, clusters)
    wanted = {k for k, j in truth.items() if j >= 0.8}
    recall = len(wanted & found.keys()) / len(wanted)
    assert recall >= 0.99, f"recall {recall:.4f} of {len(wanted)} pairs"
    # Issue 36: right at the threshold too, by default (the tuner's recall target of 0.99).
    at = {k for k, j in truth.items() if 0.8 <= j < 0.85}
    at_recall = len(at & found.keys()) / len(at)
    assert at_recall >= 0.99, f"recall {at_recall:.4f} of {len(at)} pairs in [0.8, 0.85)"
    below = [k for k in found if truth.get(k, 0.0) < 0.8]
    assert below == [], f"{len(below)} reported pairs are below 0.8 in truth, e.g. {below[:3]}"
    # Shingles are hashed to 32 bits, so an exact Jaccard may differ from the string truth by a
    # collision; the difference stays below 1 / |A u B| for the few pairs it touches.
    off = [k for k, j in found.items() if abs(j - truth[k]) > 0.01]
    assert off == []
    # The evaluation of a sample agrees with the ground truth restricted to that sample, at the
    # level of contents (documents with one normalised text are one content).
    ev = index.evaluate(sample=300, seed=1)
    with psycopg.connect(psycopg_url(database_url)) as conn:
        content_of: dict[str, int] = dict(
            conn.execute(
                f'SELECT id, content_id FROM "{schema}".document_list WHERE collection = %s', (index.name,)
            ).fetchall()
        )
    sampled = set(ev.sample_ids.tolist())

    def contents(pairs: set[tuple[str, str]]) -> set[tuple[int, int]]:
        ends = {tuple(sorted((content_of[a], content_of[b]))) for a, b in pairs}
        return {(a, b) for a, b in ends if a != b and {a, b} & sampled}

    expected = contents(wanted)
    evaluated = ev.truth.jaccard >= 0.8
    got = set(
        zip(ev.truth.content_a[evaluated].tolist(), ev.truth.content_b[evaluated].tolist(), strict=True)
    )
    assert got == expected
    assert ev.recall == len(expected & contents(set(found))) / len(expected)
    assert ev.precision == 1.0


def _clusters_are_brute_force_on_candidates(
    index: Index,
    docs: list[tuple[str, str]],
    truth: dict[tuple[str, str], float],
    stored: dict[tuple[str, str], float],
    clusters: list[Cluster],
) -> None:
    """The clusters are the components of the candidate pairs (sharing a bucket) whose Jaccard on
    neardup's shingles reaches the threshold, from the exact truth (J >= 0.75 in strings: hashing
    moves a Jaccard by far less); each cluster under the bound stores exactly its such pairs."""
    row = {doc_id: i for i, (doc_id, _) in enumerate(docs)}
    near = [p for p, j in truth.items() if j >= 0.75]
    sketcher = Sketcher(index.params)
    texts = [t for _, t in docs]
    sets = sketcher.shingles(texts)
    signatures = sketcher.signatures(texts)
    keys = sketcher.band_keys(signatures)
    left = np.array([row[a] for a, _ in near])
    right = np.array([row[b] for _, b in near])
    jaccard = exact_jaccard(sets, left, right)
    # A candidate shares a bucket, and verification checks it exactly where its signatures agree
    # enough (the prefilter, the same rule for every pair).
    hopeful = signature_agreement(signatures, left, right) >= prefilter_floor(0.8, index.params.num_perm)
    candidate = (keys[left] == keys[right]).any(axis=1) & hopeful
    edges = {p for p, j, c in zip(near, jaccard.tolist(), candidate.tolist(), strict=True) if c and j >= 0.8}
    assert sorted(sorted(c) for c in clusters) == components(edges)
    # Each pair by the cluster of its first id, those of clusters under the bound compared.
    under = {doc_id: c.id for c in clusters if not c.dense for doc_id in c}
    assert {p for p in stored if p[0] in under} == {p for p in edges if p[0] in under}
