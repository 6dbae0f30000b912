"""Binary COPY streams built by numpy round-trip through a real PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from neardup.errors import DatabaseError, InternalError
from neardup.storage.binary import Int2s, Int8s, Kind, copy_stream, signature_bytes, signature_matrix
from neardup.storage.connect import Connection, connect

pytestmark = pytest.mark.distributed_variant


@pytest.fixture(scope="module")
def conn(database_url: str) -> Iterator[Connection]:
    c = connect(database_url)
    yield c
    c.close()


@settings(max_examples=25)
@given(
    n=st.integers(0, 40),
    width=st.integers(1, 9),
    seed=st.integers(0, 2**32 - 1),
)
def test_copy_stream_round_trip(conn: Connection, n: int, width: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    i2 = rng.integers(-(2**15), 2**15, n, dtype=np.int16)
    i8 = rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64)
    f8 = rng.random(n)
    raw = rng.integers(0, 256, (n, 16), dtype=np.uint8)
    sig = rng.integers(0, 2**32, (n, width), dtype=np.uint32)
    with conn.transaction(force_rollback=True):
        conn.execute("CREATE TEMP TABLE t (a int2, b int8, c float8, d bytea, e bytea)")
        with conn.cursor() as cur, cur.copy("COPY t FROM STDIN (FORMAT BINARY)") as cp:
            columns: list[tuple[Kind, np.ndarray]] = [("int2", i2), ("int8", i8), ("float8", f8)]
            cp.write(copy_stream([*columns, ("bytea", raw), ("bytea", signature_bytes(sig))]))
        with conn.cursor(binary=True) as cur:
            rows = cur.execute("SELECT a, b, c, d, e FROM t").fetchall()
        assert [r[0] for r in rows] == i2.tolist()
        assert [r[1] for r in rows] == i8.tolist()
        assert [r[2] for r in rows] == f8.tolist()
        assert [bytes(r[3]) for r in rows] == [bytes(x) for x in raw]
        loaded = signature_matrix([r[4] for r in rows], width)
        assert loaded.dtype == np.uint32
        assert loaded.shape == sig.shape
        assert (loaded == sig).all()


@given(hnp.arrays(np.int64, st.integers(0, 50), elements=st.integers(-(2**63), 2**63 - 1)))
@settings(max_examples=15)
def test_int8_arrays_load_as_numpy(conn: Connection, values: np.ndarray) -> None:
    with conn.cursor(binary=True) as cur:
        row = cur.execute("SELECT %s::int8[]", (values.tolist(),)).fetchone()
    assert row is not None
    assert row[0].dtype == np.int64
    assert row[0].tolist() == values.tolist()


@given(
    hnp.arrays(
        np.uint32,
        st.tuples(st.integers(1, 6), st.integers(1, 9)),
        elements=st.integers(0, 2**32 - 1),
    )
)
@settings(max_examples=15)
def test_aggregated_signatures_load_as_a_matrix(conn: Connection, sigs: np.ndarray) -> None:
    """string_agg of stored signatures is one value: one load for many signatures, each value in
    place; each is stored big-endian, as int4send writes the uint32 value's bits."""
    with conn.transaction(force_rollback=True):
        conn.execute("CREATE TEMP TABLE s (i int8, e bytea)")
        with conn.cursor() as cur, cur.copy("COPY s FROM STDIN (FORMAT BINARY)") as cp:
            cp.write(copy_stream([("int8", np.arange(sigs.shape[0])), ("bytea", signature_bytes(sigs))]))
        with conn.cursor(binary=True) as cur:
            row = cur.execute("SELECT string_agg(e, ''::bytea ORDER BY i) FROM s").fetchone()
            first = cur.execute("SELECT e FROM s WHERE i = 0").fetchone()
            bits = cur.execute("SELECT int4send(%s::int4)", (int(sigs[0, 0].view(np.int32)),)).fetchone()
    assert row is not None
    assert first is not None
    assert bits is not None
    matrix = signature_matrix([row[0]], sigs.shape[1])
    assert matrix.dtype == np.uint32
    assert matrix.shape == sigs.shape
    assert (matrix == sigs).all()
    assert bytes(first[0][:4]) == bytes(bits[0])


def test_stored_signatures_of_another_width_are_refused() -> None:
    with pytest.raises(DatabaseError, match="12 bytes are not 2 values each"):
        signature_matrix([bytes(12)], 2)


def test_a_stream_larger_than_one_send_arrives_whole(conn: Connection) -> None:
    """A batch's stream (here 10 MB of signatures, far over what psycopg puts in one message) is
    sent from the one buffer in chunks: every row arrives, every value in place."""
    rng = np.random.default_rng(7)
    sigs = rng.integers(0, 2**32, (20_000, 128), dtype=np.uint32)
    stream = copy_stream([("int8", np.arange(sigs.shape[0])), ("bytea", signature_bytes(sigs))])
    assert stream.nbytes > 20_000 * 128 * 4
    with conn.transaction(force_rollback=True):
        conn.execute("CREATE TEMP TABLE big (i int8, e bytea)")
        with conn.cursor() as cur, cur.copy("COPY big FROM STDIN (FORMAT BINARY)") as cp:
            cp.write(stream)
        with conn.cursor(binary=True) as cur:
            row = cur.execute("SELECT string_agg(e, ''::bytea ORDER BY i), count(*) FROM big").fetchone()
    assert row is not None
    assert row[1] == sigs.shape[0]
    assert (signature_matrix([row[0]], 128) == sigs).all()


@given(
    hnp.arrays(np.int64, st.integers(0, 50), elements=st.integers(-(2**63), 2**63 - 1)),
    hnp.arrays(np.int16, st.integers(0, 50), elements=st.integers(-(2**15), 2**15 - 1)),
)
@settings(max_examples=15)
def test_array_parameters_bind_as_typed_arrays(
    conn: Connection, wide: np.ndarray, narrow: np.ndarray
) -> None:
    """Int8s and Int2s bind as int8[] and int2[] (the server's own types, no cast needed) with
    every value as it was, in order."""
    row = conn.execute(
        "SELECT %s, pg_typeof(%s)::text, %s, pg_typeof(%s)::text",
        (Int8s(wide), Int8s(wide), Int2s(narrow), Int2s(narrow)),
    ).fetchone()
    assert row == (wide.tolist(), "bigint[]", narrow.tolist(), "smallint[]")


def test_array_parameters_out_of_range_or_not_flat_are_refused(conn: Connection) -> None:
    with pytest.raises(InternalError, match="out of range for >i2"):
        conn.execute("SELECT %s", (Int2s(np.array([2**15])),))
    with pytest.raises(InternalError, match="out of range for >i8"):
        conn.execute("SELECT %s", (Int8s(np.array([2**64 - 1], dtype=np.uint64)),))
    with pytest.raises(InternalError, match="must be 1-D"):
        conn.execute("SELECT %s", (Int8s(np.zeros((2, 2), dtype=np.int64)),))


def test_mismatched_column_lengths_are_refused() -> None:
    with pytest.raises(InternalError, match="column 1 has 2 rows"):
        copy_stream([("int4", np.arange(3)), ("int8", np.arange(2))])
