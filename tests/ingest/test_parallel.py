"""Adding with several writer processes (ingest/parallel.py, ``add --jobs``) against a real
PostgreSQL: the same documents, pairs and clusters as one writer, errors where they stand, and a
killed writer survived by a re-run."""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from neardup.core.params import Params
from neardup.database import Database
from neardup.errors import CollectionNotFoundError, InputError, InternalError, ParamsError
from neardup.ingest.parallel import writer_of
from tests._corpus import brute_force_pairs, planted_corpus
from tests._state import collection_state
from tests.conftest import Run

pytestmark = pytest.mark.distributed_variant

GENEROUS = {"bands": 64, "rows": 2}  # no pair missed at these similarities: compare to brute force


def _edited(docs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """A second load: a third of the documents with new texts, a third as they were, new ones."""
    third = len(docs) // 3
    changed = [(i, t + " and a postscript that changes it") for i, t in docs[:third]]
    return changed + docs[third : 2 * third] + [(f"new-{i}", t[::-1]) for i, t in docs[:10]]


def test_several_writers_end_with_the_state_of_one(
    make_index: Callable[..., Any], database_url: str, schema: str
) -> None:
    docs = planted_corpus(n_sources=50, copies=3, seed=11)  # 200 documents, shuffled
    one, three = make_index(threshold=0.8, **GENEROUS), make_index(threshold=0.8, **GENEROUS)
    for load in (docs, _edited(docs)):
        # Batches of 7 over three writers: their transactions interleave many times, and near-copies
        # of one source go to different writers.
        alone = one.add(load, batch_size=7)
        split = three.add(load, batch_size=7, jobs=3)
        assert split == alone
    assert collection_state(database_url, schema, three.name).comparable() == (
        collection_state(database_url, schema, one.name).comparable()
    )
    final = dict(docs) | dict(_edited(docs))
    truth = brute_force_pairs(list(final.items()), Params(bands=64, rows=2), 0.8)
    assert {(a, b) for a, b, *_ in three.pairs()} == set(truth)


def test_a_repeated_id_is_refused_where_it_stands_and_jobs_must_be_positive(
    make_index: Callable[..., Any],
) -> None:
    index = make_index()
    docs = [(f"d{i}", f"text number {i} with a few words") for i in range(50)]
    with pytest.raises(InputError, match=r"record 50: id 'd3' repeats record 3"):
        index.add([*docs, ("d3", "again")], jobs=2)
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ParamsError, match="jobs"):
            index.add(docs, jobs=bad)


def test_ids_go_to_writers_stably_and_evenly() -> None:
    ids = [f"doc-{i}" for i in range(4000)]
    placed = [writer_of(i, 4) for i in ids]
    assert placed == [writer_of(i, 4) for i in ids]  # the same every time (and in every process)
    counts = [placed.count(k) for k in range(4)]
    assert min(counts) > 800  # 1000 each expected
    assert writer_of("\udcff-lone-surrogate", 3) in range(3)


def test_a_killed_writer_fails_the_call_and_a_rerun_ends_as_one_run(
    make_index: Callable[..., Any], database_url: str, schema: str
) -> None:
    docs = planted_corpus(n_sources=150, copies=3, seed=5)  # 600 documents
    killed, whole = make_index(threshold=0.8, **GENEROUS), make_index(threshold=0.8, **GENEROUS)

    def kill_a_writer_midway() -> Iterator[tuple[str, str]]:
        for n, doc in enumerate(docs):
            if n == len(docs) // 2:
                victim = multiprocessing.active_children()[0]
                assert victim.pid is not None
                os.kill(victim.pid, signal.SIGKILL)
            yield doc

    with pytest.raises(InternalError, match="ended without a word"):
        killed.add(kill_a_writer_midway(), batch_size=20, jobs=2)
    killed.add(docs, batch_size=20, jobs=2)
    whole.add(docs, batch_size=20)
    after = collection_state(database_url, schema, killed.name)
    assert after.comparable() == collection_state(database_url, schema, whole.name).comparable()
    assert after.dangling == 0


def test_add_jobs_on_the_command_line(cli: Run, tmp_path: Path) -> None:
    docs = planted_corpus(n_sources=30, copies=2, seed=3)
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in docs), encoding="utf-8")
    assert cli("init", "--threshold", "0.8", "--bands", "64", "--rows", "2")[0] == 0
    status, _, err = cli("add", str(path), "--jobs", "3", "--batch-size", "10")
    assert status == 0, err
    assert f"added {len(docs)}, replaced 0" in err
    status, out, _ = cli("pairs", "--format", "jsonl")
    listed = {(p["id_a"], p["id_b"]) for p in map(json.loads, out.splitlines())}
    assert listed == set(brute_force_pairs(docs, Params(bands=64, rows=2), 0.8))
    assert cli("add", str(path), "--jobs", "0")[0] != 0


def test_a_writers_error_reaches_the_caller_with_its_class(
    make_index: Callable[..., Any], database_url: str, schema: str
) -> None:
    index = make_index()
    with Database(database_url, schema) as db:
        assert db.drop(index.name)
    # Each writer opens the collection on its own connection, and finds it gone.
    with pytest.raises(CollectionNotFoundError, match=index.name):
        index.add([(f"d{i}", f"text {i}") for i in range(10)], jobs=2)


def _ids_for(writer: int, prefix: str, count: int) -> list[str]:
    """``count`` ids that ``writer_of(id, 2)`` sends to ``writer``."""
    found: list[str] = []
    n = 0
    while len(found) < count:
        if writer_of(candidate := f"{prefix}{n}", 2) == writer:
            found.append(candidate)
        n += 1
    return found


def test_first_means_first_in_the_input_whichever_writer_commits_first(
    make_index: Callable[..., Any], database_url: str, schema: str, tmp_path: Path, capsys: Any
) -> None:
    rng = random.Random(7)
    words = [f"word{i}" for i in range(20_000)]
    sources = [" ".join(rng.choice(words) for _ in range(60)) for _ in range(20)]
    early = _ids_for(0, "early-", len(sources))  # first in the input, all to writer 0
    late = _ids_for(1, "late-", len(sources))  # near-copies, last in the input, all to writer 1
    filler = _ids_for(0, "filler-", 3000)  # keep writer 0 busy: writer 1 commits its batch first
    docs = [*zip(early, sources, strict=True)]
    docs += [(i, " ".join(rng.choice(words) for _ in range(150))) for i in filler]
    docs += [(i, s + " and a last word") for i, s in zip(late, sources, strict=True)]
    one, two = make_index(threshold=0.8, **GENEROUS), make_index(threshold=0.8, **GENEROUS)
    assert one.keep == two.keep == "first"
    one.add(docs, batch_size=5000)
    two.add(docs, batch_size=5000, jobs=2)

    def kept(index: Any) -> list[tuple[str, list[str]]]:
        return sorted((c.representative, list(c)) for c in index.clusters())

    assert kept(two) == kept(one)
    assert sorted(rep for rep, _ in kept(two)) == sorted(early)
    # dedup keeps the same records after either add: each cluster's earliest in the input.
    path = tmp_path / "input.jsonl"
    path.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in docs), encoding="utf-8")
    kept_records = []
    for index in (one, two):
        out = tmp_path / f"{index.name}.jsonl"
        status, _, err = Run(database_url, schema, index.name, capsys)("dedup", str(path), "--out", str(out))
        assert status == 0, err
        kept_records.append([json.loads(line)["id"] for line in out.read_text().splitlines()])
    assert kept_records[1] == kept_records[0]
    assert set(early) <= set(kept_records[1])
    assert not set(late) & set(kept_records[1])
