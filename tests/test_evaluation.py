"""Index.evaluate against a real PostgreSQL: truth, recall, precision, candidates and histogram on
small planted collections whose answer is computed here independently, by brute force."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import psycopg
import pytest

from neardup.core import Sketcher, candidate_probability
from neardup.core.intervals import wilson
from neardup.errors import ParamsError, TextNotStoredError
from neardup.evaluation import Evaluation, bin_of, similarity_edges
from neardup.index import Index
from neardup.plot import plot_evaluation
from tests._corpus import brute_force_pairs, planted_corpus
from tests.conftest import psycopg_url

pytestmark = pytest.mark.distributed_variant

MakeIndex = Callable[..., Index]
Pairs = dict[tuple[str, str], float]
# 64 x 2 at num_perm 128: every pair above 0.25 is a candidate but with probability < 1e-7.
GENEROUS = {"threshold": 0.5, "bands": 64, "rows": 2}
# 4 x 16: a pair at 0.8 is a candidate with probability 0.11, at 0.9 with 0.56.
WEAK = {"threshold": 0.5, "bands": 4, "rows": 16}


def _distinct_texts(docs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The corpus with one document per text, so contents and documents correspond one to one."""
    return list({text: (doc_id, text) for doc_id, text in docs}.values())


@pytest.fixture
def doc_of(database_url: str, schema: str) -> Callable[[Index], dict[int, str]]:
    """The document id of each content of a collection (one each here), read from document_list."""

    def read(index: Index) -> dict[int, str]:
        with psycopg.connect(psycopg_url(database_url)) as conn:
            rows = conn.execute(
                f'SELECT content_id, id FROM "{schema}".document_list WHERE collection = %s', (index.name,)
            ).fetchall()
        return dict(rows)

    return read


def _truth(ev: Evaluation, doc_of: dict[int, str]) -> Pairs:
    pairs = (
        tuple(sorted((doc_of[a], doc_of[b])))
        for a, b in zip(ev.truth.content_a.tolist(), ev.truth.content_b.tolist(), strict=True)
    )
    return dict(zip(pairs, ev.truth.jaccard.tolist(), strict=True))  # type: ignore[arg-type]


def _flags(ev: Evaluation, doc_of: dict[int, str], flags: np.ndarray) -> dict[tuple[str, str], bool]:
    keys = [
        (min(doc_of[a], doc_of[b]), max(doc_of[a], doc_of[b]))
        for a, b in zip(ev.truth.content_a.tolist(), ev.truth.content_b.tolist(), strict=True)
    ]
    return dict(zip(keys, flags.tolist(), strict=True))


def _candidates_from_texts(
    index: Index, docs: list[tuple[str, str]], pairs: Pairs
) -> dict[tuple[str, str], bool]:
    """Whether each pair shares a band key, from signatures computed here (not the stored ones)."""
    sketcher = Sketcher(index.params)
    row = {doc_id: i for i, (doc_id, _) in enumerate(docs)}
    keys = sketcher.band_keys(sketcher.signatures([t for _, t in docs]))
    return {(a, b): bool((keys[row[a]] == keys[row[b]]).any()) for a, b in pairs}


