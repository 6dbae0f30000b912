"""Top-k and containment queries of a collection with neighbours, against brute force."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neardup import neighbours as nb
from neardup.core.fingerprints import WINDOW, fingerprints, probes
from neardup.core.sketch import Sketcher
from neardup.errors import ParamsError
from neardup.storage import fingerprints as stored_fingerprints
from tests._corpus import planted_corpus
from tests.conftest import psycopg_url

pytestmark = pytest.mark.distributed_variant


def _sets(index: Any, texts: list[str]) -> list[set[int]]:
    shingled = Sketcher(index.params).shingles(texts, unique=True)
    return [set(s.tolist()) for s in shingled]


def _truth(index: Any, docs: list[tuple[str, str]], text: str) -> dict[str, tuple[int, int, int]]:
    """(shared, |text|, |doc|) of ``text`` with each stored document: the brute-force oracle."""
    mine, *theirs = _sets(index, [text, *(t for _, t in docs)])
    return {d: (len(mine & s), len(mine), len(s)) for (d, _), s in zip(docs, theirs, strict=True)}


def _jaccard(shared: int, a: int, b: int) -> float:
    return shared / (a + b - shared) if a + b - shared else 0.0


@pytest.fixture(scope="module")
def corpus() -> list[tuple[str, str]]:
    docs = planted_corpus(12, 3, seed=7)
    rng = random.Random(3)
    # Excerpts and extended versions of some sources, stored too.
    sources = [t for d, t in docs if "." not in d][:4]
    for n, text in enumerate(sources):
        words = text.split()
        cut = len(words) // 3
        docs.append((f"part{n}", " ".join(words[cut : 2 * cut])))
        docs.append((f"more{n}", text + " " + " ".join(rng.choice(words) for _ in range(40))))
    return docs


@pytest.fixture
def filled(make_index: Any, corpus: list[tuple[str, str]]) -> Any:
    index = make_index(neighbours=True)
    index.add(corpus)
    return index


def _sharing(index: Any, docs: list[tuple[str, str]], text: str) -> set[str]:
    """The stored documents with a fingerprint among ``text``'s probes: what the query can see."""
    sketcher = Sketcher(index.params)
    mine = set(probes(sketcher.shingles([text], unique=False), index.params.k).tolist())
    rows, fp = fingerprints(sketcher.shingles([t for _, t in docs], unique=False), index.params.k)
    return {d for n, (d, _) in enumerate(docs) if mine & set(fp[rows == n].tolist())}


def test_top_k_is_the_brute_force_top_k_of_what_shares_a_fingerprint(
    filled: Any, corpus: list[tuple[str, str]]
) -> None:
    floor = filled.params.neighbour_floor
    for doc_id, text in corpus[:20]:
        truth = {d: _jaccard(*v) for d, v in _truth(filled, corpus, text).items()}
        seen = _sharing(filled, corpus, text)
        found = filled.query(text, k=5)
        assert found == sorted(found, key=lambda r: (-r[1], r[0]))
        assert all(j >= floor and j == pytest.approx(truth[d], abs=1e-12) for d, j in found)
        best = sorted(((-j, d) for d, j in truth.items() if j >= floor and d in seen))[:5]
        assert [d for _, d in best] == [d for d, _ in found], doc_id
        assert [-j for j, _ in best] == pytest.approx([j for _, j in found], abs=1e-12), doc_id
        assert found[0] == (doc_id, 1.0) or found[0][1] == 1.0  # the text itself is stored


