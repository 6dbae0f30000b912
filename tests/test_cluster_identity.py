"""Cluster ids last: a state machine adds and removes documents one at a time, and after each write
every cluster people saw must be found again as the rules say (README, "Cluster ids"):

- a cluster keeps its id as documents join it or leave it (while it stays connected);
- when clusters merge, the survivor has the oldest (smallest) of their ids;
- when a cluster splits, each part that is still a cluster has an id never shown before;
- under the default keep policy, ``first``, the representative is the earliest inserted member,
  so no later document displaces it.
"""

from __future__ import annotations

import os
import random
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from neardup.index import Index
from tests._corpus import WORDS
from tests.conftest import migrated_schema

pytestmark = pytest.mark.distributed_variant

# Every pair at or above 0.5 is a candidate with probability > 0.99999 (as in test_stateful).
EXHAUSTIVE: dict[str, Any] = {"threshold": 0.5, "bands": 64, "rows": 2}
_BASES = [" ".join(random.Random(seed).choices(WORDS[:60], k=25)) for seed in range(2)]


def _edited(base: int, edits: int, seed: int) -> str:
    rng = random.Random(seed)
    words = _BASES[base].split()
    for _ in range(edits):
        words[rng.randrange(len(words))] = rng.choice(WORDS[:60])
    return " ".join(words)


texts = st.builds(_edited, st.integers(0, len(_BASES) - 1), st.integers(0, 12), st.integers(0, 40))


class IdentityMachine(RuleBasedStateMachine):
    """One collection written a document at a time, and the clusters seen after each write."""

    url: str
    schema: str

    def __init__(self) -> None:
        super().__init__()
        self.index = Index.create(self.url, f"ids-{uuid.uuid4().hex[:12]}", schema=self.schema, **EXHAUSTIVE)
        self.model: dict[str, str] = {}
        self.order: dict[str, int] = {}
        self.next_doc = 0
        self.before: dict[int, set[str]] = {}
        self.last_members: dict[int, set[str]] = {}  # every id ever shown, with its last members
        self.changed: tuple[str, str] | None = None  # ("add" | "remove", document id) of the last write

    @initialize()
    def look(self) -> None:
        self.before = self._clusters()

    def _clusters(self) -> dict[int, set[str]]:
        found = {}
        for cluster in self.index.clusters():
            found[cluster.id] = set(cluster)
            # keep first: the earliest inserted member is the representative
            assert cluster.representative == min(cluster, key=self.order.__getitem__)
        return found

    @rule(text=texts)
    def add(self, text: str) -> None:
        doc_id = f"d{self.next_doc}"
        self.next_doc += 1
        self.index.add([(doc_id, text)])
        self.model[doc_id], self.order[doc_id] = text, self.next_doc
        self.changed = ("add", doc_id)

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data())
    def copy(self, data: st.DataObject) -> None:
        """Add a document with the text of a stored one (the same content)."""
        self.add(self.model[data.draw(st.sampled_from(sorted(self.model)))])

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data())
    def remove(self, data: st.DataObject) -> None:
        doc_id = data.draw(st.sampled_from(sorted(self.model)))
        assert self.index.remove([doc_id]) == 1
        del self.model[doc_id]
        self.changed = ("remove", doc_id)

    @invariant()
    def ids_last(self) -> None:
        if self.changed is None:
            return
        kind, doc = self.changed
        before, after = self.before, self._clusters()
        cluster_of = {d: c for c, members in after.items() for d in members}
        touched_before = {c for c, m in before.items() if doc in m}
        for c, members in before.items():
            if c in touched_before:
                continue
            if kind == "add" and doc in cluster_of and members <= after[cluster_of[doc]]:
                continue  # merged with the new document's cluster: checked below
            assert after.get(c) == members, f"cluster {c} changed though the write did not touch it"
        if kind == "add" and doc in cluster_of:
            c = cluster_of[doc]
            merged = {o for o, m in before.items() if m <= after[c]}
            if merged:
                assert c == min(merged), f"{sorted(merged)} merged into {c}, not the oldest"
            else:
                self._new_or_continued(c, after[c])
        if kind == "remove" and touched_before:
            (o,) = touched_before
            rest = before[o] - {doc}
            parts = {cluster_of.get(m, ("alone", self.model[m])) for m in rest}
            if len(parts) == 1:  # still connected: the id stays (if it is still a cluster)
                (part,) = parts
                assert part == o or isinstance(part, tuple), f"cluster {o} lost a member and became {part}"
            else:  # a split: every part still a cluster has an id never shown before
                for part in parts:
                    if not isinstance(part, tuple):
                        assert part not in self.last_members, f"split of {o} reused id {part}"
        for c, members in after.items():
            if c not in before:
                self._new_or_continued(c, members)
            self.last_members[c] = set(members)
        self.before = after
        self.changed = None

    def _new_or_continued(self, c: int, members: set[str]) -> None:
        """A cluster formed without any cluster people saw: its id is new, or the id it had when
        it was last shown with one of these documents (a cluster that shrank to one and grew)."""
        if c in self.last_members:
            assert members & self.last_members[c], f"id {c} came back on other documents"

    def teardown(self) -> None:
        self.index.close()


@pytest.fixture(scope="module")
def machine_schema(database_url: str) -> Iterator[str]:
    yield from migrated_schema(database_url, f"nd_identity_{os.getpid()}")


def test_cluster_ids_last_under_any_sequence_of_writes(database_url: str, machine_schema: str) -> None:
    IdentityMachine.url, IdentityMachine.schema = database_url, machine_schema
    from hypothesis.stateful import run_state_machine_as_test

    run_state_machine_as_test(
        IdentityMachine,
        settings=settings(
            max_examples=25,
            stateful_step_count=12,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )


def test_rebuilds_keep_the_ids_of_clusters_that_stay_whole(make_index: Any) -> None:
    index = make_index(**EXHAUSTIVE)
    story = "the storm cut power to forty thousand homes across the northern valley on tuesday night"
    other = "markets in the south opened lower as the price of wheat fell for a third week running"
    index.add([("s1", story), ("o1", other), ("s2", story + " officials said"), ("o2", other + " again")])
    before = {c.id: list(c) for c in index.clusters()}
    assert sorted(before.values()) == [["o1", "o2"], ["s1", "s2"]]
    index.rebuild(0.6, bands=64, rows=2)  # re-banded from the stored signatures
    assert {c.id: list(c) for c in index.clusters()} == before
    index.rebuild(k=4)  # every text sketched again, under new content ids
    assert {c.id: list(c) for c in index.clusters()} == before
    # Ids taken after the rebuild were never used before it.
    index.add([("s3", story + " officials said on wednesday")])
    assert {c.id: list(c) for c in index.clusters()} == {
        **before,
        **{k: [*v, "s3"] for k, v in before.items() if "s1" in v},
    }
