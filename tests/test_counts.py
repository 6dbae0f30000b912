"""Counts agree: what ``add`` reports, ``stats`` and ``collections`` count, the listings list and
the review pages show are the same things under the same names (text pairs, identical pairs,
document pairs, clusters)."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest

from tests.conftest import Run

pytestmark = pytest.mark.distributed_variant

BASE = "the storm cut power to forty thousand homes across the northern valley on tuesday night"
# Three texts that pair with each other, two of them with copies, and one text alone twice.
TEXTS = {
    "a1": BASE,
    "a2": BASE,
    "a3": BASE,
    "b1": BASE + " officials said",
    "b2": BASE + " officials said",
    "c1": BASE + " officials said on wednesday",
    "d1": "an unrelated note about the weather in the south, nothing alike",
    "d2": "an unrelated note about the weather in the south, nothing alike",
}


def test_add_stats_and_listings_count_the_same_things(cli: Run, tmp_path: Path) -> None:
    source = tmp_path / "docs.jsonl"
    source.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in TEXTS.items()))
    assert cli("init", "--threshold", "0.5")[0] == 0
    status, _, err = cli("add", str(source))
    assert status == 0, err
    match = re.search(r"new text pairs (\d+)", err)
    assert match, err
    stats = json.loads(cli("stats", "--format", "json")[1])
    (listing,) = [
        c for c in json.loads(cli("collections", "--format", "json")[1]) if c["name"] == cli.collection
    ]
    listed = [json.loads(line) for line in cli("pairs", "--format", "jsonl")[1].splitlines()]
    clusters = [json.loads(line) for line in cli("clusters", "--format", "jsonl")[1].splitlines()]
    # Pairs of distinct texts: a-b, a-c, b-c; as add reported them.
    assert int(match.group(1)) == stats["text_pairs"] == listing["text_pairs"] == 3
    # Identical pairs: 3 of the a's, 1 of the b's, 1 of the d's.
    identical = [p for p in listed if p["jaccard"] == 1.0 and TEXTS[p["id_a"]] == TEXTS[p["id_b"]]]
    assert stats["identical_pairs"] == len(identical) == 5
    # Pairs of documents: every two documents of a stored pair of texts, and the identical ones.
    expected = {
        (x, y)
        for x, y in itertools.combinations(sorted(TEXTS), 2)
        if TEXTS[x] == TEXTS[y] or (x[0] in "abc" and y[0] in "abc")
    }
    assert {(p["id_a"], p["id_b"]) for p in listed} == expected
    assert stats["document_pairs"] == listing["document_pairs"] == len(listed) == 3 * 2 + 3 * 1 + 2 * 1 + 5
    assert stats["contents"] == 4
    # Clusters: the a/b/c one and the d copies, as many as the listing has ids.
    assert stats["clusters"] == listing["clusters"] == len({r["cluster"] for r in clusters}) == 2
    assert stats["documents"] == listing["documents"] == len(TEXTS)
    # What the collection keeps, beside its counts: typed values of one object.
    assert (stats["keep"], stats["neighbours"], stats["changes_feed"]) == ("first", False, False)
    assert stats["largest_buckets"][0].keys() == {"band", "bucket", "contents"}
