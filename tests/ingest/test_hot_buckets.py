"""Hot buckets: an ingest whose candidate pairs grow with the square of a bucket's size makes,
verifies and stores them in parts (``core.candidates.candidate_parts``), or where the prefix filter
leaves far fewer, only those (``ingest.hot_pairs``), and still stores every pair at or above the
threshold, equal to brute force, with their exact similarities and the clusters they make. Against
a real PostgreSQL, the parts made tiny so that a small corpus needs many of them."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from neardup import verification
from neardup.core import candidates
from neardup.core.params import Params
from neardup.ingest import before_lock, hot_pairs, pairing
from tests._corpus import WORDS, brute_force_pairs, components

pytestmark = pytest.mark.distributed_variant

BUDGET = 40  # candidate pairs a part may hold (repeats across bands counted)


def hot_corpus(seed: int = 5) -> list[tuple[str, str]]:
    """Three clusters of 40 near-copies (one of 40 words replaced in each copy) and 60 records of
    issue 39's shape, which share most of their text and fill the same buckets; shuffled."""
    rng = random.Random(seed)
    docs = []
    for c in range(3):
        base = [rng.choice(WORDS) for _ in range(40)]
        for k in range(40):
            words = list(base)
            for at in rng.sample(range(40), 1):
                words[at] = rng.choice(WORDS)
            docs.append((f"c{c}.{k:02d}", " ".join(words)))
    docs += [(f"r{i:02d}", f"record {i} of the large request, topic {i % 7} and {i % 3}") for i in range(60)]
    rng.shuffle(docs)
    return docs


