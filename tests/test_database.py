"""The Database facade against a real PostgreSQL: schema, collections, review reads, tokens, labels."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import pytest

from neardup.config import CREATE_PARAMETERS, DEFAULT_THRESHOLD, PARAM_DEFAULTS, PARAM_FIELDS, PARAMETERS
from neardup.database import (
    ClusterRow,
    CollectionInfo,
    Database,
    DocumentRow,
    LabelRow,
    TokenRow,
)
from neardup.errors import (
    CollectionNotFoundError,
    DatabaseConnectionError,
    InputError,
    ParamsError,
    SchemaError,
)
from neardup.index import Index

pytestmark = pytest.mark.distributed_variant

TEXT = "Storms cut power to 40,000 homes across the northern valley on Tuesday night, officials said."
DOCS = [
    ("a", TEXT),
    ("b", TEXT.replace("40,000", "42,000")),
    ("c", TEXT),  # an identical copy of a
    ("d", "An unrelated note about the price of wheat in the spring markets of the south."),
]


@pytest.fixture
def db(database_url: str, schema: str) -> Iterator[Database]:
    with Database(database_url, schema) as database:
        yield database


@pytest.fixture
def filled(db: Database, request: pytest.FixtureRequest) -> Iterator[str]:
    """A collection of DOCS at threshold 0.5, named after the test; dropped afterwards."""
    name = f"db-{hashlib.blake2b(request.node.name.encode(), digest_size=4).hexdigest()}"
    db.drop(name)
    with db.create(name, 0.5) as index:
        index.add(DOCS)
    yield name
    db.drop(name)


def test_the_creation_parameters_are_those_of_index_create() -> None:
    import inspect

    create = inspect.signature(Index.create).parameters
    assert [p.name for p in CREATE_PARAMETERS] == [
        n for n in create if n not in ("url", "name", "schema", "exist_ok")
    ]
    for p in CREATE_PARAMETERS:
        assert create[p.name].default == p.default, p.name
        assert p.help
        assert isinstance(p.type, type)
    assert {n: PARAMETERS[n].default for n in PARAM_FIELDS} == PARAM_DEFAULTS
    assert PARAMETERS["threshold"].default == DEFAULT_THRESHOLD
    assert PARAMETERS["threshold"].range_text() == "(0, 1]"
    assert PARAMETERS["shards"].range_text() == "at least 1"
    assert PARAMETERS["case"].range_text() == "fold, lower, keep"
    assert not PARAMETERS["store_text"].rebuild
    assert PARAMETERS["k"].rebuild


def test_lifecycle_and_messages(database_url: str, schema: str) -> None:
    db = Database(database_url, schema)
    assert "***" in Database("postgresql://u:secret@h/d").url_redacted
    assert "secret" not in repr(Database("postgresql://u:secret@h/d"))
    with db:
        db.ping()
    with pytest.raises(ParamsError):
        Database(database_url, "Not A Schema")
    with pytest.raises(DatabaseConnectionError), Database("postgresql://nobody@127.0.0.1:1/none") as down:
        down.ping()


def test_schema_revisions(database_url: str, fresh_schema: str) -> None:
    with Database(database_url, fresh_schema) as db:
        assert db.revision() is None
        with pytest.raises(SchemaError):
            db.require_current()
        db.upgrade()
        assert db.revision() == db.head_revision() == Database.head_revision()
        db.require_current()
        db.upgrade()  # at the head already: nothing to do
        db.downgrade("base")
        assert db.revision() is None
        db.upgrade()
        assert db.revision() == db.head_revision()


def test_create_open_info_collections_drop(db: Database) -> None:
    name = "db-lifecycle"
    db.drop(name)
    with db.create(name, 0.6, k=4, store_text=False) as index:
        assert (index.threshold, index.params.k, index.store_text) == (0.6, 4, False)
        index.add(DOCS)
    with db.open(name) as index:
        assert index.name == name
    info = db.info(name)
    assert isinstance(info, CollectionInfo)
    assert (info.name, info.threshold, info.store_text, info.params["k"]) == (name, 0.6, False, 4)
    assert info.documents == 4
    listed = {c.name: c for c in db.collections()}
    assert listed[name] == info
    bare = {c.name: c for c in db.collections(counts=False)}[name]
    assert (bare.documents, bare.pairs, bare.clusters) == (None, None, None)
    assert [c.name for c in db.collections(counts=False)] == sorted(listed)
    assert db.drop(name) is True
    assert db.drop(name) is False
    assert name not in {c.name for c in db.collections(counts=False)}
    for call in (db.info, db.open, db.review):
        with pytest.raises(CollectionNotFoundError):
            call(name)
    with pytest.raises(ParamsError):
        db.drop("no/slashes")


def test_counts_and_review_reads(db: Database, filled: str) -> None:
    info = db.info(filled)
    assert (info.documents, info.clusters) == (4, 1)
    assert info.pairs == 1  # a-b; a and c are one text (an identical pair, not a stored one)
    review = db.review(filled)
    assert (review.name, review.threshold) == (filled, 0.5)
    pairs = review.pairs_page(None, None, 10)
    assert [(a, b) for a, b, _, _ in pairs] == [("a", "b"), ("a", "c"), ("b", "c")]
    assert review.pairs_page(1.0, None, 10) == [p for p in pairs if p[2] == 1.0]
    assert review.pairs_page(None, ("a", "b"), 1) == pairs[1:2]
    clusters = review.clusters_page(None, 10)
    assert clusters == [ClusterRow(clusters[0].cluster, 3, "a", ["a", "b", "c"])]
    assert review.clusters_page("a", 10) == []
    assert review.largest_clusters(None, 10, 2) == [ClusterRow(clusters[0].cluster, 3, "a", ["a", "b"])]
    assert [m for m, _ in review.cluster_members(clusters[0].cluster, 10)] == ["a", "b", "c"]
    assert len(review.cluster_pairs(clusters[0].cluster, 10)) >= 1
    doc = review.document("a")
    assert isinstance(doc, DocumentRow)
    assert doc.text == TEXT
    assert review.document("nope") is None
    assert [other for other, _, _ in review.document_pairs("a")] == ["c", "b"]
    assert review.pair("a", "c") == (1.0, "identical")
    assert review.pair("a", "d") is None


def test_labels(db: Database, filled: str) -> None:
    db.labels.put(filled, "b", "a", "duplicate", "same story", None, "tester")
    db.labels.put(filled, "a", "d", "not_duplicate")
    got = db.labels.get(filled, "a", "b")
    assert isinstance(got, LabelRow)
    assert (got.id_a, got.id_b, got.label, got.note, got.labelled_by) == (
        "a",
        "b",
        "duplicate",
        "same story",
        "tester",
    )
    assert db.labels.get(filled, "b", "c") is None
    assert [(r.id_a, r.id_b) for r in db.labels.export(filled)] == [("a", "b"), ("a", "d")]
    assert {(r.collection, r.id_a) for r in db.labels.export()} >= {(filled, "a")}
    assert db.labels.export("no-such-collection") == []
    assert db.labels.verdicts(filled) == (1, 0)  # a-d is no stored pair
    with pytest.raises(InputError):
        db.labels.put(filled, "a", "b", "maybe")
    with pytest.raises(CollectionNotFoundError):
        db.labels.put("no-such-collection", "a", "b", "duplicate")
    with pytest.raises(CollectionNotFoundError):
        db.labels.verdicts("no-such-collection")


def test_a_label_read_alone_shows_the_pairs_similarity_as_the_view_does(db: Database, filled: str) -> None:
    # A stored pair, two documents of one text (identical), and two documents that are no pair.
    for a, b in (("a", "b"), ("a", "c"), ("a", "d")):
        db.labels.put(filled, a, b, "duplicate")
    viewed = {(r.id_a, r.id_b): r for r in db.labels.export(filled)}
    for a, b in (("a", "b"), ("c", "a"), ("a", "d")):
        got = db.labels.get(filled, a, b)
        assert got == viewed[min(a, b), max(a, b)]
    assert viewed["a", "c"].method == "identical"
    assert viewed["a", "d"].similarity is None


def test_a_label_names_two_documents_of_the_collection(db: Database, filled: str) -> None:
    # Before: a label of ids that are no documents of the collection was stored.
    with pytest.raises(InputError, match="no document with id 'zz' in this collection"):
        db.labels.put(filled, "a", "zz", "duplicate")
    with pytest.raises(InputError, match="no document with id 'yy'"):
        db.labels.put(filled, "yy", "b", "not_duplicate")
    assert db.labels.export(filled) == []
    db.labels.put(filled, "b", "a", "duplicate")
    assert [(r.id_a, r.id_b) for r in db.labels.export(filled)] == [("a", "b")]


def test_tokens_and_sessions(database_url: str, fresh_schema: str) -> None:
    from neardup.credentials import digest

    with Database(database_url, fresh_schema) as db:
        token_id, secret = db.tokens.create("write", "news", "bot")  # migrates the new schema
        assert db.revision() == db.head_revision()
        other_id, other = db.tokens.create("read")
        listed = db.tokens.list()
        assert [t.token_id for t in listed] == [token_id, other_id]
        assert isinstance(listed[0], TokenRow)
        assert (listed[0].scope, listed[0].collection, listed[0].name) == ("write", "news", "bot")
        assert secret not in repr(listed)
        found = db.tokens.lookup(digest(secret))
        assert found is not None
        assert found.token_id == token_id
        assert db.tokens.lookup(digest("nd_unknown")) is None
        db.tokens.open_session(digest("cookie"), token_id, "csrf-value", 60)
        session = db.tokens.session(digest("cookie"))
        assert session is not None
        assert (session[0].token_id, session[1]) == (token_id, "csrf-value")
        db.tokens.close_session(digest("cookie"))
        assert db.tokens.session(digest("cookie")) is None
        db.tokens.open_session(digest("cookie2"), token_id, "x", 60)
        assert db.tokens.revoke(listed[0].prefix) == token_id  # by prefix; its sessions end
        assert db.tokens.session(digest("cookie2")) is None
        assert db.tokens.lookup(digest(secret)) is None
        with pytest.raises(ParamsError, match="no live token"):
            db.tokens.revoke(token_id)
        with pytest.raises(ParamsError, match="names no live tokens"):
            db.tokens.revoke("nd_nothing")
        assert db.tokens.revoke(str(other_id)) == other_id
        assert db.tokens.lookup(digest(other)) is None
        with pytest.raises(ParamsError, match="scope"):
            db.tokens.create("superuser")
        with pytest.raises(ParamsError):
            db.tokens.create("read", "bad/name")


def test_label_advice_against_brute_force(db: Database) -> None:
    from neardup.core.intervals import wilson

    name = "db-advice"
    db.drop(name)
    words = (TEXT + " and the lights came back on wednesday morning after long repairs").split()
    # Copies of one story with 0 to 15 words changed: pairs over a range of similarities.
    docs = [
        (f"s{n:02d}", " ".join(w if i % 16 >= n else f"x{i}{n}" for i, w in enumerate(words)))
        for n in range(16)
    ]
    with db.create(name, 0.3) as index:
        index.add(docs)
        pairs = list(index.pairs())
    for a, b, sim in pairs:
        db.labels.put(name, a, b, "duplicate" if sim >= 0.6 or (a, b) == ("s00", "s01") else "not_duplicate")
    for target in (0.8, 0.9, 0.99):
        got = db.labels.advise(name, target)
        expected = None
        for t in [0.3, *(round(0.05 * i, 10) for i in range(7, 20))]:
            above = [sim >= 0.6 or (a, b) == ("s00", "s01") for a, b, sim in pairs if sim >= t - 1e-9]
            if above and wilson(sum(above), len(above))[0] >= target:
                expected = (t, len(above), sum(above))
                break
        assert (got.threshold, got.labels, got.duplicates) == (expected or (None, 0, 0))
        assert got.total == len(pairs)
    with pytest.raises(ParamsError):
        db.labels.advise(name, 1.5)
    with pytest.raises(CollectionNotFoundError):
        db.labels.advise("no-such-collection")
    db.drop(name)
