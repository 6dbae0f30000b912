"""IngestMemory against plain sets of rows and hashes: the same answers for any order of adds and lookups."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.core.ingest_memory import IngestMemory

# Few bands and buckets, so that lookups hit often and buckets hold several contents.
_row = st.tuples(st.integers(0, 3), st.integers(-3, 3), st.integers(0, 10**12))
_batches = st.lists(st.lists(_row, max_size=40), max_size=12)


def _columns(rows: list[tuple[int, int, int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    band, bucket, content = zip(*rows, strict=True) if rows else ((), (), ())
    return np.array(band, np.int16), np.array(bucket, np.int64), np.array(content, np.int64)


@settings(max_examples=200, deadline=None)
@given(_batches, st.lists(st.tuples(st.integers(0, 3), st.integers(-3, 3)), unique=True, max_size=20))
def test_members_are_exactly_the_held_rows_in_the_wanted_buckets(
    batches: list[list[tuple[int, int, int]]], wanted: list[tuple[int, int]]
) -> None:
    memory = IngestMemory()
    held: list[tuple[int, int, int]] = []
    for rows in batches:
        shared = memory.add(*_columns(rows))
        buckets = {(b, k) for b, k, _ in rows}
        assert sorted(zip(*(c.tolist() for c in shared), strict=True)) == sorted(
            r for r in held if (r[0], r[1]) in buckets
        )
        held.extend(rows)
        # After every add, not only at the end: runs merge as they grow.
        band, bucket = _columns([(b, k, 0) for b, k in wanted])[:2]
        got = sorted(zip(*(column.tolist() for column in memory.members_of(band, bucket)), strict=True))
        assert got == sorted(r for r in held if (r[0], r[1]) in set(wanted))
        assert memory.rows == len(held)


def test_runs_stay_few_as_rows_grow() -> None:
    memory = IngestMemory()
    rng = np.random.default_rng(0)
    for i in range(64):
        memory.add(np.zeros(100, np.int16), rng.integers(-(2**63), 2**63 - 1, 100), np.arange(100) + 100 * i)
        assert len(memory._runs) <= 1 + int(np.log2(i + 1))
    assert memory.rows == 6400


@given(st.lists(st.tuples(st.binary(min_size=1, max_size=3), st.integers(1, 10**9)), max_size=30))
def test_content_ids_are_found_by_their_hashes(written: list[tuple[bytes, int]]) -> None:
    memory = IngestMemory()
    expected: dict[bytes, int] = {}
    for h, content_id in written:
        memory.add_contents([h], [content_id])
        expected[h] = content_id
    for h in {h for h, _ in written} | {b"never written"}:
        assert memory.content_of(h) == expected.get(h)
