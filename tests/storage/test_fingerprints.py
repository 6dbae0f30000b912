"""The fingerprint rows of a collection with neighbours (``storage.fingerprints``): what a query's
counting statement returns, against the rows computed in numpy, and the signatures it reads."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from neardup.core.fingerprints import fingerprints
from neardup.core.sketch import Sketcher
from neardup.storage import fingerprints as stored
from neardup.storage.connect import transaction
from tests._corpus import planted_corpus


def test_sharing_counts_each_content_and_names_the_common_fingerprints(make_index: Any) -> None:
    docs = planted_corpus(10, 3, seed=5)
    # The same boilerplate in many texts makes fingerprints held by many contents.
    docs += [
        (f"b{n}", f"text number {n} " * 3 + "shared boilerplate of a package family " * 4) for n in range(30)
    ]
    index = make_index(neighbours=True)
    index.add(docs)
    sketcher = Sketcher(index.params)
    rows, fp = fingerprints(sketcher.shingles([t for _, t in docs], unique=False), index.params.k)
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
            ids, shared, sizes, common = stored.sharing(scope, probe, cap)
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
