"""The changes feed on a real PostgreSQL: replaying it gives the collection's documents and pairs,
cluster events, retention, turning it on and off, longpoll, and consumers racing writers."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from neardup.database import Change, ChangesPage, Database
from neardup.errors import ChangesFeedError, ChangesGoneError, ParamsError
from neardup.index import Index
from tests._corpus import planted_corpus
from tests.conftest import psycopg_url

pytestmark = pytest.mark.distributed_variant

# Wide bands: at these similarities LSH misses nothing, so every pair the feed names is the truth's.
GENEROUS: dict[str, Any] = {"threshold": 0.5, "bands": 64, "rows": 2}


def _replay(changes: list[Change]) -> tuple[set[str], dict[tuple[str, str], float]]:
    """The documents and pairs a consumer that applies ``changes`` in order holds."""
    docs: set[str] = set()
    pairs: dict[tuple[str, str], float] = {}
    for c in changes:
        if c.kind in ("document.added", "document.replaced"):
            assert c.id is not None
            assert (c.id in docs) == (c.kind == "document.replaced"), c
            docs.add(c.id)
        elif c.kind == "document.removed":
            assert c.id in docs, c
            docs.discard(c.id)
        elif c.kind == "pair.added":
            assert c.id_a is not None
            assert c.id_b is not None
            assert c.jaccard is not None
            pairs[(c.id_a, c.id_b)] = c.jaccard
        elif c.kind == "pair.removed":
            assert (c.id_a, c.id_b) in pairs, c
            del pairs[(c.id_a, c.id_b)]  # type: ignore[arg-type]
    return docs, pairs


def _all(db: Database, name: str, since: int = 0, limit: int = 1000) -> list[Change]:
    out: list[Change] = []
    while True:
        page = db.changes(name, since, limit=limit)
        out += page.changes
        if not page.changes:
            return out
        since = page.last_seq


def _stored_ids(db: Database, name: str, ids: set[str]) -> set[str]:
    review = db.review(name)
    return {i for i in ids if review.document(i) is not None}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_replaying_the_feed_gives_the_documents_and_pairs_after_every_write(
    make_index: Callable[..., Index], database_url: str, schema: str, seed: int
) -> None:
    rng = random.Random(seed)
    texts = dict(planted_corpus(n_sources=6, copies=3, seed=seed))
    ids = sorted(texts)
    index = make_index(changes_feed=True, **GENEROUS)
    db = Database(database_url, schema)
    try:
        for step in range(14):
            op = rng.choice(["add", "add", "replace", "remove"]) if step else "add"
            chosen = rng.sample(ids, rng.randint(1, 6))
            if op == "remove":
                index.remove(chosen)
            else:
                # A replacement takes another document's text: copies of one text share a content.
                other = {i: texts[rng.choice(ids)] if op == "replace" else texts[i] for i in chosen}
                index.add(list(other.items()), batch_size=rng.choice([None, 2]))
            if step == 10:
                index.rebuild(0.6, bands=64, rows=2)
            docs, pairs = _replay(_all(db, index.name))
            assert docs == _stored_ids(db, index.name, set(ids))
            assert pairs == {(a, b): pytest.approx(j) for a, b, j in index.pairs()}
    finally:
        db.close()


def test_a_chain_merges_two_clusters_and_removing_its_link_splits_them(
    make_index: Callable[..., Index], database_url: str, schema: str
) -> None:
    words = [f"w{i}" for i in range(40)]
    left = " ".join(words[:30])
    link = " ".join(words[5:35])
    right = " ".join(words[10:40])
    index = make_index(changes_feed=True, threshold=0.6, bands=64, rows=2)
    index.add([("left", left), ("left2", left + " x"), ("right", right), ("right2", right + " y")])
    with Database(database_url, schema) as db:
        start = db.changes(index.name, 0).last_seq
        index.add([("link", link)])
        merged = [c for c in _all(db, index.name, start) if c.kind == "cluster.merged"]
        assert len(merged) == 1
        assert merged[0].clusters is not None
        kept = merged[0].cluster
        # The link came new: the older of the two clusters absorbed the other (README, "Cluster ids").
        assert len(merged[0].clusters) == 1
        assert kept not in merged[0].clusters
        start = db.changes(index.name, start).last_seq
        index.remove(["link"])
        split = [c for c in _all(db, index.name, start) if c.kind == "cluster.split"]
        assert [c.cluster for c in split] == [kept]
        assert split[0].clusters is not None
        assert len(split[0].clusters) == 2


def test_a_collection_without_the_feed_writes_no_change(
    make_index: Callable[..., Index], database_url: str, schema: str
) -> None:
    index = make_index(**GENEROUS)
    index.add(planted_corpus(n_sources=3, copies=2, seed=4))
    index.remove(["s000"])
    with Database(database_url, schema) as db, pytest.raises(ChangesFeedError, match="keeps no changes feed"):
        db.changes(index.name)
    with psycopg.connect(psycopg_url(database_url)) as conn:
        row = conn.execute(
            f'SELECT count(*) FROM "{schema}".changes c JOIN "{schema}".collections k USING (collection_id) '
            "WHERE k.name = %s",
            (index.name,),
        ).fetchone()
    assert row == (0,)
    assert "changes" not in index.stats().bytes_by_table


def test_turned_on_later_it_answers_from_then_and_off_and_on_again_refuses_old_readers(
    make_index: Callable[..., Index], database_url: str, schema: str
) -> None:
    index = make_index(**GENEROUS)
    index.add([("a", "one text of words here")])
    with Database(database_url, schema) as db:
        db.changes_feed(index.name, True)
        start = db.changes(index.name, db.changes(index.name, 1).last_seq).last_seq
        # 0 is a new consumer's since: every change kept, none yet (the write to a was never
        # recorded), and each write from then on.
        assert db.changes(index.name, 0) == ChangesPage([], start)
        index.add([("b", "another text of words")])
        assert [(c.kind, c.id) for c in db.changes(index.name, start).changes] == [("document.added", "b")]
        assert db.changes(index.name, 0) == db.changes(index.name, start)
        seen = db.changes(index.name, start).last_seq
        db.changes_feed(index.name, False)
        index.add([("c", "a third text, written while the feed was off")])
        db.changes_feed(index.name, True)
        with pytest.raises(ChangesGoneError):
            db.changes(index.name, seen)  # the write to c would be missed
        with pytest.raises(ParamsError, match="ahead of the changes"):
            db.changes(index.name, seen + 100)
        assert index.stats().bytes_by_table.get("changes") is None  # off deleted them; none since


def test_changes_older_than_the_retention_go_and_their_since_is_refused(
    make_index: Callable[..., Index], database_url: str, schema: str
) -> None:
    index = make_index(changes_feed=True, changes_retention_hours=1, **GENEROUS)
    index.add([("a", "first text of several words"), ("b", "second text of several words")])
    with psycopg.connect(psycopg_url(database_url), autocommit=True) as conn:
        # The collection's id first: on Citus a statement that reads the collections (a reference
        # table) is planned as a distributed one, which takes no time zone's arithmetic in an UPDATE.
        (cid,) = conn.execute(
            f'SELECT collection_id FROM "{schema}".collections WHERE name = %s', (index.name,)
        ).fetchone() or (None,)
        conn.execute(
            f"UPDATE \"{schema}\".changes SET at = at - interval '2 hours' WHERE collection_id = %s", (cid,)
        )
    with Database(database_url, schema) as db:
        aged = db.changes(index.name, 0).last_seq
        index.add([("c", "third text of several words")])  # a write prunes
        with pytest.raises(ChangesGoneError, match=f"answers from since={aged}"):
            db.changes(index.name, aged - 1)
        assert next((c.kind, c.id) for c in db.changes(index.name, aged).changes) == ("document.added", "c")
    assert index.stats().bytes_by_table["changes"][0] > 0


def test_bad_settings_and_requests_are_refused(
    make_index: Callable[..., Index], database_url: str, schema: str
) -> None:
    with pytest.raises(ParamsError, match="give it with changes_feed"):
        make_index(changes_retention_hours=5)
    with pytest.raises(ParamsError, match=r"in \[1, 1000000\]"):
        make_index(changes_feed=True, changes_retention_hours=0)
    index = make_index(changes_feed=True)
    with Database(database_url, schema) as db:
        for bad in ({"since": -1}, {"limit": 0}, {"timeout": -1.0}, {"since": True}):
            with pytest.raises(ParamsError):
                db.changes(index.name, **bad)


def test_a_longpoll_returns_the_write_that_commits_while_it_waits(
    make_index: Callable[..., Index], database_url: str, schema: str
) -> None:
    index = make_index(changes_feed=True)
    got: list[Any] = []
    with Database(database_url, schema) as db:

        def wait() -> None:
            got.append(db.changes(index.name, 0, timeout=300))

        waiter = threading.Thread(target=wait)
        waiter.start()
        index.add([("late", "a text that arrives while the reader waits")])
        waiter.join(120)  # a liveness bound far above the wait, which ends at the commit's NOTIFY
        assert not waiter.is_alive()
    assert [(c.kind, c.id) for c in got[0].changes] == [("document.added", "late")]


def test_consumers_racing_writers_see_every_write_once_in_commit_order(
    make_index: Callable[..., Index], database_url: str, schema: str
) -> None:
    first = make_index(changes_feed=True, **GENEROUS)
    name, n_writers, rounds = first.name, 4, 12
    done = threading.Event()
    expected: dict[int, list[tuple[str, str]]] = {w: [] for w in range(n_writers)}
    errors: list[BaseException] = []

    def writer(w: int) -> None:
        rng = random.Random(w)
        try:
            with Index.open(database_url, name, schema=schema) as index:
                for r in range(rounds):
                    mine = [f"w{w}.{r}.{k}" for k in range(2)]
                    index.add(
                        [(i, f"writer {w} round {r} doc {i} " + " ".join(map(str, range(r)))) for i in mine]
                    )
                    expected[w] += [("document.added", i) for i in mine]
                    if rng.random() < 0.4:
                        index.remove(mine[:1])
                        expected[w].append(("document.removed", mine[0]))
        except BaseException as exc:
            errors.append(exc)

    seen: dict[str, list[Change]] = {"poll": [], "longpoll": []}

    def consumer(kind: str) -> None:
        since = 0
        try:
            with Database(database_url, schema) as db:
                while True:
                    finished = done.is_set()  # read before the page: a page after it sees every write
                    page = db.changes(name, since, limit=5, timeout=1.0 if kind == "longpoll" else 0)
                    seen[kind] += page.changes
                    since = page.last_seq
                    if finished and not page.changes:
                        return
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(n_writers)]
    readers = [threading.Thread(target=consumer, args=(k,)) for k in seen]
    for t in readers + threads:
        t.start()
    for t in threads:
        t.join()
    done.set()
    for t in readers:
        t.join()
    assert not errors, errors
    with Database(database_url, schema) as db:
        whole = _all(db, name)
    seqs = [c.seq for c in whole]
    assert seqs == sorted(set(seqs)) == list(range(1, len(whole) + 1))
    for kind, got in seen.items():
        assert [c.seq for c in got] == seqs, kind  # nothing skipped, nothing twice
    documents = [(c.kind, c.id) for c in whole if c.kind.startswith("document.")]
    for w in range(n_writers):
        # Each writer's own writes, in the order it committed them, and nobody else's under its ids.
        assert [d for d in documents if d[1] is not None and d[1].startswith(f"w{w}.")] == expected[w]
    assert len(documents) == sum(map(len, expected.values()))


def test_parallel_writer_processes_feed_it_as_one_writer_would(
    make_index: Callable[..., Index], database_url: str, schema: str
) -> None:
    index = make_index(changes_feed=True, **GENEROUS)
    docs = planted_corpus(n_sources=20, copies=2, seed=9)
    index.add(docs, jobs=2, batch_size=10)  # writers that write contents before their turns
    with Database(database_url, schema) as db:
        documents, pairs = _replay(_all(db, index.name))
    assert documents == {i for i, _ in docs}
    assert pairs == {(a, b): pytest.approx(j) for a, b, j in index.pairs()}


@pytest.mark.parametrize("hours", [0, 1_000_001, 24_000_000_000])
def test_a_retention_out_of_range_is_refused_naming_its_range(
    make_index: Callable[..., Any], hours: int
) -> None:
    with pytest.raises(ParamsError, match=r"changes_retention_hours .* in \[1, 1000000\]"):
        make_index(changes_feed=True, changes_retention_hours=hours, **GENEROUS)
