"""The pool of open indexes (service/pools.py): reuse, and nothing kept for unknown collections."""

from __future__ import annotations

import pytest

from neardup.database import Database
from neardup.errors import CollectionNotFoundError, ParamsError
from neardup.service.pools import BusyError, IndexPool


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
