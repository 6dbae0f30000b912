"""Listings stream one statement's rows on a connection of their own: in chunks where libpq can
(version 17 on), one row at a time before that, the same rows either way. Against a real PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest

from neardup.storage import listings
from tests._corpus import planted_corpus

pytestmark = pytest.mark.distributed_variant

EXHAUSTIVE = {"threshold": 0.5, "bands": 64, "rows": 2}


def test_a_listing_gives_the_same_rows_in_chunks_of_any_size_and_one_at_a_time(
    make_index: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = make_index(**EXHAUSTIVE)
    index.add(planted_corpus(n_sources=12, copies=3, seed=31))
    whole = (list(index.pairs()), list(index.clusters()))
    # several chunks of 7 below
    assert len(whole[0]) > 3 * 7
    assert len(whole[1]) > 7
    monkeypatch.setattr(listings, "_STREAM_ROWS", 7)
    assert (list(index.pairs()), list(index.clusters())) == whole
    monkeypatch.setattr(listings, "_CHUNKS_FROM_LIBPQ", 10**9)  # as with a libpq before 17
    assert (list(index.pairs()), list(index.clusters())) == whole


def test_a_listing_closed_early_leaves_the_index_usable(make_index: Any) -> None:
    index = make_index(**EXHAUSTIVE)
    docs = planted_corpus(n_sources=12, copies=3, seed=32)
    index.add(docs[:-3])
    listing = index.pairs()
    first = next(listing)
    listing.close()  # the statement still running is cancelled, its connection closed
    assert index.add(docs[-3:]).added == 3
    assert first in set(index.pairs())
