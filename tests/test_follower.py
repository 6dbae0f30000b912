"""Following a table (neardup.follower) against a real PostgreSQL: the first indexing, inserts,
updates, deletes, id changes and TRUNCATE kept up with; a follower killed with SIGKILL mid-run and
restarted ends equal to a fresh build of the table, whether the index lives in the table's own
database or in another one; a failed batch leaves the queue and the index as they were."""

from __future__ import annotations

import hashlib
import os
import random
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql
from sqlalchemy.engine import make_url

from neardup import follower as follow
from neardup.embedded.private_server import LocalServer, throwaway_server
from neardup.errors import DatabaseConnectionError, DatabaseError, ParamsError, SchemaError
from neardup.index import Index
from neardup.storage import follow_queue as queue
from tests._state import collection_state
from tests.conftest import Run, neardup_argv, psycopg_url

pytestmark = pytest.mark.distributed_variant

WORDS = [f"w{i}" for i in range(40)]


@pytest.fixture
def source_schema(database_url: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """A schema of the test database for the followed tables of one test, dropped afterwards."""
    unique = hashlib.blake2b(request.node.name.encode(), digest_size=4).hexdigest()
    name = f"nd_src_{os.getpid()}_{unique}"
    with psycopg.connect(psycopg_url(database_url), autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
    yield name
    with psycopg.connect(psycopg_url(database_url), autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(name)))


@pytest.fixture(scope="module")
def other_database(database_url: str) -> Iterator[str]:
    """The URL of a second database on the same server, dropped afterwards."""
    name = f"nd_follow_{os.getpid()}"
    with psycopg.connect(psycopg_url(database_url), autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    yield make_url(database_url).set(database=name).render_as_string(hide_password=False)
    with psycopg.connect(psycopg_url(database_url), autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def _execute(url: str, statement: sql.Composed | sql.SQL | str, params: Any = None) -> list[tuple[Any, ...]]:
    with psycopg.connect(psycopg_url(url), autocommit=True) as conn:
        cur = conn.execute(statement, params)
        return cur.fetchall() if cur.description else []


def _make_table(url: str, schema: str, rows: int, seed: int = 0) -> str:
    """Table ``schema.articles(id text, body text, tag int)`` with ``rows`` rows, some near copies."""
    table = sql.Identifier(schema, "articles")
    _execute(url, sql.SQL("CREATE TABLE {} (id text PRIMARY KEY, body text, tag int)").format(table))
    rng = random.Random(seed)
    texts: list[str] = []
    with psycopg.connect(psycopg_url(url), autocommit=True) as conn:
        for i in range(rows):
            text = _text(rng, texts)
            texts.append(text)
            conn.execute(sql.SQL("INSERT INTO {} VALUES (%s, %s, %s)").format(table), (f"a{i}", text, i % 7))
    return f"{schema}.articles"


def _text(rng: random.Random, earlier: list[str]) -> str:
    """A new text, or (often) an earlier one with a word changed: a near-duplicate."""
    if earlier and rng.random() < 0.5:
        words = rng.choice(earlier).split()
        words[rng.randrange(len(words))] = rng.choice(WORDS)
        return " ".join(words)
    return " ".join(rng.choice(WORDS) for _ in range(30))


def _fresh_build(
    source_url: str, table: str, index_url: str, schema: str, name: str, meta: bool = True
) -> None:
    """A new collection ``name`` built from the table as it is now (rows with a text)."""
    schema_name, table_name = table.split(".")
    rows = _execute(
        source_url,
        sql.SQL("SELECT id::text, body, tag FROM {} WHERE body IS NOT NULL").format(
            sql.Identifier(schema_name, table_name)
        ),
    )
    with Index.create(index_url, name, schema=schema) as index:
        index.add([(i, body, {"tag": tag} if meta else None) for i, body, tag in rows])


def _queued(url: str, schema: str, table: str) -> int:
    """The changes queued for ``table`` (schema.table) in ``schema``'s queue."""
    statement = sql.SQL(
        "SELECT count(*) FROM {}.follow_queue WHERE source_schema || '.' || source_table = %s"
    )
    return int(_execute(url, statement.format(sql.Identifier(schema)), (table,))[0][0])


def _source(url: str, table: str, schema: str) -> follow.Source:
    return follow.Source(url, table, "id", "body", ("tag",), schema)


# -- the crash test: 2,000 random writes, the follower killed twice ---------------------------------


def _random_writes(url: str, table: str, count: int, seed: int) -> Iterator[int]:
    """``count`` random inserts, updates (of the text, of the id, to a NULL text) and deletes, in
    transactions of one to three; yields the number done after each transaction."""
    schema_name, table_name = table.split(".")
    t = sql.Identifier(schema_name, table_name)
    rng = random.Random(seed)
    with psycopg.connect(psycopg_url(url), autocommit=True) as conn:
        ids = [r[0] for r in conn.execute(sql.SQL("SELECT id FROM {}").format(t)).fetchall()]
        texts = [r[0] for r in conn.execute(sql.SQL("SELECT body FROM {} WHERE body IS NOT NULL").format(t))]
        done, fresh = 0, 0
        while done < count:
            with conn.transaction():
                for _ in range(min(rng.randint(1, 3), count - done)):
                    op = rng.random()
                    if op < 0.35 or not ids:
                        fresh += 1
                        text = _text(rng, texts)
                        texts.append(text)
                        ids.append(f"n{fresh}")
                        conn.execute(
                            sql.SQL("INSERT INTO {} VALUES (%s, %s, %s)").format(t),
                            (ids[-1], text, fresh % 5),
                        )
                    elif op < 0.70:
                        text = _text(rng, texts)
                        texts.append(text)
                        conn.execute(
                            sql.SQL("UPDATE {} SET body = %s WHERE id = %s").format(t),
                            (text, rng.choice(ids)),
                        )
                    elif op < 0.90:
                        victim = ids.pop(rng.randrange(len(ids)))
                        conn.execute(sql.SQL("DELETE FROM {} WHERE id = %s").format(t), (victim,))
                    elif op < 0.95:
                        old = ids.pop(rng.randrange(len(ids)))
                        fresh += 1
                        ids.append(f"n{fresh}")
                        conn.execute(sql.SQL("UPDATE {} SET id = %s WHERE id = %s").format(t), (ids[-1], old))
                    else:
                        conn.execute(
                            sql.SQL("UPDATE {} SET body = NULL WHERE id = %s").format(t), (rng.choice(ids),)
                        )
                    done += 1
            yield done


def _draining(url: str, schema: str, table: str, proc: subprocess.Popen[bytes], log: Any) -> None:
    """Wait until the follower has taken changes off the queue since now: it is draining."""
    before = _queued(url, schema, table)
    deadline = time.monotonic() + 300
    while _queued(url, schema, table) >= before:
        assert proc.poll() is None, log.read_text()
        assert time.monotonic() < deadline, "the follower applied nothing"
        time.sleep(0.05)


def _interruptible() -> None:
    """In the child before it runs: Ctrl-C at its default. A shell that starts a job in the
    background without job control ignores SIGINT, and an ignored signal stays ignored across exec,
    so a suite started that way would otherwise ask a follower to stop in a way it cannot hear."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(argv: list[str], log: Any, stderr: Any = None) -> subprocess.Popen[bytes]:
    """A follower (``neardup ... follow``) that stops on SIGINT, as it does in a terminal."""
    return subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=log if stderr is None else stderr, preexec_fn=_interruptible
    )


@pytest.mark.parametrize("where", ["same database", "other database"])
def test_follower_killed_twice_ends_equal_to_a_fresh_build(
    where: str,
    database_url: str,
    schema: str,
    source_schema: str,
    request: pytest.FixtureRequest,
    tmp_path: Any,
) -> None:
    if where == "same database":
        index_url, index_schema = database_url, schema
    else:
        index_url, index_schema = request.getfixturevalue("other_database"), f"nd_idx_{os.getpid()}"
        # The queue's schema in the table's database, made by --install.
        drop = sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(index_schema))
        request.addfinalizer(lambda: _execute(database_url, drop))
    table = _make_table(database_url, source_schema, 300, seed=1)
    argv = neardup_argv(
        index_url,
        index_schema,
        "followed",
        "follow",
        "--source-db",
        database_url,
        "--table",
        table,
        "--text-column",
        "body",
        "--meta-columns",
        "tag",
    )
    install = subprocess.run([*argv, "--install"], capture_output=True, text=True, timeout=120, check=False)
    assert install.returncode == 0, install.stderr
    assert "300 rows queued" in install.stderr
    log_path = tmp_path / "follower.log"
    with open(log_path, "ab") as log:
        # Small batches: many transactions, so that a kill falls inside one or between two.
        following = [*argv, "--batch-size", "25", "--poll", "1"]
        proc = _start(following, log)
        kills, rng = 0, random.Random(3)
        try:
            for done in _random_writes(database_url, table, 2_000, seed=2):
                # Kill it with a batch or more pending, once it is seen taking changes off the queue.
                if (
                    kills < 2
                    and done >= 700 * (kills + 1)
                    and _queued(database_url, index_schema, table) > 25
                ):
                    _draining(database_url, index_schema, table, proc, log_path)
                    time.sleep(rng.uniform(0, 0.3))  # then anywhere in a batch, or between two
                    assert proc.poll() is None, log_path.read_text()
                    proc.send_signal(signal.SIGKILL)
                    assert proc.wait(timeout=60) == -signal.SIGKILL
                    kills += 1
                    proc = _start(following, log)
            assert kills == 2
            deadline = time.monotonic() + 600
            while _queued(database_url, index_schema, table) and time.monotonic() < deadline:
                assert proc.poll() is None, log_path.read_text()
                time.sleep(0.5)
            assert _queued(database_url, index_schema, table) == 0, log_path.read_text()
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                proc.wait(timeout=60)
    assert log_path.read_text().count("applied") > 0
    _fresh_build(database_url, table, index_url, index_schema, "fresh")
    followed = collection_state(index_url, index_schema, "followed")
    fresh = collection_state(index_url, index_schema, "fresh")
    assert len(fresh.documents) > 300
    assert len(fresh.pairs) > 0
    assert followed.comparable() == fresh.comparable()
    # --once afterwards finds nothing left to do.
    once = subprocess.run([*argv, "--once"], capture_output=True, text=True, timeout=120, check=False)
    assert once.returncode == 0, once.stderr
    assert "applied 0 changes" in once.stderr
    uninstall = subprocess.run(
        [*argv, "--uninstall"], capture_output=True, text=True, timeout=120, check=False
    )
    assert uninstall.returncode == 0, uninstall.stderr


# -- the library: first indexing, each kind of write, failures -------------------------------------


def _follower(
    url: str, table: str, collection: str, schema: str, index_url: str | None = None, **kwargs: Any
) -> follow.Follower:
    source = _source(url, table, schema)
    return follow.Follower(source, index_url or url, collection, schema=schema, **kwargs)


def test_writes_during_and_after_the_first_indexing_are_followed(
    database_url: str, schema: str, source_schema: str, make_index: Any
) -> None:
    table = _make_table(database_url, source_schema, 50)
    assert follow.install(_source(database_url, table, schema)) == 50
    t = sql.Identifier(source_schema, "articles")
    # Written after the triggers and the snapshot: queued twice, applied once to effect.
    _execute(database_url, sql.SQL("UPDATE {} SET body = 'changed ' || body WHERE id = 'a1'").format(t))
    _execute(database_url, sql.SQL("DELETE FROM {} WHERE id = 'a2'").format(t))
    _execute(database_url, sql.SQL("UPDATE {} SET id = 'renamed' WHERE id = 'a3'").format(t))
    _execute(database_url, sql.SQL("UPDATE {} SET body = NULL WHERE id = 'a4'").format(t))
    index = make_index()
    with _follower(database_url, table, index.name, schema) as follower:
        assert follower.same_database
        applied = follower.drain(batch_size=7)
        assert applied.changes == 50 + 1 + 1 + 2 + 1
        # 50 rows, less a2 (deleted) and a4 (no text); a3 under its new id; a1 seen again, unchanged.
        assert applied.added.added == 48
        assert applied.added.unchanged == 1
        assert applied.removed == 0
        assert _queued(database_url, schema, table) == 0
        _execute(database_url, sql.SQL("TRUNCATE {}").format(t))
        _execute(database_url, sql.SQL("INSERT INTO {} VALUES ('x', 'a new text', 1)").format(t))
        applied = follower.drain()
        assert applied.removed == 48
        assert applied.added.added == 1
    _fresh_build(database_url, table, database_url, schema, f"{index.name}-fresh")
    assert collection_state(database_url, schema, index.name).comparable() == (
        collection_state(database_url, schema, f"{index.name}-fresh").comparable()
    )


def test_identifiers_are_quoted_and_ids_of_any_shape_bound(
    database_url: str, schema: str, source_schema: str, make_index: Any
) -> None:
    odd = sql.Identifier(source_schema, 'Art "icles"; DROP')
    ids = ["NULL", "a,b", "{x}", '"q"', "back\\slash", " sp", "é"]
    _execute(
        database_url,
        sql.SQL('CREATE TABLE {} ("Doc Id" text PRIMARY KEY, "Body Text" text, "Tag""s" int)').format(odd),
    )
    for n, doc_id in enumerate(ids):
        _execute(
            database_url, sql.SQL("INSERT INTO {} VALUES (%s, %s, %s)").format(odd), (doc_id, f"text {n}", n)
        )
    name = odd.as_string(None)
    source = follow.Source(database_url, name, "Doc Id", "Body Text", ('Tag"s',), schema)
    assert follow.install(source) == len(ids)
    index = make_index()
    with follow.Follower(source, database_url, index.name, schema=schema) as follower:
        assert follower.drain().added.added == len(ids)
        _execute(database_url, sql.SQL('DELETE FROM {} WHERE "Doc Id" = %s').format(odd), ("a,b",))
        assert follower.drain().removed == 1
    state = collection_state(database_url, schema, index.name)
    assert [(d[0], d[2]) for d in state.documents] == sorted(
        (i, {'Tag"s': n}) for n, i in enumerate(ids) if i != "a,b"
    )
    assert follow.uninstall(source)


def test_an_integer_id_column_is_read_through_its_index(
    database_url: str, schema: str, source_schema: str, make_index: Any
) -> None:
    t = sql.Identifier(source_schema, "numbered")
    _execute(database_url, sql.SQL("CREATE TABLE {} (id bigint PRIMARY KEY, text text)").format(t))
    _execute(
        database_url,
        sql.SQL("INSERT INTO {} SELECT g, 'number ' || g FROM generate_series(1, 20) g").format(t),
    )
    source = follow.Source(database_url, f"{source_schema}.numbered", "id", "text", (), schema)
    follow.install(source)
    index = make_index()
    with follow.Follower(source, database_url, index.name, schema=schema) as follower:
        assert follower.drain().added.added == 20
    assert sorted(d[0] for d in collection_state(database_url, schema, index.name).documents) == sorted(
        str(i) for i in range(1, 21)
    )


def test_same_database_batch_leaves_the_queue_in_the_index_transaction(
    database_url: str, schema: str, source_schema: str, make_index: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = _make_table(database_url, source_schema, 30)
    follow.install(_source(database_url, table, schema))
    index = make_index()
    real = follow._dequeue

    def crash_after_dequeue(conn: Any, queue_schema: str, seqs: Any) -> None:
        real(conn, queue_schema, seqs)
        raise DatabaseError("crashed before the commit")

    with _follower(database_url, table, index.name, schema) as follower:
        monkeypatch.setattr(follow, "_dequeue", crash_after_dequeue)
        with pytest.raises(DatabaseError, match="crashed"):
            follower.drain()
        # Rolled back together: nothing indexed, every change still queued.
        assert collection_state(database_url, schema, index.name).documents == []
        assert _queued(database_url, schema, table) == 30
        monkeypatch.setattr(follow, "_dequeue", real)
        assert follower.drain().added.added == 30
        assert _queued(database_url, schema, table) == 0


def test_other_database_batch_applied_again_after_a_crash_changes_nothing(
    database_url: str,
    other_database: str,
    source_schema: str,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    queue_schema = f"nd_other_{os.getpid()}"
    drop = sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(queue_schema))
    request.addfinalizer(lambda: _execute(database_url, drop))
    table = _make_table(database_url, source_schema, 30)
    follow.install(_source(database_url, table, queue_schema))
    real = queue.dequeue

    def crash(*args: Any) -> int:
        raise DatabaseError("crashed after the index committed")

    with _follower(database_url, table, "followed", queue_schema, index_url=other_database) as follower:
        assert not follower.same_database
        monkeypatch.setattr(queue, "dequeue", crash)
        with pytest.raises(DatabaseError, match="crashed"):
            follower.drain()
        assert len(collection_state(other_database, queue_schema, "followed").documents) == 30
        assert _queued(database_url, queue_schema, table) == 30
        before = collection_state(other_database, queue_schema, "followed")
        monkeypatch.setattr(queue, "dequeue", real)
        again = follower.drain()
        assert again.changes == 30
        assert again.added.unchanged == 30
        assert again.added.added == 0
        assert collection_state(other_database, queue_schema, "followed").comparable() == before.comparable()
        assert _queued(database_url, queue_schema, table) == 0


def test_bad_rows_are_skipped_naming_table_and_row_and_the_rest_of_the_batch_applied(
    database_url: str, schema: str, source_schema: str, make_index: Any
) -> None:
    t = sql.Identifier(source_schema, "posts")  # no key: two rows may share an id
    _execute(database_url, sql.SQL("CREATE TABLE {} (id text, body text, tag int)").format(t))
    rows = [
        ("g1", "a good row with some words in it"),
        ("x" * 3000, "an id the index cannot hold"),
        ("dup", "one of two rows sharing an id"),
        ("dup", "the other of the two rows"),
        ("big", "word " * 100),
        ("g2", "another good row of a few words"),
    ]
    for doc_id, text in rows:
        _execute(database_url, sql.SQL("INSERT INTO {} VALUES (%s, %s, 1)").format(t), (doc_id, text))
    _execute(database_url, sql.SQL("INSERT INTO {} VALUES ('huge', repeat('a', 10000001), 1)").format(t))
    table = f"{source_schema}.posts"
    follow.install(_source(database_url, table, schema))
    small, default = make_index(), make_index()
    warned: list[str] = []

    def stored(name: str) -> set[str]:
        return {d[0] for d in collection_state(database_url, schema, name).documents}

    with _follower(database_url, table, small.name, schema, max_text_length=200, warn=warned.append) as f:
        applied = f.drain()
        assert (applied.changes, applied.added.added, applied.skipped) == (7, 2, 4)
        assert stored(small.name) == {"g1", "g2"}
        assert _queued(database_url, schema, table) == 0  # nothing left to stop the next batch
        where = f'table "{source_schema}"."posts", row '
        long_id = f"{'x' * 3000!r:.80}"  # as messages cut a long id
        assert sorted(warned) == sorted(
            [
                f"{where}{long_id}: field 'id' is longer than 2000 bytes ({long_id}...); skipped",
                f"{where}'big': field 'text' has 500 characters, over the limit of 200 (--max-text-length); "
                "skipped",
                f"{where}'huge': field 'text' has 10,000,001 characters, over the limit of 200 "
                "(--max-text-length); skipped",
                f"{where}'dup': 2 rows have this id (the id column must be unique); skipped, the stored "
                "document left as it was",
            ]
        ), warned
        # Writes that fix two of the rows queue them again, and they are applied.
        _execute(database_url, sql.SQL("UPDATE {} SET body = 'short now' WHERE id = 'big'").format(t))
        _execute(
            database_url, sql.SQL("DELETE FROM {} WHERE id = 'dup' AND body LIKE 'the other%%'").format(t)
        )
        again = f.drain()
        assert again.skipped == 0
        assert stored(small.name) == {"g1", "g2", "big", "dup"}
    # With the limit add has (10,000,000 characters), only the text over it is refused.
    warned.clear()
    with _follower(database_url, table, default.name, schema, warn=warned.append) as f:
        _execute(database_url, sql.SQL("UPDATE {} SET tag = 2").format(t))  # queue every row again
        f.drain()
        assert stored(default.name) == {"g1", "g2", "big", "dup"}
        assert [w for w in warned if "'huge'" in w] == [
            f"{where}'huge': field 'text' has 10,000,001 characters, over the limit of 10,000,000 "
            "(--max-text-length); skipped"
        ]


def test_follow_refuses_what_it_cannot_follow(
    database_url: str, schema: str, source_schema: str, make_index: Any
) -> None:
    table = _make_table(database_url, source_schema, 3)
    index = make_index()
    install_first = r"install its triggers first with neardup\.follower\.install\(source\)"
    with pytest.raises(SchemaError, match=install_first):
        _follower(database_url, table, index.name, schema)
    with pytest.raises(ParamsError, match=r"^table 'nowhere\.none': no such table"):
        follow.install(_source(database_url, "nowhere.none", schema))
    with pytest.raises(ParamsError, match=r"^text column 'bodyy': table .* has no such column"):
        follow.install(follow.Source(database_url, table, "id", "bodyy", (), schema))
    follow.install(_source(database_url, table, schema))
    with pytest.raises(
        ParamsError,
        match=r"^id column 'tag': the triggers .* 'id'; to change it, install them again with neardup",
    ):
        follow.Follower(
            follow.Source(database_url, table, "tag", "body", (), schema),
            database_url,
            index.name,
            schema=schema,
        )
    with (
        _follower(database_url, table, index.name, schema),
        pytest.raises(DatabaseError, match="another follower"),
    ):
        _follower(database_url, table, index.name, schema, lock_wait=0.5)


def test_uninstall_leaves_nothing_behind(database_url: str, schema: str, source_schema: str) -> None:
    table = _make_table(database_url, source_schema, 3)
    follow.install(_source(database_url, table, schema))
    follow.install(_source(database_url, table, schema))  # again: the triggers replaced, rows queued again
    assert _queued(database_url, schema, table) == 6
    assert follow.uninstall(_source(database_url, table, schema))
    assert not follow.uninstall(_source(database_url, table, schema))
    left = _execute(
        database_url,
        "SELECT (SELECT count(*) FROM pg_trigger WHERE tgrelid = to_regclass(%s)), "
        "to_regclass(format('%%I.follow_queue', %s::text)), "
        "(SELECT count(*) FROM pg_proc WHERE proname = 'follow_enqueue_' || to_regclass(%s)::oid "
        "AND pronamespace = %s::regnamespace)",
        (table, schema, table, schema),
    )
    assert left == [(0, None, 0)]
    # The table's writers are no longer slowed by anything of neardup's.
    _execute(
        database_url,
        sql.SQL("INSERT INTO {} VALUES ('z', 'z', 0)").format(sql.Identifier(source_schema, "articles")),
    )


def test_a_waiting_follower_wakes_on_the_notification(
    database_url: str, schema: str, source_schema: str, make_index: Any
) -> None:
    table = _make_table(database_url, source_schema, 2)
    follow.install(_source(database_url, table, schema))
    index = make_index()
    argv = neardup_argv(
        database_url, schema, index.name, "follow", "--source-db", database_url, "--table", table,
        "--text-column", "body", "--meta-columns", "tag", "--poll", "3600",
    )  # fmt: skip
    proc = _start(argv, None, subprocess.PIPE)
    try:
        t = sql.Identifier(source_schema, "articles")
        deadline = time.monotonic() + 300
        while _queued(database_url, schema, table) and time.monotonic() < deadline:
            time.sleep(0.2)
        _execute(database_url, sql.SQL("INSERT INTO {} VALUES ('late', 'a late text', 1)").format(t))
        while "late" not in {d[0] for d in collection_state(database_url, schema, index.name).documents}:
            assert proc.poll() is None
            assert time.monotonic() < deadline
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err


def test_cli_install_once_uninstall(database_url: str, source_schema: str, cli: Run) -> None:
    table = _make_table(database_url, source_schema, 10)
    where = ["--source-db", database_url, "--table", table, "--text-column", "body"]
    status, _, err = cli("follow", *where, "--once")
    assert status == 1
    assert "install its triggers first with `neardup follow --install` with the same options" in err
    assert cli("follow", *where, "--install")[0] == 0
    status, _, err = cli("follow", *where, "--once")
    assert status == 0, err
    assert "applied 10 changes: added 10" in err
    status, out, _ = cli("stats", "--format", "tsv")
    assert "documents\t10" in out
    status, _, err = cli("follow", *where, "--uninstall")
    assert status == 0
    assert "no longer followed" in err
    status, _, err = cli(
        "follow", "--source-db", "postgresql://nobody:secret@127.0.0.1:1/x", "--table", table
    )
    assert status == 1
    assert "secret" not in err


def test_the_documented_grants_are_enough(
    database_url: str, other_database: str, request: pytest.FixtureRequest
) -> None:
    """Three roles with only what the README grants: the table's owner installs, a writer with no
    grant on neardup's schema writes, the follower follows into another database."""
    pid = os.getpid()
    owner, writer, follower = (f"nd_{role}_{pid}" for role in ("owner", "writer", "follower"))
    queue_schema, app = f"nd_grants_{pid}", f"nd_app_{pid}"
    test_db = str(make_url(database_url).database)
    superuser = [
        sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)) for role in (owner, writer, follower)
    ] + [
        sql.SQL("GRANT CREATE ON DATABASE {} TO {}").format(sql.Identifier(test_db), sql.Identifier(owner)),
        sql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(sql.Identifier(app), sql.Identifier(owner)),
        sql.SQL("GRANT CREATE ON DATABASE {} TO {}").format(
            sql.Identifier(str(make_url(other_database).database)), sql.Identifier(follower)
        ),
    ]

    def clean_up() -> None:
        _execute(database_url, sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(app)))
        _execute(
            database_url, sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(queue_schema))
        )
        _execute(
            other_database, sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(queue_schema))
        )
        for url in (database_url, other_database):
            for role in (owner, writer, follower):
                _execute(url, sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
        for role in (owner, writer, follower):
            _execute(database_url, sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))

    request.addfinalizer(clean_up)
    for statement in superuser:
        _execute(database_url, statement)

    def as_role(url: str, role: str) -> str:
        return make_url(url).set(username=role).render_as_string(hide_password=False)

    t = sql.Identifier(app, "articles")
    _execute(
        as_role(database_url, owner),
        sql.SQL("CREATE TABLE {} (id text PRIMARY KEY, body text, tag int)").format(t),
    )
    _execute(as_role(database_url, owner), sql.SQL("INSERT INTO {} VALUES ('a', 'first text', 1)").format(t))
    for grant in (
        sql.SQL("GRANT USAGE ON SCHEMA {} TO {}, {}").format(
            sql.Identifier(app), sql.Identifier(writer), sql.Identifier(follower)
        ),
        sql.SQL("GRANT INSERT, UPDATE, DELETE, SELECT ON {} TO {}").format(t, sql.Identifier(writer)),
        sql.SQL("GRANT SELECT ON {} TO {}").format(t, sql.Identifier(follower)),
    ):
        _execute(as_role(database_url, owner), grant)
    table = f"{app}.articles"
    assert follow.install(_source(as_role(database_url, owner), table, queue_schema)) == 1
    for grant in (
        sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(
            sql.Identifier(queue_schema), sql.Identifier(follower)
        ),
        sql.SQL("GRANT SELECT, DELETE ON {}.follow_queue TO {}").format(
            sql.Identifier(queue_schema), sql.Identifier(follower)
        ),
    ):
        _execute(as_role(database_url, owner), grant)
    _execute(
        as_role(database_url, writer), sql.SQL("INSERT INTO {} VALUES ('b', 'second text', 2)").format(t)
    )
    _execute(as_role(database_url, writer), sql.SQL("DELETE FROM {} WHERE id = 'a'").format(t))
    source = _source(as_role(database_url, follower), table, queue_schema)
    with follow.Follower(source, as_role(other_database, follower), "followed", schema=queue_schema) as f:
        applied = f.drain()
    assert applied.added.added == 1
    assert [d[0] for d in collection_state(other_database, queue_schema, "followed").documents] == ["b"]
    assert follow.uninstall(_source(as_role(database_url, owner), table, queue_schema))


