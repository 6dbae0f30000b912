"""The verification path's laws that need no database: a query's verification (one text against
the candidates it read) judges each candidate as ``verify`` judges any pair."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.config import IndexConfig
from neardup.core.sketch import Sketcher
from neardup.verification import Given, InMemory, SketchRows, verify, verify_query

WORDS = ["storm", "power", "homes", "county", "officials", "said", "monday", "cut", "across", "the"]
texts = st.lists(st.sampled_from(WORDS), min_size=0, max_size=12).map(" ".join)


@settings(max_examples=60, deadline=None)
@given(
    query=texts,
    stored=st.lists(texts, min_size=1, max_size=8),
    floor=st.sampled_from([0.0, 0.3, 0.5, 0.8, 1.0]),
    store_text=st.booleans(),
)
def test_a_query_is_verified_as_verify_verifies_each_pair(
    query: str, stored: list[str], floor: float, store_text: bool
) -> None:
    config = IndexConfig.new(0.5, store_text=store_text)
    sketcher = Sketcher(config.params)
    sketch = sketcher.sketch([query], hashed=False)
    ids = np.arange(10, 10 + len(stored), dtype=np.int64)
    candidates = Given(ids, sketcher.signatures(stored), stored)
    by_query = verify_query(config, sketcher, query, sketch.signatures[0], candidates.sigs, stored, floor)
    left = SketchRows.ids(np.zeros(ids.size, dtype=np.int64))
    by_pairs = verify(config, sketcher, candidates, left, ids, InMemory(SketchRows(1), sketch), floor)
    np.testing.assert_array_equal(by_query, by_pairs)