def test_containment_both_ways_is_brute_force_of_what_shares_a_fingerprint(
    filled: Any, corpus: list[tuple[str, str]]
) -> None:
    for n in range(4):
        whole = dict(corpus)[f"more{n}"]
        part = dict(corpus)[f"part{n}"]
        for text, way in ((part, "contains"), ("some new words here " + part, "contains"), (whole, "within")):
            truth = _truth(filled, corpus, text)
            share = {d: (s / a if way == "contains" else s / b) for d, (s, a, b) in truth.items()}
            expected = {d for d, c in share.items() if c >= 0.5}
            found = filled.query(text, min_containment=0.5, direction=way)
            assert {c.id for c in found} == expected & _sharing(filled, corpus, text)
            # Those that hold the text's run of words whole are always found.
            assert ({f"part{n}"} if way == "within" else {f"part{n}", f"more{n}"}) <= {c.id for c in found}
            for c in found:
                assert c.containment == pytest.approx(share[c.id], abs=1e-12)
                assert c.jaccard == pytest.approx(_jaccard(*truth[c.id]), abs=1e-12)
            assert found == sorted(found, key=lambda c: (-c.containment, -c.jaccard, c.id))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_every_excerpt_of_a_stored_text_finds_it(
    filled: Any, corpus: list[tuple[str, str]], data: st.DataObject
) -> None:
    doc_id, text = data.draw(st.sampled_from(corpus))
    size = data.draw(st.integers(min(len(text), 60), len(text)))
    start = data.draw(st.integers(0, len(text) - size))
    excerpt = text[start : start + size]
    found = {c.id: c.containment for c in filled.query(excerpt, min_containment=0.9)}
    assert found.get(doc_id) == pytest.approx(1.0)
    assert all(c >= 0.9 for c in found.values())


def test_bad_options_are_refused_clearly(filled: Any, make_index: Any) -> None:
    for bad in (0, 1.5, -0.1, True, "0.5"):
        with pytest.raises(ParamsError, match="min_containment must be in"):
            filled.query("text", min_containment=bad)
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ParamsError, match="top_k must be a positive integer"):
            filled.query("text", k=bad)
    with pytest.raises(ParamsError, match="direction must be one of"):
        filled.query("text", min_containment=0.5, direction="inside")
    with pytest.raises(ParamsError, match="not both"):
        filled.query("text", k=3, min_containment=0.5)
    plain = make_index()
    plain.add([("a", "a text of some length to look for")])
    for asked in ({"k": 3}, {"min_containment": 0.5}):
        with pytest.raises(ParamsError, match=r"rebuild it with them: index\.rebuild\(neighbours=True\)$"):
            plain.query("a text of some length", **asked)
    with pytest.raises(ParamsError, match=r"rebuild it with them: index\.rebuild\(neighbours=True\)$"):
        list(plain.check([("q", "a text")], k=2))
    with pytest.raises(ParamsError, match="neighbours need the stored texts"):
        make_index(neighbours=True, store_text=False)


def test_a_collection_without_neighbours_pays_nothing(make_index: Any, corpus: list[tuple[str, str]]) -> None:
    plain = make_index()
    plain.add(corpus)
    stats = plain.stats()
    assert stats.neighbour_rows == 0
    assert stats.neighbour_bytes == 0
    assert "neighbours" not in plain.params.to_dict()
    with_them = make_index(neighbours=True)
    with_them.add(corpus)
    theirs = with_them.stats()
    # The bands are the same; the fingerprints are counted apart from them.
    assert theirs.bucket_rows == stats.bucket_rows
    assert theirs.pairs == stats.pairs
    assert theirs.neighbour_rows > 0
    assert theirs.neighbour_bytes > 0
    assert sorted(with_them.pairs()) == sorted(plain.pairs())


