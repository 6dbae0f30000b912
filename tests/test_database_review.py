"""The review loop's reads through the Database facade, each against a brute-force computation
over the whole pair listing: the queue's order (nearest the threshold first, unlabelled only),
its position count, the pairs list's filters and orders, titles, labels and counts."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

import pytest

from neardup.database import Database, PairQuery, PairRow, Review
from tests.service.review_data import documents

pytestmark = pytest.mark.distributed_variant

THRESHOLD = 0.3
QUEUE = PairQuery("queue", "unlabelled")
# Labelled before the checks: (id_a, id_b, label), each a stored pair of the collection.
LABELLED = (("storm/ap", "storm/moved", "duplicate"), ("council/1", "council/2", "not_duplicate"))


@pytest.fixture
def review(database_url: str, schema: str) -> Iterator[tuple[Database, Review]]:
    name = "review-loop"
    with Database(database_url, schema) as db:
        db.drop(name)
        with db.create(name, THRESHOLD) as index:
            index.add([(d["id"], d["text"], d.get("meta")) for d in documents()])
        for a, b, label in LABELLED:
            db.labels.put(name, a, b, label, "", None, "test")
        yield db, db.review(name)
        db.drop(name)


def _everything(here: Review) -> list[tuple[str, str, float, str]]:
    """Every pair of documents, by the plain listing (ids order), page by page."""
    rows, after = [], None
    while page := here.pairs_page(0.0, after, 7):
        rows += page
        after = (page[-1][0], page[-1][1])
    return rows


def _walk(here: Review, query: PairQuery) -> list[PairRow]:
    """Every row of a listing, a few at a time, each page starting after the last key."""
    rows: list[PairRow] = []
    while page := here.pair_rows(
        replace(query, after=(rows[-1].key, rows[-1].id_a, rows[-1].id_b) if rows else None), 3
    ):
        rows += page
    return rows


def test_the_queue_is_the_unlabelled_pairs_nearest_the_threshold_first(
    review: tuple[Database, Review],
) -> None:
    db, here = review
    every = _everything(here)
    assert len(every) >= 10  # enough pairs for the order to mean something
    labels = {(r.id_a, r.id_b): r.label for r in db.labels.export(here.name)}
    assert set(labels) == {(a, b) for a, b, _ in LABELLED}
    brute = sorted(
        ((abs(s - THRESHOLD), a, b) for a, b, s, _ in every if (a, b) not in labels),
    )
    queue = _walk(here, QUEUE)
    assert [(r.key, r.id_a, r.id_b) for r in queue] == brute  # the same doubles: abs(s - t) both
    assert [(r.id_a, r.id_b) for r in queue] == [(a, b) for _, a, b in brute]
    assert all(r.label is None for r in queue)
    # Its position and what is left, counted as the brute force counts them.
    assert here.queue_counts(None) == (0, len(brute))
    for i, r in enumerate(queue):
        assert here.queue_counts((r.key, r.id_a, r.id_b)) == (i, len(brute))
    # Backwards from the end gives the same pairs in reverse; "inclusive" starts at a key.
    last = queue[-1]
    back = here.pair_rows(replace(QUEUE, after=(last.key, last.id_a, last.id_b), descending=True), 100)
    assert [(r.id_a, r.id_b) for r in back] == [(r.id_a, r.id_b) for r in reversed(queue[:-1])]
    third = queue[2]
    at = here.pair_rows(replace(QUEUE, after=(third.key, third.id_a, third.id_b), inclusive=True), 1)
    assert at == [third]
    # Labelling the head of the queue takes it out, and the rest keep their order.
    db.labels.put(here.name, queue[0].id_a, queue[0].id_b, "duplicate", "", None, "test")
    assert [(r.id_a, r.id_b) for r in _walk(here, QUEUE)] == [(r.id_a, r.id_b) for r in queue[1:]]
    assert here.queue_counts(None) == (0, len(brute) - 1)


def test_the_pairs_list_filters_and_orders_as_brute_force_does(review: tuple[Database, Review]) -> None:
    _db, here = review
    verdicts = {(a, b): label for a, b, label in LABELLED}
    every = _everything(here)
    keep: dict[str, Callable[[str | None], bool]] = {
        "all": lambda v: True,
        "unlabelled": lambda v: v is None,
        "labelled": lambda v: v is not None,
        "duplicate": lambda v: v == "duplicate",
        "not_duplicate": lambda v: v == "not_duplicate",
    }
    for labels, wanted in keep.items():
        for low, high in ((0.0, 1.0), (0.4, 0.9), (1.0, 1.0)):
            for descending in (True, False):
                brute = sorted(
                    ((s, a, b, verdicts.get((a, b))) for a, b, s, _ in every if low <= s <= high),
                    reverse=descending,
                )
                brute = [row for row in brute if wanted(row[3])]
                rows = _walk(here, PairQuery("similarity", labels, low, high, None, descending))
                assert [(r.similarity, r.id_a, r.id_b, r.label) for r in rows] == brute, (labels, low, high)


def test_counts_titles_and_labels_of(review: tuple[Database, Review]) -> None:
    db, here = review
    every = _everything(here)
    counts = here.counts()
    info = db.info(here.name)
    assert counts["documents"] == info.documents == len(documents())
    assert counts["clusters"] == info.clusters
    assert counts["document_pairs"] == len(every)
    assert (counts["labelled"], counts["left"]) == (len(LABELLED), len(every) - len(LABELLED))
    titles = here.titles(["storm/ap", "council/1", "storm/moved", "nope"])
    assert titles["storm/ap"] == "Storms cut power in the valley"  # meta's title
    assert titles["council/1"] == "Council passes budget"  # meta's headline
    assert titles["storm/moved"].startswith("Storms cut power to 40,000 homes")  # the text's start
    assert titles["storm/moved"].endswith("…")
    assert len(titles["storm/moved"]) <= 120
    assert "nope" not in titles
    assert here.labels_of([("storm/moved", "storm/ap"), ("council/1", "council/2"), ("storm/ap", "x")]) == {
        ("storm/ap", "storm/moved"): "duplicate",
        ("council/1", "council/2"): "not_duplicate",
    }
    assert here.params().k == 5


def test_the_counts_of_several_collections_read_together_are_each_ones(
    review: tuple[Database, Review],
) -> None:
    db, here = review
    other = f"{here.name}-other"
    db.drop(other)
    with db.create(other, THRESHOLD) as index:
        index.add([(d["id"], d["text"]) for d in documents()[::2]])  # another collection, unlabelled
    empty = f"{here.name}-empty"
    db.drop(empty)
    db.create(empty, THRESHOLD).close()
    try:
        together = db.review_counts([here.name, other, empty])
        assert together == {n: db.review(n).counts() for n in (here.name, other, empty)}
        assert together[here.name]["labelled"] == len(LABELLED)
        assert together[other]["document_pairs"] > 0
        assert together[empty] == dict.fromkeys(
            ("documents", "clusters", "document_pairs", "labelled", "left", "estimated"), 0
        )
    finally:
        db.drop(other)
        db.drop(empty)