@pytest.fixture
def parts(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Tiny parts, each verified a few stored contents at a time; the number of candidates each
    verification was given."""
    monkeypatch.setattr(candidates, "PAIRS_PER_PART", BUDGET)
    monkeypatch.setattr(pairing, "SMALL_GROUP", 8)  # larger groups are linked
    monkeypatch.setattr(verification, "STORED_AT_ONCE", 3)
    sizes: list[int] = []
    verify = verification.verify_pairs

    def counting(*args: Any) -> verification.Verified:
        sizes.append(len(args[3]))
        return verify(*args)

    monkeypatch.setattr(verification, "verify_pairs", counting)
    return sizes


def _pairs_and_clusters(index: Any) -> tuple[set[tuple[str, str]], list[list[str]]]:
    pairs = {(min(a, b), max(a, b)) for a, b, _ in index.pairs()}
    return pairs, components(pairs)


@pytest.mark.parametrize("batch_size", [None, 70])
def test_hot_buckets_in_parts_store_every_pair_brute_force_finds(
    make_index: Callable[..., Any], parts: list[int], batch_size: int | None
) -> None:
    docs = hot_corpus()
    # 64 bands of 2 rows: at these similarities LSH misses no pair, so brute force is the answer.
    index = make_index(threshold=0.8, bands=64, rows=2)
    index.add(docs, batch_size=batch_size)
    truth = set(brute_force_pairs(docs, Params(bands=64, rows=2), 0.8))
    pairs, clusters = _pairs_and_clusters(index)
    assert len(truth) > 1_000  # hot: the clusters alone hold 3 x 780 pairs
    assert pairs == truth
    assert clusters == components(truth)
    # In many parts, none much over the budget (one id alone may bring up to 64 bands' worth).
    assert len(parts) > 50
    assert max(parts) <= BUDGET + 64 * len(docs)
    assert np.median(parts) <= BUDGET


def test_a_reband_of_hot_buckets_in_parts_stores_every_pair_brute_force_finds(
    make_index: Callable[..., Any], parts: list[int]
) -> None:
    docs = hot_corpus(seed=6)
    index = make_index(threshold=0.8, bands=32, rows=4)
    index.add(docs)
    parts.clear()
    index.rebuild(0.8, bands=64, rows=2)
    truth = set(brute_force_pairs(docs, Params(bands=64, rows=2), 0.8))
    pairs, clusters = _pairs_and_clusters(index)
    assert pairs == truth
    assert clusters == components(truth)
    assert len(parts) > 50


def test_a_concurrent_batch_with_more_candidates_than_it_may_judge_ahead_judges_them_in_its_turn(
    make_index: Callable[..., Any], parts: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = hot_corpus(seed=7)
    index = make_index(threshold=0.8, bands=64, rows=2)
    index.add(docs[:90])
    verdicts: list[int] = []
    before_turn = before_lock.before_turn

    def recording(*args: Any, **kwargs: Any) -> before_lock.Prework | None:
        pre = before_turn(*args, **kwargs)
        verdicts.append(-1 if pre is None else len(pre.verdicts))
        return pre

    monkeypatch.setattr(before_lock, "JUDGED_AHEAD", 30)
    monkeypatch.setattr(before_lock, "before_turn", recording)
    index.add(docs[90:], batch_size=60, concurrent=True)
    assert verdicts == [0, 0]  # both batches probed ahead, neither held its verdicts
    truth = set(brute_force_pairs(docs, Params(bands=64, rows=2), 0.8))
    pairs, clusters = _pairs_and_clusters(index)
    assert pairs == truth
    assert clusters == components(truth)


@pytest.fixture
def ways(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """How each batch with enough candidates to try the prefix filter made them: "joined" (the
    prefix filter's pairs) or "enumerated" (it left too many, or the sets were over budget)."""
    taken: list[str] = []
    joined = hot_pairs._joined
    monkeypatch.setattr(hot_pairs, "HOT_GROUP", 8)  # as the parts are tiny, so are the hot groups

    def recording(*args: Any) -> Any:
        parts = joined(*args)
        taken.append("enumerated" if parts is None else "joined")
        return parts

    monkeypatch.setattr(hot_pairs, "_joined", recording)
    return taken


def issue_records(count: int, seed: int = 8) -> list[tuple[str, str]]:
    """Issue 39's records, with a few near-copies of some among them (pairs above 0.8)."""
    rng = random.Random(seed)
    docs = [
        (f"r{i:03d}", f"record {i} of the large request, topic {i % 97} and {i % 13}") for i in range(count)
    ]
    docs += [
        (f"copy{i:03d}", f"record {i} of the large request, topic {i % 97} and {i % 13}.")
        for i in range(0, count, 9)
    ]
    rng.shuffle(docs)
    return docs


@pytest.mark.parametrize("batch_size", [None, 90])
def test_issue_39s_records_take_the_prefix_filter_and_store_every_pair_brute_force_finds(
    make_index: Callable[..., Any], parts: list[int], ways: list[str], batch_size: int | None
) -> None:
    docs = issue_records(240)
    index = make_index(threshold=0.8, bands=64, rows=2)
    index.add(docs, batch_size=batch_size)
    truth = brute_force_pairs(docs, Params(bands=64, rows=2), 0.8)
    stored = {(min(a, b), max(a, b)): sim for a, b, sim in index.pairs()}
    assert "joined" in ways
    assert len(truth) >= 20
    assert stored.keys() == truth.keys()
    assert all(stored[pair] == pytest.approx(j, abs=1e-12) for pair, j in truth.items())
    assert _pairs_and_clusters(index)[1] == components(set(truth))


def test_a_batch_whose_sets_are_over_budget_enumerates_its_pairs_and_the_next_joins_them(
    make_index: Callable[..., Any], parts: list[int], ways: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = hot_corpus(seed=9)
    index = make_index(threshold=0.8, bands=64, rows=2)
    monkeypatch.setattr(hot_pairs, "SETS_BUDGET", 100)
    index.add(docs[:110])
    monkeypatch.setattr(hot_pairs, "SETS_BUDGET", 1 << 25)
    index.add(docs[110:])
    assert ways == ["enumerated", "joined"]
    truth = set(brute_force_pairs(docs, Params(bands=64, rows=2), 0.8))
    pairs, clusters = _pairs_and_clusters(index)
    assert pairs == truth
    assert clusters == components(truth)


@given(
    pairs=st.lists(st.tuples(st.integers(0, 30), st.integers(0, 30)), max_size=60),
    most=st.integers(1, 8),
)
def test_a_parts_pairs_are_cut_by_their_first_ids_each_pair_in_one_chunk(
    pairs: list[tuple[int, int]], most: int
) -> None:
    cand = np.array(pairs, dtype=np.int64).reshape(-1, 2)
    chunks = verification._chunks_by_first(cand, most)
    assert sorted(map(tuple, np.concatenate(chunks).tolist())) == sorted(pairs)
    assert all(np.unique(chunk[:, 0]).size <= most for chunk in chunks)


def test_the_prefix_filters_pairs_are_verified_once_each(
    make_index: Callable[..., Any],
    parts: list[int],
    ways: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every exact Jaccard an ingest computes through the pair kernels is of a pair it never
    computed before: the prefix filter's parts are verified from the sets it holds, once."""
    from neardup.core import verify

    seen: list[frozenset[bytes]] = []
    on_pairs = verify._on_pairs

    def counting(kernel: Any, first: Any, second: Any, a: Any, b: Any) -> Any:
        for i, j in zip(a.tolist(), b.tolist(), strict=True):
            left = np.unique(first.values[first.offsets[i] : first.offsets[i + 1]]).tobytes()
            right = np.unique(second.values[second.offsets[j] : second.offsets[j + 1]]).tobytes()
            seen.append(frozenset((left, right)))
        return on_pairs(kernel, first, second, a, b)

    monkeypatch.setattr(verify, "_on_pairs", counting)
    docs = issue_records(240)
    index = make_index(threshold=0.8, bands=64, rows=2)
    index.add(docs)
    assert "joined" in ways
    truth = brute_force_pairs(docs, Params(bands=64, rows=2), 0.8)
    assert {(min(a, b), max(a, b)) for a, b, _ in index.pairs()} == truth.keys()
    assert len(seen) >= len(truth) >= 20
    assert len(set(seen)) == len(seen)


def test_what_the_prefix_filter_holds_follows_the_batch_not_what_is_stored(
    make_index: Callable[..., Any], parts: list[int], ways: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Adding records of one template in rounds: each batch's join holds its own sets and one
    chunk of the stored members', however many rounds came before, and finds every pair."""
    monkeypatch.setattr(hot_pairs, "READ_CHUNK", 40)
    held: list[int] = []
    prefix_groups = hot_pairs._prefix_groups

    def recording(ids: Any, sets: Any, threshold: float) -> Any:
        held.append(len(sets))
        return prefix_groups(ids, sets, threshold)

    monkeypatch.setattr(hot_pairs, "_prefix_groups", recording)
    docs = issue_records(360, seed=10)
    index = make_index(threshold=0.8, bands=64, rows=2)
    most = []
    for start in range(0, len(docs), 100):
        held.clear()
        ways.clear()
        index.add(docs[start : start + 100])
        assert ways
        assert set(ways) == {"joined"}
        most.append(max(held))
    assert len(most) == 4
    assert max(most) <= 100 + 40  # the batch's sets and one chunk's
    assert most[1] == most[2] == most[3]  # never the stored members' all at once
    truth = brute_force_pairs(docs, Params(bands=64, rows=2), 0.8)
    assert {(min(a, b), max(a, b)) for a, b, _ in index.pairs()} == truth.keys()
