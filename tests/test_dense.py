"""Dense clusters against brute force: clusters are exactly the connected components of the
candidate pairs at or above the threshold; a cluster under ``dense_cluster_size`` contents stores
every such pair, a larger one a verified subset that connects it, and ``cluster_pairs`` gives its
complete pairs. Through every way of writing: one call, batches, a later add (probe), concurrent
writers, ``jobs=2``, removals (a bridge), replacements and rebuilds.

64 bands of 2 rows make every pair at or above 0.8 a candidate (with probability 1 - 0.36^64), so
brute force over all pairs is the answer; a tiny bound and tiny small groups put the dense paths
to work on a corpus of a few hundred documents."""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from neardup.core.params import Params
from neardup.errors import ParamsError
from neardup.index import Index
from neardup.ingest import pairing
from tests._corpus import WORDS, brute_force_pairs, components

pytestmark = pytest.mark.distributed_variant

BOUND = 6
EXHAUSTIVE: dict[str, Any] = {"threshold": 0.8, "bands": 64, "rows": 2, "dense_cluster_size": BOUND}


@pytest.fixture(autouse=True)
def small_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    """Groups of more than four members are linked, not enumerated."""
    monkeypatch.setattr(pairing, "SMALL_GROUP", 4)


def clique(name: str, n: int, seed: int) -> list[tuple[str, str]]:
    """``n`` near-copies of one text of 60 words, each with one word replaced (J about 0.88)."""
    rng = random.Random(seed)
    base = [rng.choice(WORDS) for _ in range(60)]
    out = []
    for i in range(n):
        words = list(base)
        words[rng.randrange(60)] = rng.choice(WORDS)
        out.append((f"{name}.{i:03d}", " ".join(words)))
    return out


def chain(name: str, n: int, seed: int) -> list[tuple[str, str]]:
    """``n`` windows of 50 distinct words, each 4 words on from the last: neighbours share 46 of 54
    (J about 0.85), members two apart 42 of 58 (0.72), so only neighbours pair."""
    words = list(WORDS)
    random.Random(seed).shuffle(words)
    return [(f"{name}.{i:03d}", " ".join(words[4 * i : 4 * i + 50])) for i in range(n)]


