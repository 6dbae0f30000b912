"""The pooled connections of a Database: a bounded number open at once, more callers waiting."""

import threading

import psycopg
import pytest

from neardup.errors import DatabaseConnectionError
from neardup.storage import pool as pool_module
from neardup.storage.pool import ConnectionPool
from tests.conftest import psycopg_url


def _backends(url: str, name: str) -> int:
    with psycopg.connect(psycopg_url(url), autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (name,)
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_callers_past_the_bound_wait_for_a_connection_and_never_open_one_more(
    database_url: str, schema: str
) -> None:
    name = "neardup-pool-test"
    url = database_url + ("&" if "?" in database_url else "?") + f"application_name={name}"
    pool = ConnectionPool(url, schema, keep=2, most=3)
    held = threading.Barrier(4)  # three holders and this thread
    release = threading.Event()
    entered: list[int] = []
    lock = threading.Lock()

    def hold(i: int) -> None:
        with pool.scope() as scope:
            scope.conn.execute("SELECT 1")
            with lock:
                entered.append(i)
            if i < 3:
                held.wait()
                release.wait(30)

    threads = [threading.Thread(target=hold, args=(i,)) for i in range(5)]
    for t in threads:
        t.start()
    held.wait()  # the three first callers hold every connection the pool may open
    assert _backends(database_url, name) == 3
    with lock:
        assert sorted(entered) == [0, 1, 2]  # the other two wait
    release.set()
    for t in threads:
        t.join(30)
    assert sorted(entered) == [0, 1, 2, 3, 4]
    assert pool.idle() == 2  # at most `keep` stay open afterwards
    pool.close()


def test_a_caller_that_waits_too_long_is_told_the_database_is_busy(
    database_url: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pool_module, "WAIT_SECONDS", 0.2)
    pool = ConnectionPool(database_url, schema, keep=1, most=1)
    with pool.scope(), pytest.raises(DatabaseConnectionError, match="stayed in use"), pool.scope():
        pass
    with pool.scope() as scope:  # the slot came back: the pool still works
        assert scope.conn.execute("SELECT 2").fetchone() == (2,)
    pool.close()