def test_what_neighbours_cost_is_reported_as_theirs(make_index: Any, database_url: str, schema: str) -> None:
    # Their rows and indexes, and the content their lookup index carries in the bands' entries too:
    # the rest of the collection's bytes are what the same collection without neighbours takes.
    docs = planted_corpus(500, 5, seed=11)
    plain, with_them = make_index(), make_index(neighbours=True)
    plain.add(docs)
    with_them.add(docs)
    # A bulk load extends a table by many pages at once (PostgreSQL 16 on): VACUUM gives back the
    # empty ones at its end; those left amid the partition are shared out by rows, hence 3.5%
    # (without the bands' carried content ids counted to the neighbours, the rest is 5-7% over).
    with psycopg.connect(psycopg_url(database_url), autocommit=True) as conn:
        for index in (plain, with_them):
            found = conn.execute(
                f'SELECT collection_id FROM "{schema}".collections WHERE name = %s', [index.name]
            )
            (collection_id,) = found.fetchone() or (0,)
            conn.execute(f'VACUUM "{schema}".buckets_c{int(collection_id)}')
    mine, theirs = plain.stats(), with_them.stats()
    rest = theirs.bytes_on_disk - theirs.neighbour_bytes
    assert rest == pytest.approx(mine.bytes_on_disk, rel=0.035)


def test_removal_and_rebuild_keep_the_fingerprints_right(filled: Any, corpus: list[tuple[str, str]]) -> None:
    part = dict(corpus)["part0"]
    before = filled.stats().neighbour_rows
    assert "more0" in {c.id for c in filled.query(part, min_containment=0.9)}
    filled.remove(["more0"])
    assert filled.stats().neighbour_rows < before
    assert "more0" not in {c.id for c in filled.query(part, min_containment=0.9)}
    kept = filled.stats().neighbour_rows
    filled.rebuild(0.7)  # re-bands from signatures; the fingerprints come again from the texts
    assert filled.stats().neighbour_rows == kept
    assert [c.id for c in filled.query(part, min_containment=0.9)][:1] != []
    filled.rebuild(neighbours=False)
    assert filled.stats().neighbour_rows == 0
    with pytest.raises(ParamsError, match=r"rebuild it with them: index\.rebuild\(neighbours=True\)$"):
        filled.query(part, k=2)
    filled.rebuild(neighbours=True, neighbour_floor=0.5)
    assert filled.stats().neighbour_rows == kept
    assert all(j >= 0.5 for _, j in filled.query(part, k=50))


def test_check_takes_the_same_options(filled: Any, corpus: list[tuple[str, str]]) -> None:
    records = [(f"q{n}", text) for n, (_, text) in enumerate(corpus[:5])]
    checked = list(filled.check(records, k=3))
    assert [r.id for r in checked] == [r[0] for r in records]
    assert [r.matches for r in checked] == [filled.query(t, k=3) for _, t in records]
    contained = list(filled.check(records, min_containment=0.7, direction="within"))
    assert [r.matches for r in contained] == [
        filled.query(t, min_containment=0.7, direction="within") for _, t in records
    ]


def test_the_command_line_asks_both_questions(cli: Any, corpus: list[tuple[str, str]], tmp_path: Any) -> None:
    assert cli("init", "--neighbours")[0] == 0
    source = tmp_path / "docs.jsonl"
    import json

    source.write_text("".join(json.dumps({"id": d, "text": t}) + "\n" for d, t in corpus))
    assert cli("add", str(source))[0] == 0
    text = dict(corpus)["part1"]
    status, out, _ = cli("query", "--text", text, "--top", "2", "--format", "tsv")
    assert status == 0
    assert out.splitlines()[0].split("\t") == ["id", "jaccard"]
    assert len(out.splitlines()) == 3
    status, out, _ = cli("query", "--text", text, "--min-containment", "0.9", "--format", "tsv")
    assert status == 0
    assert out.splitlines()[0].split("\t") == ["id", "containment", "jaccard"]
    assert "more1" in out
    assert "part1" in out
    status, out, _ = cli("query", "--text", dict(corpus)["more1"], "--min-containment", "0.9", "--within")
    assert status == 0
    assert "part1" in out
    status, _, err = cli("query", "--text", text, "--min-containment", "1.5")
    assert status != 0
    assert "min_containment" in err
    status, _, err = cli("query", "--text", text, "--top", "0")
    assert status != 0
    status, out, _ = cli("check", str(source), "--min-containment", "0.95", "--format", "tsv")
    assert status == 0
    assert out.splitlines()[0].split("\t") == ["id", "match", "containment", "jaccard"]
    status, out, _ = cli("stats", "--format", "tsv")
    assert "neighbour_bytes_per_document" in out