# -- database restarts: a server of the test's own, stopped and started again -----------------------


@pytest.fixture
def own_server() -> Iterator[LocalServer]:
    """A throwaway server that the test may stop and start (the session's server stays up)."""
    with throwaway_server() as server:
        yield server


def _wait_until(check: Callable[[], bool], proc: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + 300
    while not check():
        assert proc is None or proc.poll() is None, proc.communicate(timeout=30)[1].decode()
        assert time.monotonic() < deadline
        time.sleep(0.2)


def _stored_or_none(url: str, schema: str, collection: str) -> set[str]:
    try:
        return {d[0] for d in collection_state(url, schema, collection).documents}
    except psycopg.Error:  # not created yet, or the server is starting
        return set()


def test_follow_connects_again_after_a_database_restart(own_server: LocalServer, source_schema: str) -> None:
    url = own_server.url
    _execute(url, sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(source_schema)))
    table = _make_table(url, source_schema, 5)
    follow.install(_source(url, table, "nd_restart"))
    argv = neardup_argv(
        url, "nd_restart", "restarted", "follow", "--source-db", url, "--table", table,
        "--text-column", "body", "--poll", "1",
    )  # fmt: skip
    proc = _start(argv, None, subprocess.PIPE)
    try:
        _wait_until(lambda: len(_stored_or_none(url, "nd_restart", "restarted")) == 5, proc)
        own_server.stop("fast")  # every connection is ended, as a restart ends them
        own_server.start()
        t = sql.Identifier(source_schema, "articles")
        _execute(url, sql.SQL("INSERT INTO {} VALUES ('after', 'written after the restart', 1)").format(t))
        _wait_until(lambda: "after" in _stored_or_none(url, "nd_restart", "restarted"), proc)
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    log = err.decode()
    assert "neardup: warning: lost the connection (" in log
    assert "connecting again in 1 s (try 1 of 10)" in log
    assert "neardup: warning: connected again; following " in log


def test_follow_gives_up_after_its_tries_saying_so(own_server: LocalServer, source_schema: str) -> None:
    url = own_server.url
    _execute(url, sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(source_schema)))
    table = _make_table(url, source_schema, 3)
    follow.install(_source(url, table, "nd_gone"))
    warned: list[str] = []
    with _follower(url, table, "gone", "nd_gone", warn=warned.append) as follower:
        follower.drain()
        own_server.stop("fast")
        with pytest.raises(DatabaseConnectionError, match=r"gave up after 2 tries to connect again"):
            follower.run(poll=1, reconnect_tries=2, reconnect_waits=(0.1, 0.2))
    assert [w.rsplit(" (", 1)[-1] for w in warned] == ["try 1 of 2)", "try 2 of 2)"]
    assert all(w.startswith("lost the connection (") for w in warned)