def alone(name: str, n: int, seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    return [(f"{name}.{i:03d}", " ".join(rng.choice(WORDS) for _ in range(40))) for i in range(n)]


def mixture(seed: int = 1) -> list[tuple[str, str]]:
    """Two dense cliques, a dense chain, a clique under the bound, and documents alone; shuffled."""
    docs = clique("a", 25, seed) + clique("b", 12, seed + 1) + chain("c", 20, seed + 2)
    docs += clique("d", 4, seed + 3) + alone("e", 10, seed + 4)
    random.Random(seed).shuffle(docs)
    return docs


def check(index: Any, docs: list[tuple[str, str]]) -> None:
    """The index holds exactly brute force's clusters; each cluster under the bound all its pairs,
    each dense one a subset of them that connects it; ``cluster_pairs`` gives every one."""
    truth = brute_force_pairs(docs, Params(bands=64, rows=2), index.threshold)
    stored = {(a, b): j for a, b, j in index.pairs()}
    assert stored.keys() <= truth.keys()
    assert all(stored[p] == pytest.approx(truth[p], abs=1e-12) for p in stored)
    clusters = list(index.clusters())
    assert sorted(sorted(c) for c in clusters) == components(set(truth))
    bound = index.params.dense_cluster_size
    for cluster in clusters:
        members = set(cluster)
        own = {p for p in truth if p[0] in members}
        kept = {p for p in stored if p[0] in members}
        if len(members) < bound:
            assert kept == own
        else:
            assert components(kept) == [sorted(members)]  # the stored pairs connect it
        complete = {(a, b): j for a, b, j in index.cluster_pairs(cluster.id)}
        assert complete.keys() == own
        assert all(complete[p] == pytest.approx(truth[p], abs=1e-12) for p in own)


def JOBS(index: Any, docs: list[tuple[str, str]]) -> None:  # noqa: N802 -- a constant of ``ways``
    index.add(docs, batch_size=15, jobs=2)


def ways() -> Iterator[Any]:
    yield pytest.param(lambda index, docs: index.add(docs, batch_size=None), id="one-transaction")
    yield pytest.param(lambda index, docs: index.add(docs, batch_size=17), id="batches-deferred")

    def later(index: Any, docs: list[tuple[str, str]]) -> None:
        index.add(docs[:40])
        index.add(docs[40:], batch_size=13)

    yield pytest.param(later, id="probe")

    def concurrent(index: Any, docs: list[tuple[str, str]]) -> None:
        index.add(docs[:30])
        index.add(docs[30:], batch_size=20, concurrent=True)

    yield pytest.param(concurrent, id="concurrent")
    yield pytest.param(JOBS, id="jobs-2")


@pytest.mark.parametrize("write", list(ways()))
def test_dense_shapes_are_clustered_as_brute_force_says(
    make_index: Callable[..., Any], write: Callable[[Any, list[tuple[str, str]]], None]
) -> None:
    docs = mixture()
    index = make_index(**EXHAUSTIVE)
    write(index, docs)
    check(index, docs)
    truth = brute_force_pairs(docs, Params(bands=64, rows=2), 0.8)
    # Dense clusters left pairs out (the writer processes of jobs=2 link no group as small as
    # these: the small groups' bound is this process's).
    assert (sum(1 for _ in index.pairs()) < len(truth)) == (write is not JOBS)


def test_removing_the_bridge_of_a_dense_chain_splits_it_exactly(make_index: Callable[..., Any]) -> None:
    docs = chain("c", 20, 7) + clique("a", 10, 8)
    index = make_index(**EXHAUSTIVE)
    index.add(docs)
    check(index, docs)
    # The middle link: two dense chains of 10 and 9 remain, each connected by its own pairs.
    index.remove(["c.010"])
    docs = [d for d in docs if d[0] != "c.010"]
    check(index, docs)
    # Near an end: a part under the bound gets its complete pairs back.
    index.remove(["c.003", "a.004"])
    docs = [d for d in docs if d[0] not in ("c.003", "a.004")]
    check(index, docs)
    sizes = sorted(len(c) for c in index.clusters())
    assert sizes == [3, 6, 9, 9]


def test_replacing_a_link_of_a_dense_chain_splits_it_and_rejoining_joins_it(
    make_index: Callable[..., Any],
) -> None:
    index = make_index(**EXHAUSTIVE)
    index.add(chain("c", 16, 9))
    docs = dict(chain("c", 16, 9))
    middle = docs["c.008"]
    docs["c.008"] = "an unrelated text that pairs with nothing in this collection at all"
    index.add([("c.008", docs["c.008"])])
    check(index, sorted(docs.items()))
    docs["c.008"] = middle
    index.add([("c.008", middle)])
    check(index, sorted(docs.items()))
    assert [len(c) for c in index.clusters()] == [16]


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"threshold": 0.8, "bands": 32, "rows": 2}, id="reband"),
        pytest.param({"dense_cluster_size": 30, "bands": 64, "rows": 2}, id="bound-raised"),
        pytest.param({"dense_cluster_size": 3, "bands": 64, "rows": 2}, id="bound-lowered"),
        pytest.param({"k": 4, "bands": 64, "rows": 2}, id="resketch"),
    ],
)
def test_a_rebuild_keeps_dense_clusters_exact(make_index: Callable[..., Any], change: dict[str, Any]) -> None:
    docs = mixture(seed=3)
    index = make_index(**EXHAUSTIVE)
    index.add(docs, batch_size=25)
    before = {tuple(sorted(c)): c.id for c in index.clusters()}
    index.rebuild(**change)
    if "k" in change:
        # Other shingles: brute force with them (64 x 2 bands still leave no pair out).
        truth = brute_force_pairs(docs, Params(bands=64, rows=2, k=4), 0.8)
        assert sorted(sorted(c) for c in index.clusters()) == components(set(truth))
    else:
        check(index, docs)
        # The same clusters keep their ids.
        after = {tuple(sorted(c)): c.id for c in index.clusters()}
        assert after == {k: v for k, v in before.items() if k in after}