def _words(rng: random.Random, n: int) -> list[str]:
    return ["".join(rng.choice("abcdefghij") for _ in range(rng.randint(3, 7))) for _ in range(n)]


def test_top_k_ranks_long_containing_texts_below_closer_short_ones(make_index: Any) -> None:
    """Many long stored texts that contain the query share more fingerprints with it than its
    edited copies do, yet are far from it: the top k is still the brute-force top k."""
    rng = random.Random(11)
    query = _words(rng, 40)
    docs = []
    for n in range(6):
        edited = list(query)
        for at in rng.sample(range(len(edited)), 2 + n):
            edited[at] = _words(rng, 1)[0]
        docs.append((f"near{n}", " ".join(edited)))
    for n in range(150):
        docs.append((f"long{n}", " ".join(_words(rng, 300) + query + _words(rng, 300))))
    index = make_index(neighbours=True)
    index.add(docs)
    text = " ".join(query)
    truth = {d: _jaccard(*v) for d, v in _truth(index, docs, text).items()}
    found = index.query(text, k=5)
    best = sorted(((-j, d) for d, j in truth.items() if j >= index.params.neighbour_floor))[:5]
    assert len(best) == 5
    assert [d for d, _ in found] == [d for _, d in best]
    assert [j for _, j in found] == pytest.approx([-j for j, _ in best], abs=1e-12)
    # The long ones do contain it whole, and the containment query finds every one of them.
    contained = {c.id for c in index.query(text, min_containment=0.95)}
    assert {f"long{n}" for n in range(150)} <= contained


@pytest.mark.parametrize("short_most", [nb.SHORT_MOST, 0])
def test_within_finds_short_boilerplate_through_common_fingerprints_without_their_holders(
    make_index: Any, monkeypatch: pytest.MonkeyPatch, short_most: int
) -> None:
    """A short stored text that is all boilerplate lies within a source that quotes it, though its
    every fingerprint is too common to read by its holders: it is found among the short stored
    texts (or, where too many are short, by the last tier), as brute force finds it."""
    rng = random.Random(5)
    boilerplate = " ".join(_words(rng, 18))
    docs = [(f"short{n}", boilerplate + (" " + _words(rng, 1)[0]) * n) for n in range(3)]
    docs += [(f"long{n}", " ".join([*_words(rng, 90), boilerplate, *_words(rng, 90)])) for n in range(30)]
    docs += [(f"other{n}", " ".join(_words(rng, 60))) for n in range(10)]
    index = make_index(neighbours=True)
    index.add(docs)
    source = " ".join([*_words(rng, 40), boilerplate, *_words(rng, 40)])
    truth = _truth(index, docs, source)
    expected = {d for d, (shared, _, size) in truth.items() if shared >= 0.5 * size}
    assert {"short0", "short1", "short2"} <= expected
    # The boilerplate's fingerprints, held by 33 stored texts, are common past a cap of 4.
    monkeypatch.setattr(nb, "TIERS", (2, 4, 1_000))
    monkeypatch.setattr(nb, "SHORT_MOST", short_most)
    caps: list[int] = []
    shorts: list[object] = []
    sharing, short_holders = stored_fingerprints.sharing, stored_fingerprints.short_holders

    def counted(scope: Any, keys: Any, cap: int, *rest: Any) -> Any:
        caps.append(cap)
        return sharing(scope, keys, cap, *rest)

    def short(*args: Any) -> Any:
        shorts.append(found := short_holders(*args))
        return found

    monkeypatch.setattr(stored_fingerprints, "sharing", counted)
    monkeypatch.setattr(stored_fingerprints, "short_holders", short)
    found = index.query(source, min_containment=0.5, direction="within")
    assert {c.id for c in found} == expected & _sharing(index, docs, source)
    for c in found:
        shared, _, size = truth[c.id]
        assert c.containment == pytest.approx(shared / size, abs=1e-12)
    if short_most:
        assert caps == [4]  # the common fingerprints' holders were never read
        assert shorts[-1] is not None
    else:
        assert shorts == [None, None]  # too many short texts by either bound
        assert caps == [4, 1_000]  # so the last tier, whole


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(0.0, 1.0), min_size=0, max_size=40),
    st.integers(1, 12),
    st.floats(0.0, 1.0),
)
def test_worth_verifying_keeps_every_candidate_that_could_make_the_top_k(
    estimates: list[float], k: int, floor: float
) -> None:
    e = np.asarray(estimates)
    kept = nb.worth_verifying(e, k, floor, 128)
    spread = nb.Z_BOUND * np.sqrt((e * (1 - e) + 1 / 128) / 128)
    low = np.sort(e - spread)[::-1]
    bar = max(floor, low[k - 1] if e.size >= k else 0.0)
    expected = np.flatnonzero(e + spread >= bar)
    assert sorted(kept.tolist()) == sorted(expected.tolist())[: nb.VERIFY_MAX]
    assert list(e[kept]) == sorted(e[kept], reverse=True)
    # The k best estimates are kept where they could reach the floor (their upper bounds reach
    # the k-th lower one).
    for best in np.argsort(-e, kind="stable")[:k].tolist():
        if e[best] + spread[best] >= floor:
            assert best in set(kept.tolist())


