"""A collection against a brute-force model, under arbitrary interleavings of writes and listings.

Hypothesis's rule-based state machine adds, re-adds, replaces and removes documents, rebuilds with
another banding or threshold, queries, and opens listings (pairs, clusters) that it leaves open,
reads partly or closes. After every step a fresh connection must find exactly what was
acknowledged: the documents of the model, and the pairs equal to brute force. A write made while
a listing is open once ran inside the listing's transaction and was lost when it closed; this is
the kind of sequence the machine finds.
"""

from __future__ import annotations

import itertools
import os
import random
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from neardup.index import Index
from tests._corpus import WORDS, brute_force_pairs, components
from tests.conftest import migrated_schema

pytestmark = pytest.mark.distributed_variant

# Threshold 0.5 with 64 bands of 2 rows: every pair at or above 0.5 is a candidate with
# probability >= 1 - (1 - 0.25)^64 > 0.99999, so the stored pairs must equal brute force.
EXHAUSTIVE: dict[str, Any] = {"threshold": 0.5, "bands": 64, "rows": 2}
# A small pool of base texts and edits, so that documents often pair with each other.
_BASES = [" ".join(random.Random(seed).choices(WORDS[:60], k=25)) for seed in range(3)]
IDS = [f"d{i}" for i in range(8)]


def _edited(base: int, edits: int, seed: int) -> str:
    rng = random.Random(seed)
    words = _BASES[base].split()
    for _ in range(edits):
        words[rng.randrange(len(words))] = rng.choice(WORDS[:60])
    return " ".join(words)


texts = st.builds(
    _edited, st.integers(0, len(_BASES) - 1), st.integers(0, 6), st.integers(0, 10**6)
) | st.just("")


class CollectionMachine(RuleBasedStateMachine):
    """One collection, its model (id -> text), and the listings currently open on it."""

    url: str
    schema: str

    def __init__(self) -> None:
        super().__init__()
        self.name = f"stateful-{uuid.uuid4().hex[:12]}"
        self.index = Index.create(self.url, self.name, schema=self.schema, **EXHAUSTIVE)
        self.threshold = 0.5
        self.model: dict[str, str] = {}
        self.listings: list[tuple[Iterator[Any], list[Any], list[Any]]] = []

    def _truth(self) -> dict[tuple[str, str], float]:
        return brute_force_pairs(sorted(self.model.items()), self.index.params, self.threshold)

    @rule(
        docs=st.lists(
            st.tuples(st.sampled_from(IDS), texts), min_size=1, max_size=5, unique_by=lambda d: d[0]
        ),
        batch_size=st.integers(1, 4),
    )
    def add(self, docs: list[tuple[str, str]], batch_size: int) -> None:
        result = self.index.add(docs, batch_size=batch_size)
        assert result.added + result.replaced + result.unchanged == len(docs)
        for doc_id, text in docs:
            self.model[doc_id] = text

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data())
    def re_add_unchanged(self, data: st.DataObject) -> None:
        doc_id = data.draw(st.sampled_from(sorted(self.model)))
        assert self.index.add([(doc_id, self.model[doc_id])]).unchanged == 1

    @rule(ids=st.lists(st.sampled_from(IDS), max_size=3, unique=True))
    def remove(self, ids: list[str]) -> None:
        assert self.index.remove(ids) == sum(i in self.model for i in ids)
        for doc_id in ids:
            self.model.pop(doc_id, None)

    @rule(banding=st.sampled_from([(0.5, 64, 2), (0.5, 32, 2), (0.6, 64, 2), (0.5, 128, 1)]))
    def rebuild(self, banding: tuple[float, int, int]) -> None:
        threshold, bands, rows = banding
        self.index.rebuild(threshold, bands=bands, rows=rows)
        self.threshold = threshold

    @rule(kind=st.sampled_from(["pairs", "clusters"]), read=st.integers(1, 3))
    def open_listing(self, kind: str, read: int) -> None:
        """Open a listing and read part of it; what it yields must be what was stored at its start."""
        if kind == "pairs":
            expected: list[Any] = [(a, b) for a, b in sorted(self._truth())]
            listing: Iterator[Any] = ((a, b) for a, b, _ in self.index.pairs())
        else:
            expected = components(set(self._truth()) | self._copies())
            listing = self.index.clusters()
        got = list(itertools.islice(listing, read))
        if kind == "pairs":
            assert got == expected[: len(got)]
        else:  # by cluster id, which the model does not know: the clusters it knows, each once
            assert len(got) == min(read, len(expected))
            assert all(cluster in expected for cluster in got)
            assert len({tuple(cluster) for cluster in got}) == len(got)
        self.listings.append((listing, expected, got))

    @precondition(lambda self: bool(self.listings))
    @rule(data=st.data(), finish=st.booleans())
    def finish_or_close_listing(self, data: st.DataObject, finish: bool) -> None:
        """A listing left open across writes still reads the snapshot it began with."""
        listing, expected, got = self.listings.pop(data.draw(st.integers(0, len(self.listings) - 1)))
        if finish:
            read = got + list(listing)
            # Pairs by (id_a, id_b), as the model has them; clusters by id, which it does not know.
            assert (
                read == expected if expected and isinstance(expected[0], tuple) else sorted(read) == expected
            )
        else:
            listing.close()  # type: ignore[attr-defined]

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data())
    def query(self, data: st.DataObject) -> None:
        doc_id = data.draw(st.sampled_from(sorted(self.model)))
        hits = dict(self.index.query(self.model[doc_id], min_jaccard=self.threshold))
        truth = self._truth()
        expected = {b if a == doc_id else a for (a, b) in truth if doc_id in (a, b)}
        expected |= {i for i, t in self.model.items() if t == self.model[doc_id] and t.strip()}
        assert set(hits) == expected

    def _copies(self) -> set[tuple[str, str]]:
        """Pairs of documents with the same non-empty text (one content; never a stored pair)."""
        by_text: dict[str, list[str]] = {}
        for doc_id, text in self.model.items():
            if text.strip():
                by_text.setdefault(text, []).append(doc_id)
        return {(a, b) for ids in by_text.values() for a, b in itertools.combinations(sorted(ids), 2)}

    @invariant()
    def acknowledged_state_is_stored(self) -> None:
        """A fresh connection sees every acknowledged document and exactly the brute-force pairs."""
        with Index.open(self.url, self.name, schema=self.schema) as fresh:
            stats = fresh.stats()
            assert stats.documents == len(self.model)
            pairs = {(a, b) for a, b, _ in fresh.pairs()}
        truth = set(self._truth())
        assert pairs == truth
        assert fresh.threshold == self.threshold

    def teardown(self) -> None:
        for listing, _, _ in self.listings:
            listing.close()  # type: ignore[attr-defined]
        self.index.close()


@pytest.fixture(scope="module")
def machine_schema(database_url: str) -> Iterator[str]:
    """A schema of its own: the machine creates many small collections, and dropping them with
    the session's schema would take more locks than one transaction may hold."""
    yield from migrated_schema(database_url, f"nd_stateful_{os.getpid()}")


def test_collection_matches_its_model_under_any_interleaving(database_url: str, machine_schema: str) -> None:
    CollectionMachine.url, CollectionMachine.schema = database_url, machine_schema
    from hypothesis.stateful import run_state_machine_as_test

    run_state_machine_as_test(
        CollectionMachine,
        settings=settings(
            max_examples=30,
            stateful_step_count=15,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
