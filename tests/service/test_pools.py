"""The pool of open indexes (service/pools.py): reuse, and nothing kept for unknown collections."""

from __future__ import annotations

import pytest

from neardup.database import Database
from neardup.errors import CollectionNotFoundError, ParamsError
from neardup.service.pools import BusyError, IndexPool

pytestmark = pytest.mark.distributed_variant


def test_an_index_is_reused_and_unknown_names_leave_no_slot(database_url: str, schema: str) -> None:
    with Database(database_url, schema) as db:
        db.drop("pooled")
        db.create("pooled", 0.5).close()
        pool = IndexPool(db, size=1)
        try:
            # While the one slot is taken, a caller that will not wait is told so.
            with pool.index("pooled") as first, pytest.raises(BusyError), pool.index("pooled", wait=False):
                pass
            with pool.index("pooled", wait=False) as again:
                assert again is first
            for name, error in (("no-such-collection", CollectionNotFoundError), ("bad name!", ParamsError)):
                with pytest.raises(error), pool.index(name):
                    pass
            assert set(pool._slots) == {"pooled"}
        finally:
            pool.close()
            db.drop("pooled")


def test_idle_indexes_are_capped_across_collections_least_recently_used_first(
    database_url: str, schema: str
) -> None:
    names = [f"capped-{i}" for i in range(4)]
    with Database(database_url, schema) as db:
        for name in names:
            db.drop(name)
            db.create(name, 0.5).close()
        pool = IndexPool(db, size=2, max_idle=2)
        try:
            used = {}
            for name in names:
                with pool.index(name) as index:
                    used[name] = index
            # Four collections served, two indexes (two connections) kept: the two used last.
            assert pool.idle() == 2
            assert sorted(pool._idle) == sorted(names)
            assert [n for n in names if pool._idle[n]] == names[2:]
            assert used["capped-0"]._conn.closed
            assert not used["capped-3"]._conn.closed
            with pool.index("capped-3") as again:
                assert again is used["capped-3"]
                assert pool.idle() == 1
            with pool.index("capped-0") as reopened:
                assert reopened is not used["capped-0"]
            assert pool.idle() == 2
        finally:
            pool.close()
            for name in names:
                db.drop(name)
