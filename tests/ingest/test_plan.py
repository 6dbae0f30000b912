"""A batch plan's new content ids: finding them (``slots``) and giving them other ids
(``rebased``, ``with_new_ids``), as a batch does that took its ids before its turn."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from neardup.ingest.plan import BatchPlan

# Stored content ids are below 1,000 here; the batch's new ones are 1,000 and up.
STORED = st.lists(st.integers(1, 999), max_size=20)


def _plan(stored: list[int], n_new: int, bearing: list[bool]) -> BatchPlan:
    new_ids = 1_000 + np.arange(n_new, dtype=np.int64)
    # One document per new content, then one per stored content, in a shuffled but fixed order.
    doc_contents = np.concatenate([new_ids[::-1], np.asarray(stored, dtype=np.int64)])
    mask = np.asarray(bearing[:n_new] + [True] * (n_new - len(bearing)), dtype=bool)[:n_new]
    return BatchPlan(
        unchanged=0,
        replaced_docs=[],
        doc_positions=np.arange(doc_contents.size, dtype=np.int64),
        doc_ids=np.arange(doc_contents.size, dtype=np.int64),
        doc_contents=doc_contents,
        new_positions=np.arange(n_new, dtype=np.int64),
        new_ids=new_ids,
        first_new=1_000,
        bearing_ids=new_ids[mask],
        keys=np.zeros((int(mask.sum()), 2), dtype=np.int64),
        bulk=False,
        empty=0,
        next_doc_id=doc_contents.size,
    )


@given(stored=STORED, n_new=st.integers(0, 30), bearing=st.lists(st.booleans(), max_size=30), data=st.data())
def test_new_ids_given_anew_carry_their_documents_and_bucket_rows(
    stored: list[int], n_new: int, bearing: list[bool], data: st.DataObject
) -> None:
    plan = _plan(stored, n_new, bearing)
    # Other ids for the new contents, as after contents another writer stored were withdrawn:
    # distinct, not below first_new, in any order.
    first = data.draw(st.integers(2_000, 3_000))
    pool = data.draw(st.permutations(range(first, first + 3 * n_new + 1)))
    ids = np.asarray(pool[:n_new], dtype=np.int64)
    moved = plan.with_new_ids(ids, first)
    assert moved.slots(ids).tolist() == list(range(n_new))
    assert moved.slots(np.asarray(stored, dtype=np.int64)).tolist() == [-1] * len(stored)
    assert moved.slots(plan.new_ids).tolist() == [-1] * n_new  # the old ids are nobody's now
    # Each document keeps its content: a new one by its slot, a stored one as it was.
    expected = [int(ids[c - 1_000]) if c >= 1_000 else c for c in plan.doc_contents.tolist()]
    assert moved.doc_contents.tolist() == expected
    assert moved.bearing_ids.tolist() == [int(ids[c - 1_000]) for c in plan.bearing_ids.tolist()]
    again = plan.rebased(first)
    assert again.new_ids.tolist() == list(range(first, first + n_new))
    assert again.is_new(again.new_ids).all()
    assert not again.is_new(np.asarray(stored, dtype=np.int64)).any()