def _check_against_brute_force(
    index: Index, docs: list[tuple[str, str]], doc_of: dict[int, str], ev: Evaluation
) -> None:
    truth = brute_force_pairs(docs, index.params, ev.floor)
    stored = {(a, b): j for a, b, j in index.pairs()}
    true = {k for k, j in truth.items() if j >= index.threshold}
    assert ev.sampled == ev.contents == len(docs)
    assert _truth(ev, doc_of) == truth  # the same floats, not approximately
    assert (ev.true_pairs, ev.found_pairs) == (len(true), len(true & stored.keys()))
    assert ev.recall == len(true & stored.keys()) / len(true)
    assert ev.recall_low <= ev.recall <= ev.recall_high
    assert (ev.stored_pairs, ev.precise_pairs, ev.precision) == (len(stored), len(stored), 1.0)
    assert _flags(ev, doc_of, ev.truth.found) == {k: k in stored for k in truth}
    assert _flags(ev, doc_of, ev.truth.candidate) == _candidates_from_texts(index, docs, truth)
    assert ev.candidate_pairs == sum(_candidates_from_texts(index, docs, truth).values())
    j = np.array(list(truth.values()))
    assert ev.expected_candidates == pytest.approx(candidate_probability(j, ev.bands, ev.rows).sum())
    # Per bin: the sampled pairs, candidates and stored ones, and every stored pair of the collection.
    edges = similarity_edges(ev.floor, index.threshold)
    which = bin_of(j, edges)
    stored_bins = bin_of(np.array(list(stored.values())), edges)
    assert [(b.low, b.high) for b in ev.bins] == list(itertools.pairwise(edges))
    for k, b in enumerate(ev.bins):
        in_bin = [key for key, w in zip(truth, which, strict=True) if w == k]
        assert b.pairs == len(in_bin)
        assert b.found == sum(key in stored for key in in_bin)
        assert b.stored == int((stored_bins == k).sum())
        if in_bin:
            assert b.empirical == b.candidates / b.pairs
            assert b.stderr == pytest.approx(math.sqrt(b.empirical * (1 - b.empirical) / b.pairs))
            assert b.mean_jaccard == pytest.approx(np.mean([truth[key] for key in in_bin]))
            curve = candidate_probability(np.array([truth[key] for key in in_bin]), ev.bands, ev.rows)
            assert b.expected == pytest.approx(float(np.mean(curve)))
        # Recall per bin at or above the threshold, with Wilson's interval over the bin's pairs.
        if in_bin and b.low >= index.threshold:
            found = sum(key in stored for key in in_bin)
            assert b.recall == found / len(in_bin)
            assert (b.recall_low, b.recall_high) == wilson(found, len(in_bin))
        else:
            assert b.recall is b.recall_low is b.recall_high is None
    assert sum(b.stored for b in ev.bins) == ev.collection_pairs == len(stored)
    # The threshold's bin, first in eval's listing and named in its summary.
    at = ev.threshold_bin
    assert at.low == index.threshold
    assert ev.bins_threshold_first()[0] is at
    assert sorted(ev.bins_threshold_first(), key=lambda b: b.low) == list(ev.bins)
    at_truth = [key for key, j in truth.items() if at.low <= j < at.high or (at.high == 1.0 and j == 1.0)]
    assert at.pairs == len(at_truth)
    if at_truth:
        assert f"recall in the threshold's bin [{at.low:g}, {at.high:g}" in str(ev)
        assert f"({at.found:,} of {at.pairs:,} sampled pairs" in str(ev)


def test_generous_banding_finds_every_pair(
    make_index: MakeIndex, doc_of: Callable[[Index], dict[int, str]]
) -> None:
    docs = _distinct_texts(planted_corpus(n_sources=25, copies=3, seed=21))
    index = make_index(**GENEROUS)
    index.add(docs, batch_size=30)
    ev = index.evaluate(sample=10_000)
    assert ev.floor == 0.25
    assert ev.true_pairs > 40
    assert ev.recall == 1.0
    assert ev.candidate_pairs == ev.truth_pairs
    _check_against_brute_force(index, docs, doc_of(index), ev)


def test_weak_banding_reports_the_recall_it_has(
    make_index: MakeIndex, doc_of: Callable[[Index], dict[int, str]]
) -> None:
    docs = _distinct_texts(planted_corpus(n_sources=25, copies=3, seed=21))
    index = make_index(**WEAK)
    index.add(docs)
    ev = index.evaluate(sample=len(docs), floor=0.3)
    assert ev.recall is not None
    assert 0.0 < ev.recall < 1.0
    _check_against_brute_force(index, docs, doc_of(index), ev)
    # Above the threshold a pair is stored exactly when it is a candidate.
    above = ev.truth.jaccard >= index.threshold
    assert np.array_equal(ev.truth.found[above], ev.truth.candidate[above])
    assert not ev.truth.found[~above].any()


def test_a_sample_gets_every_pair_that_touches_it(
    make_index: MakeIndex, doc_of: Callable[[Index], dict[int, str]]
) -> None:
    docs = _distinct_texts(planted_corpus(n_sources=20, copies=3, seed=5))
    index = make_index(**GENEROUS)
    index.add(docs)
    ev = index.evaluate(sample=12, seed=4)
    names = doc_of(index)
    sampled = {names[i] for i in ev.sample_ids.tolist()}
    assert ev.sampled == len(sampled) == 12
    truth = brute_force_pairs(docs, index.params, ev.floor)
    assert _truth(ev, names) == {k: j for k, j in truth.items() if sampled & set(k)}
    stored = {k for k in ((a, b) for a, b, _ in index.pairs()) if sampled & set(k)}
    assert ev.stored_pairs == len(stored)
    again = index.evaluate(sample=12, seed=4)
    assert again == ev
    assert np.array_equal(again.sample_ids, ev.sample_ids)
    assert not np.array_equal(index.evaluate(sample=12, seed=5).sample_ids, ev.sample_ids)