def test_a_clique_of_near_copies_stores_pairs_linear_in_its_members(
    make_index: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the default banding and small groups, 300 near-copies store a few pairs each, not
    their 44,850; and their complete pairs (the candidates at or above the threshold) are all
    there on demand."""
    monkeypatch.setattr(pairing, "SMALL_GROUP", 64)
    docs = clique("a", 300, 11)
    index = make_index(threshold=0.8, dense_cluster_size=BOUND)
    index.add(docs)
    clusters = list(index.clusters())
    assert [len(c) for c in clusters] == [300]
    stored = sum(1 for _ in index.pairs())
    assert 299 <= stored <= 10 * 300
    truth = brute_force_pairs(docs, index.params, 0.8)
    complete = {(a, b) for a, b, _ in index.cluster_pairs(clusters[0].id)}
    assert complete == {p for p in truth if _candidate(index, docs, p)}
    assert len(complete) > 30_000


def _candidate(index: Any, docs: list[tuple[str, str]], pair: tuple[str, str]) -> bool:
    """Whether two documents share a bucket under the index's banding."""
    from neardup.core.sketch import Sketcher

    text = dict(docs)
    sketcher = Sketcher(index.params)
    keys = sketcher.band_keys(sketcher.signatures([text[pair[0]], text[pair[1]]]))
    return bool((keys[0] == keys[1]).any())


def test_a_cluster_that_is_not_there_is_refused(make_index: Callable[..., Any]) -> None:
    from neardup.errors import ClusterNotFoundError

    index = make_index(**EXHAUSTIVE)
    index.add(clique("a", 3, 1))
    with pytest.raises(ClusterNotFoundError, match="no cluster 99999"):
        list(index.cluster_pairs(99999))
    for bad in (2**63, -1, True, "7"):
        with pytest.raises(ParamsError, match="a cluster id"):
            index.cluster_pairs(bad)
        with pytest.raises(ParamsError, match="a cluster id"):
            index.pairs(cluster=bad)


# -- a state machine over adds, removals, replacements and rebuilds on dense shapes ---------------

_POOL = dict(chain("c", 12, 21) + clique("a", 10, 22) + alone("e", 3, 23))
_IDS = sorted(_POOL)


class DenseMachine(RuleBasedStateMachine):
    """One collection with a tiny bound, and its model (id -> text): after every step, clusters are
    brute force's, pairs complete under the bound and connecting past it (``check``)."""

    url: str
    schema: str

    def __init__(self) -> None:
        super().__init__()
        self.index = Index.create(
            self.url, f"dense-{uuid.uuid4().hex[:12]}", schema=self.schema, exist_ok=False, **EXHAUSTIVE
        )
        self.model: dict[str, str] = {}

    @rule(ids=st.lists(st.sampled_from(_IDS), min_size=1, max_size=10, unique=True), batch=st.integers(1, 6))
    def add(self, ids: list[str], batch: int) -> None:
        self.index.add([(i, _POOL[i]) for i in ids], batch_size=batch)
        self.model.update((i, _POOL[i]) for i in ids)

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data())
    def replace(self, data: st.DataObject) -> None:
        """A stored id takes another text of the pool (a link of a chain moves, say)."""
        doc_id = data.draw(st.sampled_from(sorted(self.model)))
        text = _POOL[data.draw(st.sampled_from(_IDS))]
        self.index.add([(doc_id, text)])
        self.model[doc_id] = text

    @rule(ids=st.lists(st.sampled_from(_IDS), max_size=4, unique=True))
    def remove(self, ids: list[str]) -> None:
        self.index.remove(ids)
        for i in ids:
            self.model.pop(i, None)

    @rule(
        change=st.sampled_from(
            [{"dense_cluster_size": 3}, {"dense_cluster_size": 8}, {"bands": 32, "rows": 2}]
        )
    )
    def rebuild(self, change: dict[str, Any]) -> None:
        self.index.rebuild(**{"bands": 64, "rows": 2, **change})  # bands kept: brute force stays the answer

    @invariant()
    def clusters_and_pairs_are_brute_forces(self) -> None:
        check(self.index, sorted(self.model.items()))

    def teardown(self) -> None:
        self.index.close()


def test_dense_clusters_match_brute_force_under_any_interleaving(
    database_url: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    DenseMachine.url, DenseMachine.schema = database_url, schema
    run_state_machine_as_test(
        DenseMachine,
        settings=settings(
            max_examples=12,
            stateful_step_count=8,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