def test_fingerprint_jaccard_is_one_for_the_same_text_and_falls_with_length() -> None:
    size = 1_000
    per = (WINDOW + 1) / 2
    same = nb.fingerprint_jaccard(np.array([round(size / per)]), np.array([size]), size)
    assert same[0] == pytest.approx(1.0, abs=0.02)
    longer = nb.fingerprint_jaccard(
        np.array([round(size / per)] * 3), np.array([size, 2 * size, 4 * size]), size
    )
    assert longer[0] > longer[1] > longer[2]
    assert longer[2] == pytest.approx(0.25, abs=0.02)


def _vacuums(index: Any, database_url: str) -> int:
    """How many times the bucket partition was vacuumed by hand (autovacuum's runs are counted
    apart). VACUUM reports to the shared statistics at once; a new session reads them."""
    scope = index._scope
    with psycopg.connect(psycopg_url(database_url)) as conn:
        row = conn.execute(
            "SELECT vacuum_count FROM pg_stat_user_tables WHERE relid = %s::regclass",
            (scope.sql("{buckets_p}").as_string(scope.conn),),
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_a_large_add_vacuums_the_bucket_partition_so_that_holders_are_read_from_the_index_alone(
    make_index: Any, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Index-only reads skip the heap on the pages the visibility map marks all-visible, which a
    # VACUUM does (once no open snapshot predates the rows: not asserted, as other sessions of the
    # server may hold one).
    from neardup.ingest import writer

    monkeypatch.setattr(writer, "SETTLE_AFTER", 40)
    docs = planted_corpus(30, 3, seed=13)
    assert len(docs) >= 40
    kept, plain = make_index(neighbours=True), make_index()
    for index in (kept, plain):  # nothing but this add's own VACUUM may visit them
        index._scope.conn.execute(
            index._scope.sql("ALTER TABLE {buckets_p} SET (autovacuum_enabled = false)")
        )
    kept.add(docs[:10])
    assert _vacuums(kept, database_url) == 0  # a small add leaves it to autovacuum
    kept.add(docs[10:])
    plain.add(docs)
    assert _vacuums(kept, database_url) == 1
    assert _vacuums(plain, database_url) == 0  # a collection without neighbours is not vacuumed