def test_copies_and_empty_texts_are_left_out(make_index: MakeIndex, tmp_path: Path) -> None:
    index = make_index(threshold=0.5)
    ev = index.evaluate()
    assert (ev.sampled, ev.contents, ev.truth_pairs, ev.recall, ev.precision) == (0, 0, 0, None, None)
    assert (ev.recall_low, ev.recall_high) == (0.0, 1.0)
    assert "no true pair" in str(ev)
    plot_evaluation(ev, tmp_path / "empty.png")  # nothing measured still draws
    assert (tmp_path / "empty.png").read_bytes()[:4] == b"\x89PNG"
    text = "the quick brown fox jumps over the lazy dog"
    index.add([("a", text), ("b", text.upper()), ("c", text + " again"), ("d", ""), ("e", "")])
    ev = index.evaluate()
    # a and b are one content: their identical pair is not counted; d and e have no shingles.
    assert (ev.contents, ev.true_pairs, ev.found_pairs, ev.stored_pairs) == (2, 1, 1, 1)


def test_refuses_a_collection_without_text_and_bad_parameters(make_index: MakeIndex) -> None:
    index = make_index(threshold=0.6, store_text=False)
    index.add([("a", "some text here")])
    with pytest.raises(TextNotStoredError, match="stores no text"):
        index.evaluate()
    index = make_index(threshold=0.6)
    for kwargs, message in (
        ({"sample": 0}, "sample must be"),
        ({"seed": -1}, "seed must be"),
        ({"floor": 0.7}, "floor must be in"),
        ({"floor": 0.0}, "floor must be in"),
    ):
        with pytest.raises(ParamsError, match=message):
            index.evaluate(**kwargs)


def test_similarity_edges_put_the_floor_and_the_threshold_on_edges() -> None:
    assert similarity_edges(0.4, 0.8) == [
        0.4,
        0.45,
        0.5,
        0.55,
        0.6,
        0.65,
        0.7,
        0.75,
        0.8,
        0.85,
        0.9,
        0.95,
        1.0,
    ]
    assert similarity_edges(0.36, 0.72)[:4] == [0.36, 0.4, 0.45, 0.5]
    assert similarity_edges(0.36, 0.72)[7:10] == [0.7, 0.72, 0.75]
    assert similarity_edges(0.5, 1.0)[-2:] == [0.95, 1.0]
    assert similarity_edges(1.0, 1.0) == [1.0, 1.0]
    edges = similarity_edges(0.4, 0.8)
    assert bin_of([0.39, 0.4, 0.44999, 0.8, 0.95, 1.0], edges).tolist() == [-1, 0, 0, 8, 11, 11]


def test_recall_interval_resamples_contents_so_clusters_widen_it() -> None:
    from neardup.core.estimate import wilson_interval
    from neardup.evaluation import _bootstrap_recall

    sample = np.arange(200, dtype=np.int64)
    # Independent pairs: one true pair per sampled content (partner outside the sample), 180 found.
    a, b = sample.copy(), sample + 1000
    found = np.arange(200) < 180
    low, high = _bootstrap_recall(sample, a, b, found, seed=0)
    w_low, w_high = wilson_interval(180, 200)
    assert low <= 0.9 <= high
    assert abs(low - w_low) < 0.02
    assert abs(high - w_high) < 0.02
    # The same share found, but the misses all belong to one content with 20 pairs: what the sample
    # says about recall rests on whether that content is drawn, and the interval says so.
    a = np.concatenate([np.full(20, 0), sample[1:181]])
    b = np.concatenate([np.arange(20) + 1000, sample[1:181] + 2000])
    found = np.concatenate([np.zeros(20, bool), np.ones(180, bool)])
    c_low, c_high = _bootstrap_recall(sample, a, b, found, seed=0)
    assert c_low <= 0.9 <= c_high
    assert (c_high - c_low) > 1.5 * (high - low)
    # Everything found: nothing to be unsure about.
    assert _bootstrap_recall(sample, sample, sample + 1000, np.ones(200, bool), seed=0) == (1.0, 1.0)
