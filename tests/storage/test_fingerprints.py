"""The fingerprint rows of a collection with neighbours (``storage.fingerprints``): what a query's
counting statement returns, against the rows computed in numpy, and the signatures it reads."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest

from neardup.core.fingerprints import fingerprints
from neardup.core.sketch import Sketcher
from neardup.storage import fingerprints as stored
from neardup.storage.connect import transaction
from tests._corpus import planted_corpus

pytestmark = pytest.mark.distributed_variant


@pytest.fixture(params=["in the statement", "here"])
def grouped(request: Any, monkeypatch: Any) -> str:
    """Each count grouped both ways a server may: by the statement, and here after reading each
    probe's holders (on a distributed collection both are the steps')."""
    if request.param == "here":
        monkeypatch.setattr(stored, "_GROUPED_MOST", 0)
    return str(request.param)


def _with_boilerplate(make_index: Any) -> tuple[Any, list[tuple[str, str]], Sketcher, Any, Any]:
    """A collection with neighbours whose texts share one family's boilerplate, which makes
    fingerprints held by many contents; its documents, sketcher and (row, fingerprint) pairs."""
    docs = planted_corpus(10, 3, seed=5)
    docs += [
        (f"b{n}", f"text number {n} " * 3 + "shared boilerplate of a package family " * 4) for n in range(30)
    ]
    index = make_index(neighbours=True)
    index.add(docs)
    sketcher = Sketcher(index.params)
    rows, fp = fingerprints(sketcher.shingles([t for _, t in docs], unique=False), index.params.k)
    return index, docs, sketcher, rows, fp


def test_sharing_counts_each_content_and_names_the_common_fingerprints(make_index: Any, grouped: str) -> None:
    index, docs, sketcher, rows, fp = _with_boilerplate(make_index)
    scope = index._scope
    names = {d: n for n, (d, _) in enumerate(docs)}
    content = {
        r[0]: r[1]
        for r in scope.conn.execute(
            scope.sql("SELECT external_id, content_id FROM {documents_p} WHERE collection_id = %s"),
            (scope.collection_id,),
        ).fetchall()
    }
    probe = distinct_fp = np.unique(fp[np.isin(rows, [names["b0"], names[docs[0][0]]])])
    holders: dict[int, set[int]] = {}
    for r, f in zip(rows.tolist(), fp.tolist(), strict=True):
        holders.setdefault(f, set()).add(content[docs[r][0]])
    commons = []
    for cap in (1, 5, 1_000):
        with transaction(scope.conn):
            ids, shared, sizes, common, _ = stored.sharing(scope, probe, cap)
        expected_common = {f for f in distinct_fp.tolist() if len(holders[f]) > cap}
        commons.append(expected_common)
        assert set(common.tolist()) == expected_common
        counts = Counter(c for f in distinct_fp.tolist() if f not in expected_common for c in holders[f])
        assert dict(zip(ids.tolist(), shared.tolist(), strict=True)) == dict(counts)
        lengths = sketcher.shingles([t for _, t in docs], unique=False).lengths()
        by_content = {content[d]: int(lengths[n]) for d, n in names.items()}
        assert all(by_content[i] == s for i, s in zip(ids.tolist(), sizes.tolist(), strict=True))
    assert commons[1]  # the boilerplate's fingerprints are common at cap 5
    assert not commons[2]
    with transaction(scope.conn):
        got, sigs = stored.signatures(scope, ids, index.params.num_perm)
    order = np.argsort(got)
    want = sketcher.sketch([docs[n][1] for n in range(len(docs))], hashed=False).signatures
    first = {content[d]: n for d, n in reversed(list(names.items()))}
    assert sorted(got.tolist()) == sorted(ids.tolist())
    for i, row in zip(got[order].tolist(), sigs[order], strict=True):
        assert (row == want[first[i]]).all()


def _lookup_definition(index: Any) -> str:
    scope = index._scope
    row = scope.conn.execute(
        "SELECT pg_get_indexdef(to_regclass(%s))", (scope.sql("{bucket_index_q}").as_string(scope.conn),)
    ).fetchone()
    return str(row[0]) if row and row[0] else ""


def test_holders_are_read_from_the_lookup_index_alone_only_where_neighbours_are_kept(make_index: Any) -> None:
    docs = planted_corpus(30, 3, seed=11)
    plain, kept = make_index(), make_index(neighbours=True)
    for index in (plain, kept):
        index.add(docs)
        # A later batch into an indexed partition, and a rebuild, keep the index's kind.
        index.add([("late", docs[0][1] + " and a late line")])
    assert "INCLUDE" not in _lookup_definition(plain)  # a collection without neighbours pays nothing
    assert _lookup_definition(kept).endswith("(bucket) INCLUDE (content_id)")
    kept.rebuild(bands=kept.params.bands - 2, rows=kept.params.rows)
    assert _lookup_definition(kept).endswith("(bucket) INCLUDE (content_id)")
    scope = kept._scope
    probe = np.asarray([int(fp) for fp in _stored_fingerprints(kept)[:5]], dtype=np.int64)
    with transaction(scope.conn):
        scope.conn.execute("SET LOCAL enable_seqscan = off")
        scope.conn.execute("SET LOCAL enable_bitmapscan = off")
        plan = "\n".join(
            r[0]
            for r in scope.conn.execute(
                scope.sql("EXPLAIN SELECT content_id FROM {buckets_p} b WHERE b.bucket = ANY(%s)"),
                (probe.tolist(),),
            ).fetchall()
        )
    assert "Index Only Scan" in plan, plan


def _stored_fingerprints(index: Any) -> list[int]:
    scope = index._scope
    return [
        int(r[0])
        for r in scope.conn.execute(
            scope.sql("SELECT bucket FROM {buckets_p} WHERE band = -1 ORDER BY bucket LIMIT 20")
        ).fetchall()
    ]


def test_sharing_returns_only_the_contents_that_could_hold_the_share_asked(
    make_index: Any, grouped: str
) -> None:
    docs = planted_corpus(12, 4, seed=3)
    docs += [
        (f"b{n}", f"entry {n} " * 2 + "shared boilerplate of one package family " * 5) for n in range(12)
    ]
    docs += [(f"s{n}", "shared boilerplate of one package family") for n in range(3)]  # short, within
    index = make_index(neighbours=True)
    index.add(docs)
    sketcher = Sketcher(index.params)
    scope = index._scope
    shingled = sketcher.shingles([t for _, t in docs], unique=False)
    rows, fp = fingerprints(shingled, index.params.k)
    tally = {"contains": [0, 0], "large": [0, 0], "within": [0, 0]}  # [dropped, kept]
    for query in (0, 5, len(docs) - 4):
        own = np.unique(fp[rows == query])
        probe = np.unique(np.concatenate([own, fp[rows == (query + 1) % len(docs)][:3]]))
        for cap, share, slack in ((1_000, 0.3, 3.0), (1_000, 0.8, 0.0), (4, 0.5, 3.0), (1_000, 0.0, 0.0)):
            with transaction(scope.conn):
                all_ids, all_shared, all_sizes, common, _ = stored.sharing(scope, probe, cap)
                held = int(np.isin(own, common).sum())
                raised = all_shared + slack * np.sqrt(all_shared) + 1
                large = int(np.median(all_sizes)) if all_sizes.size else 1
                modes: dict[str, tuple[np.ndarray, dict[str, Any]]] = {
                    "contains": (raised >= share * (own.size - held), {}),
                    "large": (
                        (raised >= share * (own.size - held)) | (all_sizes >= large),
                        {"large": large},
                    ),
                    "within": (raised + held >= share * 0.06 * all_sizes, {"density": 0.06}),
                }
                for mode, (keep, extra) in modes.items():
                    ids, shared, sizes, common_too, _ = stored.sharing(
                        scope, probe, cap, own, share, slack, **extra
                    )
                    assert common.tolist() == common_too.tolist()
                    got = {
                        i: (n, z)
                        for i, n, z in zip(ids.tolist(), shared.tolist(), sizes.tolist(), strict=True)
                    }
                    want = zip(
                        all_ids[keep].tolist(),
                        all_shared[keep].tolist(),
                        all_sizes[keep].tolist(),
                        strict=True,
                    )
                    assert got == {i: (n, z) for i, n, z in want}, mode
                    tally[mode][0] += int((~keep).sum())
                    tally[mode][1] += int(keep.sum())
    # Each filter was put to the test both ways.
    assert all(dropped and kept for dropped, kept in tally.values()), tally


def test_the_first_two_tiers_are_one_statement_that_counts_under_the_first_where_it_may(
    make_index: Any, grouped: str
) -> None:
    index, docs, _, rows, fp = _with_boilerplate(make_index)
    scope = index._scope
    chosen = set()
    for query in (0, len(docs) - 1):
        own = np.unique(fp[rows == query])
        for bound, slack in ((0.3, 0.0), (0.5, 3.0), (0.05, 0.0), (1.0, 0.0)):
            with transaction(scope.conn):
                low = stored.sharing(scope, own, 5, own, 0.3, 3.0)
                high = stored.sharing(scope, own, 1_000, own, 0.3, 3.0)
                both = stored.sharing(scope, own, 1_000, own, 0.3, 3.0, first=(5, bound, slack))
            held = int(np.isin(own, low.common).sum())
            want = low if held + slack * np.sqrt(held) + 1 < bound * own.size else high
            assert both.cap == want.cap
            for got, expected in zip(both[:4], want[:4], strict=True):
                assert sorted(got.tolist()) == sorted(expected.tolist())
            chosen.add(both.cap)
    assert chosen == {5, 1_000}  # both ways taken


def test_the_long_contents_come_from_the_sizes_index_or_a_lookup_each_with_one_answer(
    make_index: Any,
) -> None:
    docs = planted_corpus(40, 3, seed=7)
    index = make_index(neighbours=True)
    index.add(docs)
    scope = index._scope
    with transaction(scope.conn):
        every = np.asarray(
            [r[0] for r in scope.conn.execute(scope.sql("SELECT content_id FROM {contents_p}")).fetchall()],
            dtype=np.int64,
        )
        size_of = stored._sizes(scope, every, None)
        ways = set()
        for large in sorted(set(size_of.values()))[:: max(1, len(size_of) // 6)]:
            longer = sum(s >= large for s in size_of.values())
            for ids in (every[:3], every[::2], every):
                got = stored._long(scope, ids, large)
                assert got == {i: size_of[i] for i in ids.tolist() if size_of[i] >= large}
                ways.add("index" if longer <= ids.size else "lookup")
    assert ways == {"index", "lookup"}
