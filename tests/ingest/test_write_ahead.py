"""An ingest into an empty collection writes each next batch's new contents and signatures ahead,
on a second connection, in the transaction that then writes the rest of that batch: the end state
is the one a batch-by-batch ingest reaches, a writer that commits between two batches is still
accounted for, and a batch that fails leaves nothing of the one written ahead. Against a real
PostgreSQL. A distributed collection writes its batches in turn, nothing ahead
(docs/distributed.md, "Writers in parallel"): there the same ingests write nothing ahead and end
in the same states."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from neardup.core.params import Params
from neardup.index import Index
from neardup.ingest import StageClock
from neardup.storage import catalog
from tests._corpus import brute_force_pairs, planted_corpus
from tests._state import collection_state
from tests.ingest._hooks import count_withdrawals

pytestmark = pytest.mark.distributed_variant

AHEAD = "worker: ahead: the next batch's contents and signatures COPY"
PARAMS: dict[str, Any] = {"threshold": 0.8, "bands": 64, "rows": 2}


def _ahead(deployment: str, batches: int) -> int:
    """How many batches an ingest writes ahead: none on a distributed collection."""
    return 0 if deployment == "citus" else batches


def _with_repeats(seed: int) -> list[tuple[str, str]]:
    """A planted corpus (pairs within and across batches) in which some texts come again later
    under other ids, so that a batch written ahead must reuse contents of the batches before it."""
    docs = planted_corpus(n_sources=30, copies=2, seed=seed)  # 90 documents
    return docs + [(f"again-{i}", text) for i, (_, text) in enumerate(docs[::9])]


def test_each_next_batch_is_written_ahead_and_the_end_state_is_a_batch_by_batch_ingests(
    make_index: Callable[..., Any],
    database_url: str,
    schema: str,
    deployment: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    docs = _with_repeats(seed=21)
    index = make_index(**PARAMS)
    withdrawn = count_withdrawals(monkeypatch)
    clock = StageClock()
    index.add(docs, batch_size=20, clock=clock)
    batches = -(-len(docs) // 20)
    # Every batch after the first had its new contents written ahead (one batch, the repeats',
    # may have none new; here each has some).
    assert clock.entries.get(AHEAD, 0) == _ahead(deployment, batches - 1)
    assert withdrawn == []  # what was written ahead stood: nobody else wrote in between
    one_by_one = make_index(**PARAMS)
    for start in range(0, len(docs), 20):
        one_by_one.add(docs[start : start + 20])  # each its own ingest: nothing written ahead
    got = collection_state(database_url, schema, index.name)
    assert got.comparable() == collection_state(database_url, schema, one_by_one.name).comparable()
    assert got.contents == len({text for _, text in docs})
    assert got.dangling == 0
    truth = brute_force_pairs(docs, Params(bands=64, rows=2), 0.8)
    assert {(a, b) for a, b, *_ in index.pairs()} == set(truth)
    # The index's own connection writes again once the ingest is over.
    index.add([("after", "a text added later on its own")])
    assert index.stats().documents == len(docs) + 1


def test_a_writer_that_commits_between_two_batches_is_accounted_for(
    make_index: Callable[..., Any],
    database_url: str,
    schema: str,
    deployment: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    docs = planted_corpus(n_sources=30, copies=2, seed=22)
    mine = docs[:60]
    # The other writer stores, while this ingest's second batch is written ahead, exactly the text
    # of one of that batch's documents and a near-copy of another's source.
    theirs = [("theirs-same", mine[25][1]), *docs[60:70]]
    index = make_index(**PARAMS)
    other = Index.open(database_url, index.name, schema=schema)
    withdrawn = count_withdrawals(monkeypatch)
    clock = StageClock()
    done: list[int] = []

    def after_a_batch(total: Any) -> None:
        if not done:
            done.append(total.added)
            other.add(theirs)

    try:
        index.add(mine, batch_size=20, progress=after_a_batch, clock=clock)
    finally:
        other.close()
    assert done == [20]
    assert clock.entries.get(AHEAD, 0) >= _ahead(deployment, 1)
    # The content written ahead for the text the other writer stored meanwhile went; the rest stood.
    assert withdrawn == [1][: _ahead(deployment, 1)]
    everything = [*mine, *theirs]
    got = collection_state(database_url, schema, index.name)
    assert got.contents == len({text for _, text in everything})
    assert got.dangling == 0
    truth = brute_force_pairs(everything, Params(bands=64, rows=2), 0.8)
    assert {(a, b) for a, b, *_ in index.pairs()} == set(truth)


class InjectedError(Exception):
    """The failure a test injects into a batch."""


def test_a_failed_batch_leaves_nothing_of_the_batch_written_ahead(
    make_index: Callable[..., Any],
    database_url: str,
    schema: str,
    deployment: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    docs = planted_corpus(n_sources=30, copies=2, seed=23)
    index = make_index(**PARAMS)
    advance = catalog.advance
    calls: list[int] = []

    def failing_in_the_second_batch(*args: Any, **kwargs: Any) -> int:
        calls.append(1)
        if len(calls) == 2:  # the second batch fails at its end, with the third written ahead
            raise InjectedError
        return advance(*args, **kwargs)

    monkeypatch.setattr(catalog, "advance", failing_in_the_second_batch)
    clock = StageClock()
    with pytest.raises(InjectedError):
        index.add(docs, batch_size=20, clock=clock)
    # The second batch's contents, then the third's.
    assert clock.entries.get(AHEAD, 0) == _ahead(deployment, 2)
    got = collection_state(database_url, schema, index.name)
    assert [d[0] for d in got.documents] == sorted(doc_id for doc_id, _ in docs[:20])
    assert got.contents == len({text for _, text in docs[:20]})
    assert got.dangling == 0
    monkeypatch.setattr(catalog, "advance", advance)
    # The index goes on from the first batch: the rest is added, and every pair is found.
    index.add(docs[20:], batch_size=20)
    truth = brute_force_pairs(docs, Params(bands=64, rows=2), 0.8)
    assert {(a, b) for a, b, *_ in index.pairs()} == set(truth)
    assert collection_state(database_url, schema, index.name).dangling == 0


def test_an_index_built_mid_ingest_rolls_back_the_contents_written_ahead_first(
    database_url: str,
    schema: str,
    deployment: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With neighbours, the contents written ahead include their fingerprints, which live in the
    bucket partition: the index an ingest builds once its held rows pass the bound must not wait
    for that open transaction (it did, for ever). A lock timeout makes a wait an error here."""
    from neardup.ingest import bucket_members

    monkeypatch.setattr(bucket_members, "DEFERRED_ROWS", 2_000)  # passed after the second batch
    docs = _with_repeats(seed=23)
    url = database_url + ("&" if "?" in database_url else "?") + "options=-clock_timeout%3D20s"
    index = Index.create(url, "mid-ingest-index", schema=schema, neighbours=True, **PARAMS)
    with index:
        clock = StageClock()
        index.add(docs, batch_size=20, clock=clock)
        assert clock.entries["build the deferred bucket index"] == 1
        # The batch after the build wrote its own contents; the others were written ahead.
        ahead = clock.entries.get(AHEAD, 0)
        assert ahead == 0 if deployment == "citus" else 0 < ahead < -(-len(docs) // 20) - 1
        truth = brute_force_pairs(docs, Params(bands=64, rows=2), 0.8)
        assert {(a, b) for a, b, *_ in index.pairs()} == set(truth)
        assert collection_state(database_url, schema, index.name).dangling == 0
        text = docs[0][1]
        assert docs[0][0] in {c.id for c in index.query(text, min_containment=0.9)}
